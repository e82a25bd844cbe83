"""Baseline changes without editing a suite file: ``GPQA=0.3`` as a new suite.

``lbnorm impact --set-bound GPQA=0.3`` compares a suite with a copy whose bounds
are overridden. A benchmark-wide override (``GPQA=0.3``) sets every subtask of
the benchmark; ``BBH/navigate=0.55`` sets one subtask (not allowed for pooled
benchmarks, whose subtasks share one bound). Values are fractions or ratios
(``1/3``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path

from lbnorm._runtime import entry_point
from lbnorm.analysis.diff import Diff, diff_results
from lbnorm.core.errors import OptionsError, SuiteError
from lbnorm.core.options import DEFAULT_SUITE, RunOptions
from lbnorm.pipeline import run
from lbnorm.suites import Suite, benchmark_hint, load_suite, matching_benchmarks

__all__ = [
    "BoundOverride",
    "compare_suites",
    "override_bounds",
    "parse_bound_override",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class BoundOverride:
    """A new lower bound for a benchmark's subtasks, or for one subtask.

    Attributes:
        benchmark: The benchmark, as the suite spells it.
        subtask: One subtask, or None for all of the benchmark's.
        lower_bound: The new bound in [0, 1).
    """

    benchmark: str
    subtask: str | None
    lower_bound: float

    def __str__(self) -> str:
        where = (
            self.benchmark
            if self.subtask is None
            else f"{self.benchmark}/{self.subtask}"
        )
        return f"{where}={self.lower_bound:g}"


def parse_bound_override(text: str) -> BoundOverride:
    """Parse ``BENCHMARK[/SUBTASK]=BOUND``.

    BOUND is a decimal (``0.3``, ``2.5e-1``) or a ratio of whole numbers
    (``1/3``), read exactly and then rounded once; its text is checked before it
    is read, so that ``1e100000000`` (a number of a hundred million digits, as an
    exact fraction) is refused at once rather than after minutes of arithmetic.

    Raises:
        OptionsError: Not of that form, or the bound is not a number in [0, 1)
            (a usage error, exit 2).

    Examples:
        >>> parse_bound_override("GPQA=0.3")
        BoundOverride(benchmark='GPQA', subtask=None, lower_bound=0.3)
        >>> parse_bound_override("MUSR/team_allocation=1/3").lower_bound == 1 / 3
        True
        >>> parse_bound_override("GPQA=1e100000000")
        Traceback (most recent call last):
        ...
        lbnorm.core.errors.OptionsError: bound override 'GPQA=1e100000000': expected BENCHMARK[/SUBTASK]=BOUND with BOUND in [0, 1), a decimal (0.3, 2.5e-1) or a ratio (1/3).
        Hint: e.g. --set-bound GPQA=0.3 or --set-bound MUSR/team_allocation=1/3.
    """
    where, is_pair, value = text.rpartition("=")
    benchmark, _, subtask = where.partition("/")
    bound = _bound(value.strip())
    if not is_pair or not benchmark.strip() or bound is None:
        shown = text if len(text) <= 80 else f"{text[:60]}...({len(text):,} characters)"
        msg = (
            f"bound override {shown!r}: expected BENCHMARK[/SUBTASK]=BOUND with BOUND in [0, 1), "
            "a decimal (0.3, 2.5e-1) or a ratio (1/3).\n"
            "Hint: e.g. --set-bound GPQA=0.3 or --set-bound MUSR/team_allocation=1/3."
        )
        raise OptionsError(msg)
    return BoundOverride(
        benchmark=benchmark.strip(), subtask=subtask.strip() or None, lower_bound=bound
    )


#: A bound's text: a decimal with at most a three-digit exponent, or a ratio of
#: whole numbers; at most 40 characters, so reading it exactly is cheap.
_BOUND_TEXT = re.compile(
    r"(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d{1,3})?|\d+/\d+", flags=re.ASCII
)


def _bound(text: str) -> float | None:
    """The bound `text` gives, if it is a number in [0, 1); else None.

    The value is compared with 1 exactly and as the float it rounds to: a text
    just under 1 (``0.99999999999999999``) rounds to 1.0, which no bound may be.
    """
    if len(text) > 40 or not _BOUND_TEXT.fullmatch(text):
        return None
    try:
        exact = Fraction(text)
    except ZeroDivisionError:  # (1/0)
        return None
    if not 0 <= exact < 1:
        return None
    bound = float(exact)
    return bound if bound < 1.0 else None


def override_bounds(suite: Suite, overrides: Sequence[BoundOverride]) -> Suite:
    """Return a copy of `suite` with the given lower bounds.

    Args:
        suite: The suite to start from.
        overrides: The new bounds, applied in order.

    Returns:
        The new suite, named ``<display name> (<overrides>)``; its ``sha256`` hashes the
        original's and the overrides.

    Raises:
        SuiteError: An unknown benchmark or subtask, or a one-subtask override of
            a pooled benchmark. Benchmarks are named as everywhere else
            (:func:`lbnorm.suites.matching_benchmarks`: exact, any case, or a unique
            prefix: ``gpqa=0.3``); subtasks exactly.

    Examples:
        >>> from lbnorm import load_suite
        >>> changed = override_bounds(load_suite("openllm-v2"), [parse_bound_override("GPQA=0.3")])
        >>> changed.name, sorted(set(changed.subtask_table().query("benchmark == 'GPQA'")["lower_bound"]))
        ('openllm-v2 (GPQA=0.3)', [0.3])
    """
    benchmarks = {benchmark.name: benchmark for benchmark in suite.benchmarks}
    overrides = [_named(override, suite) for override in overrides]  # a handful
    for override in overrides:
        benchmark = benchmarks[override.benchmark]
        names = [subtask.name for subtask in benchmark.subtasks]
        if override.subtask is not None and override.subtask not in names:
            msg = f"--set-bound {override}: {benchmark.name} has no subtask {override.subtask!r}.\nHint: use one of {names[:5]}{' ...' if len(names) > 5 else ''}."
            raise SuiteError(msg)
        if (
            override.subtask is not None
            and benchmark.aggregation == "pool-then-normalize"
            and len(names) > 1
        ):
            msg = (
                f"--set-bound {override}: {benchmark.name} pools its subtasks, which share one bound.\n"
                f"Hint: set the whole benchmark: --set-bound {benchmark.name}={override.lower_bound:g}."
            )
            raise SuiteError(msg)
        subtasks = tuple(
            replace(subtask, lower_bound=override.lower_bound)
            if override.subtask in (None, subtask.name)
            else subtask
            for subtask in benchmark.subtasks  # a benchmark's subtasks, not rows
        )
        benchmarks[benchmark.name] = replace(benchmark, subtasks=subtasks)
    described = ", ".join(map(str, overrides))
    digest = hashlib.sha256(f"{suite.sha256} {described}".encode()).hexdigest()
    return replace(
        suite,
        name=f"{suite.display_name} ({described})",
        benchmarks=tuple(benchmarks[benchmark.name] for benchmark in suite.benchmarks),
        source=f"{suite.source} with {described}",
        sha256=digest,
    )


def _named(override: BoundOverride, suite: Suite) -> BoundOverride:
    """The override with its benchmark spelt as the suite spells it (``gpqa`` -> ``GPQA``)."""
    found = matching_benchmarks(override.benchmark, suite.benchmark_names)
    if len(found) == 1:
        return replace(override, benchmark=found[0])
    problem = (
        f"{override.benchmark!r} is ambiguous: {found[:5]}"
        if found
        else f"suite {suite.name!r} has no benchmark {override.benchmark!r}"
    )
    msg = f"--set-bound {override}: {problem}.\nHint: {benchmark_hint(suite.benchmark_names)}."
    raise SuiteError(msg)


@entry_point  # (Ctrl-C and SIGTERM held for the call)
def compare_suites(
    inputs: Sequence[str | Path] = (),
    *,
    suites: Sequence[str | Path] = (DEFAULT_SUITE,),
    set_bounds: Sequence[str] = (),
    intervals: bool = True,
    moved_places: int = 10,
    top: Sequence[int] = (10, 50, 100),
    options: RunOptions | None = None,
) -> Diff:
    """The same inputs under two suites: what a baseline change does.

    Args:
        inputs: As for :func:`lbnorm.run` (empty: the bundled demo).
        suites: The old suite and the new one; with one, the new one is the old
            with `set_bounds`.
        set_bounds: Bound overrides for the new suite (``GPQA=0.3``).
        intervals: Count rank moves beyond the rank intervals.
        moved_places: N in "moved more than N places".
        top: The k of the top-k overlaps.
        options: The options both runs use (``missing``, ...).

    Returns:
        The differences, labelled with the suites' display names
        (``openllm-v2 (modified)`` for an edited copy of a built-in suite; the
        source is added when both sides would read the same).

    Raises:
        SuiteError: A suite is invalid, or an override does not fit it.
        OptionsError: An override is not ``BENCHMARK[/SUBTASK]=BOUND``.
        ValueError: Not exactly one change to compare (no suite pair, no override).
    """
    if not 1 <= len(suites) <= 2 or (len(suites) == 1 and not set_bounds):
        msg = (
            "impact compares two suites: give two suites, or one and bound overrides.\n"
            "Hint: lbnorm impact --set-bound GPQA=0.3, or --suite OLD --suite NEW."
        )
        raise ValueError(msg)
    old_suite = load_suite(suites[0])
    new_suite = load_suite(suites[-1]) if len(suites) == 2 else old_suite
    if set_bounds:
        new_suite = override_bounds(
            new_suite, [parse_bound_override(text) for text in set_bounds]
        )
    old = run(inputs, suite=old_suite, options=options)
    new = run(inputs, suite=new_suite, options=options)
    diff = diff_results(
        old, new, intervals=intervals, moved_places=moved_places, top=top
    )
    return replace(diff, labels=_suite_labels(old_suite, new_suite))


def _suite_labels(old: Suite, new: Suite) -> tuple[str, str]:
    """Names for the two sides of an impact study that tell them apart.

    Each side is its :attr:`~lbnorm.suites.Suite.display_name`; when both read
    the same (two files that keep one name), each gets its source too.

    Examples:
        >>> from dataclasses import replace
        >>> v2 = load_suite("openllm-v2")
        >>> _suite_labels(v2, replace(v2, benchmarks=v2.benchmarks[:5]))
        ('openllm-v2', 'openllm-v2 (modified)')
        >>> _suite_labels(replace(v2, name="a", source="a.toml"), replace(v2, name="a", source="b.toml"))
        ('a [a.toml]', 'a [b.toml]')
    """
    labels = (old.display_name, new.display_name)
    if labels[0] != labels[1]:
        return labels
    return f"{labels[0]} [{old.source}]", f"{labels[1]} [{new.source}]"
