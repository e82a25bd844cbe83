"""Suites: a leaderboard's benchmarks, their subtasks' lower bounds, and their rules.

A suite is a TOML file (human-editable; editing a bound and re-running is how a
baseline change is reprocessed)::

    name = "my-suite"
    description = "optional"

    [[benchmarks]]
    name = "GPQA"
    aggregation = "pool-then-normalize"     # or "normalize-then-average"
    weight = 1.0                             # optional, weight in the average
    subtasks = [
      { name = "diamond", task = "leaderboard_gpqa_diamond", metric = "acc_norm,none",
        num_choices = 4, n_samples = 198 },
    ]

``num_choices`` gives ``lower_bound = 1/num_choices`` exactly (0 means a
generative task, bound 0); an explicit ``lower_bound`` overrides it. ``task`` and
``metric`` say where the score sits in an lm-evaluation-harness results file
(``results[task][metric]``); a subtask without ``task`` is read from score
tables only. ``cluster = "doc.passage_id"`` names the field of a per-sample line
(a dotted path; in a sample table, the column of that name) that groups its
documents, when several share a passage or a conversation: paired comparisons
and clustered standard errors (``docs/paired.md``) then count clusters, not
documents, as the independent draws. The subtasks of one task share their
documents, so they share the key.

A **pairwise** benchmark is scored from Chatbot Arena battles given beside the
results (see :mod:`lbnorm.ratings.pairwise_inputs`)::

    [[benchmarks]]
    name = "Arena"
    aggregation = "bradley-terry"
    bootstrap = 100                    # rounds for the standard error (0: none)
    subtasks = [ { name = "overall" } ]

A model's raw score is its **expected win rate against the field**: the mean,
over the other rated models, of its predicted chance of beating each (a fraction
in [0, 1]; no reference, no chance baseline, no clipping), so the subtask has no
bound and the score is that rate x 100. Its standard error is the standard
deviation of the same score over ``bootstrap`` seeded rounds of the fit.

That score moves when the field changes (a model joining or leaving moves
every other model's mean). Two forms do not:

* ``score = "reference"`` (implied by giving ``reference``): the chance of
  beating one ``reference`` model. Without a bound on the subtask it is that
  chance x 100, unclipped; ``num_choices = 2`` makes "as good as the reference"
  chance, so worse models score 0, as for any other bound.
* ``score = "rating"``: the chance of beating a model of a fixed rating,
  ``against`` (default: the anchor's rating), on the scale pinned by
  ``anchor = "MODEL=RATING"`` (the Arena's: ``mixtral-8x7b-instruct-v0.1=1114``);
  no bound, no clipping.

Every form has exactly one subtask, with no ``task`` (its scores never come
from results files).

Built-in suites ship as TOML files in ``builtin/``: ``openllm-v2`` and
``openllm-v1``. :func:`suite_arrays` gives a suite as the kernel's arrays.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import math
import tomllib
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from lbnorm.core.arrow import BoolArray, FloatArray, IntArray
from lbnorm.core.errors import InputError, LbnormError, SuiteError
from lbnorm.core.files import read_option_file
from lbnorm.core.options import MissingPolicy
from lbnorm.core.schemas import leaderboard_schema
from lbnorm.suites._checks import check_table, check_unique, required
from lbnorm.suites.benchmarks import (
    PAIRWISE,
    Aggregation,
    Benchmark,
    Subtask,
    check_clusters,
    parse_benchmark,
)
from lbnorm.suites.board import Board, parse_board
from lbnorm.suites.instances import source_key
from lbnorm.suites.rules import DEFAULT_RANGE, Kind, Scales

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "PAIRWISE",
    "Aggregation",
    "Benchmark",
    "Board",
    "Kind",
    "Scales",
    "Subtask",
    "Suite",
    "SuiteArrays",
    "benchmark_hint",
    "builtin_suite_names",
    "load_suite",
    "match_benchmark",
    "matching_benchmarks",
    "recorded_suite",
    "suite_arrays",
]

#: The built-in suite files, beside this module: a path, as the demo's (lbnorm is
#: installed as files), not ``importlib.resources``, whose imports (``zipfile``,
#: ``tempfile``) weigh on a small run's start.
_FOLDER = Path(__file__).with_name("builtin")


@dataclass(frozen=True, slots=True, kw_only=True)
class SuiteArrays:
    """A suite as arrays: subtasks in suite order, grouped by benchmark.

    Attributes:
        lower_bound: Per subtask, the random baseline in [0, 1).
        n_samples: Per subtask, item counts (pooling weights; 0 if unknown).
        benchmark_index: Per subtask, its benchmark's position.
        is_pooled: Per benchmark, True for pool-then-normalize.
        weight: Per benchmark, its weight in the average.
        items: Per subtask, the metric's sample size for a binomial stderr
            (``n_samples`` unless the metric scores several items per document;
            0 if unknown); None: ``n_samples``.
        scales: The suite's declared ranges and statistics (None: every
            benchmark a score on [0, 1], the path the Open LLM Leaderboard takes).
        missing: Per benchmark, its own missing-data policy (None: the run's);
            empty: the run's for all.
        is_averaged: Per benchmark, whether the average counts it (None: all do).
        keeps_scores: Whether a run keeps each (variant, subtask) score for the
            board (a left-to-right sum, a win rate over subtasks, a Borda count).
        can_spill: Whether a run may spill its sums to disk (not when its board
            compares every model with every other or keeps subtask scores).
    """

    lower_bound: FloatArray
    n_samples: FloatArray
    benchmark_index: IntArray
    is_pooled: BoolArray
    weight: FloatArray
    items: FloatArray | None = None
    scales: Scales | None = None
    missing: tuple[MissingPolicy | None, ...] = ()
    is_averaged: BoolArray | None = None
    keeps_scores: bool = False
    can_spill: bool = True

    def missing_of(self, benchmark: int, run: MissingPolicy) -> MissingPolicy:
        """The missing-data policy of one benchmark: its own, else the run's."""
        own = self.missing[benchmark] if self.missing else None
        return run if own is None else own

    def benchmark_starts(self) -> IntArray:
        """Each benchmark's first subtask (column), then the number of subtasks.

        Benchmark ``b``'s subtasks are ``starts[b]:starts[b + 1]``: the suite
        lists them grouped by benchmark, each benchmark with one at least.
        """
        benchmarks = np.arange(self.is_pooled.shape[0] + 1)
        starts: IntArray = np.searchsorted(self.benchmark_index, benchmarks)
        return starts


_SUITE_KEYS = {"name", "description", "benchmarks", "board"}
#: Scores are at most 100, so a weighted sum stays finite when 100 x the weights do.
_MAX_SCORE = 100.0
#: A benchmark `X` gives the leaderboard columns `X` and `X Raw`; these names are
#: the leaderboard's own (compared ignoring case: SQL names are case-insensitive).
_RAW_SUFFIX = " raw"
_RANK_WITHIN_PREFIX = "rank_within_"


@dataclass(frozen=True, slots=True, kw_only=True)
class Suite:
    """A leaderboard definition: benchmarks, bounds and aggregation rules.

    Attributes:
        name: Suite name (e.g. ``openllm-v2``).
        description: Free text.
        benchmarks: Benchmarks in display order.
        source: Where the suite was loaded from (a path or ``builtin:<name>``).
        sha256: Hash of the suite file's bytes, for provenance.
        text: The suite file's text, embedded in an output's manifest so that
            the output can be read back where the file is gone.
        board: The leaderboard's rules: average, rank, rates, presentation
            (see :mod:`lbnorm.suites.board`).
    """

    name: str
    description: str
    benchmarks: tuple[Benchmark, ...]
    source: str
    sha256: str
    text: str = field(default="", repr=False, compare=False)
    board: Board = field(default_factory=Board)

    @property
    def benchmark_names(self) -> list[str]:
        """Benchmark names in suite order."""
        return [benchmark.name for benchmark in self.benchmarks]

    @property
    def pairwise_benchmarks(self) -> tuple[Benchmark, ...]:
        """The benchmarks scored from battles (``aggregation = "bradley-terry"``)."""
        return tuple(b for b in self.benchmarks if b.is_pairwise)

    @property
    def is_modified(self) -> bool:
        """Whether the suite carries a built-in suite's name but not its content.

        Content is what changes a number: the benchmarks in order, their
        aggregation and weight, and each subtask's name, task, metric,
        ``num_choices``, lower bound and ``n_samples``. The description, comments,
        layout and key order of the file are not content. A suite whose name is
        not a built-in's is never "modified".

        Examples:
            >>> from dataclasses import replace
            >>> v2 = load_suite("openllm-v2")
            >>> v2.is_modified, replace(v2, benchmarks=v2.benchmarks[:2]).is_modified
            (False, True)
        """
        if self.name not in builtin_suite_names():
            return False
        builtin = _builtin_suite(self.name)
        return (builtin.benchmarks, builtin.board) != (self.benchmarks, self.board)

    @property
    def display_name(self) -> str:
        """The name to show: ``openllm-v2 (modified)`` for an edited built-in.

        Examples:
            >>> load_suite("openllm-v2").display_name
            'openllm-v2'
        """
        return f"{self.name} (modified)" if self.is_modified else self.name

    def provenance(self) -> dict[str, str | bool]:
        """What an output records about its suite (manifest and Parquet metadata).

        Returns:
            ``name``, ``source`` (a path or ``builtin:<name>``), ``sha256`` (of the
            file's bytes) and ``modified`` (:attr:`is_modified`).

        Examples:
            >>> load_suite("openllm-v2").provenance()["modified"]
            False
        """
        return {
            "name": self.name,
            "source": self.source,
            "sha256": self.sha256,
            "modified": self.is_modified,
        }

    def subtask_table(self) -> pd.DataFrame:
        """Return one row per subtask, in suite order: the lower-bound table.

        Returns:
            Frame with ``benchmark``, ``subtask``, ``task``, ``metric``,
            ``num_choices``, ``lower_bound``, ``n_samples`` (0 if unknown),
            ``aggregation``, ``weight`` and ``benchmark_index``.

        Examples:
            >>> table = load_suite("openllm-v2").subtask_table()
            >>> table.loc[table["subtask"] == "team_allocation", "lower_bound"].item() == 1 / 3
            True
        """
        import pandas as pd  # a frame for users; the pipeline uses suite_arrays

        rows = [
            {
                "benchmark": benchmark.name,
                "subtask": subtask.name,
                "task": subtask.task,
                "metric": subtask.metric,
                "num_choices": subtask.num_choices,
                "lower_bound": subtask.lower_bound,
                "n_samples": subtask.n_samples or 0,
                "aggregation": benchmark.aggregation,
                "weight": benchmark.weight,
                "benchmark_index": index,
            }
            for index, benchmark in enumerate(self.benchmarks)
            for subtask in benchmark.subtasks
        ]
        return pd.DataFrame(rows)  # (Python's integers: int64 columns)


def builtin_suite_names() -> list[str]:
    """Return the names of the suites shipped with lbnorm, sorted."""
    return sorted(
        entry.name.removesuffix(".toml")
        for entry in _FOLDER.iterdir()
        if entry.name.endswith(".toml")
    )


def load_suite(name_or_path: str | Path) -> Suite:
    """Load and validate a built-in suite by name, or a suite TOML file by path.

    Args:
        name_or_path: ``openllm-v2``, ``openllm-v1``, or a path to a TOML file.

    Returns:
        The validated suite.

    Raises:
        SuiteError: The file is missing, not TOML, or fails validation; the
            message names the file, benchmark and subtask.

    Examples:
        >>> suite = load_suite("openllm-v2")
        >>> suite.benchmark_names
        ['IFEval', 'BBH', 'MATH Lvl 5', 'GPQA', 'MUSR', 'MMLU-PRO']
    """
    text = str(name_or_path)
    if text in builtin_suite_names():
        return _builtin_suite(text)
    path = Path(name_or_path)
    if not path.exists() or path.is_dir():
        msg = (
            f"suite {text!r} is neither a built-in suite nor a file.\n"
            f"Hint: use one of {builtin_suite_names()} or a path to a suite "
            "TOML file (start from `lbnorm suites show openllm-v2 --toml`)."
        )
        raise SuiteError(msg)
    try:  # a regular file: a FIFO would block, /dev/zero never end
        data = read_option_file(path, option="--suite")
    except InputError as exc:
        raise SuiteError(str(exc)) from None
    return parse_suite(data, source=str(path))


def parse_suite(data: bytes, *, source: str) -> Suite:
    """Parse and validate suite TOML bytes.

    Args:
        data: The TOML file's bytes.
        source: Its name, for messages and provenance.

    Returns:
        The validated suite.

    Raises:
        SuiteError: Not UTF-8 TOML, or any rule broken (bounds in [0, 1),
            ``num_choices`` 0 or >= 2, unique names, benchmark names unique
            ignoring case and none of the leaderboard's own columns (``rank``,
            ``average``, ..., ``<name> Raw``), positive ``n_samples`` (at most
            2**53) for pooling, positive finite weights whose sum stays finite,
            one bound per pooled benchmark, known keys only).
    """
    try:
        document = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:  # TOMLDecodeError, 5,000-digit ints
        msg = f"{source}: not a valid UTF-8 TOML suite file: {exc}.\nHint: see the suite format in the README."
        raise SuiteError(msg) from exc
    except RecursionError as exc:  # tomllib reads nested arrays and tables recursively
        msg = (
            f"{source}: not a valid suite file: its arrays or tables nest too deeply to read.\n"
            "Hint: a suite nests a few levels ([[benchmarks]], [[benchmarks.subtasks]], [board]); "
            "see the suite format in the README."
        )
        raise SuiteError(msg) from exc
    hint = "see the suite format in the README."
    check_table(document, _SUITE_KEYS, where=source, hint=hint)
    name = required(document, "name", str, where=source)
    raw_benchmarks = required(document, "benchmarks", list, where=source)
    if not raw_benchmarks:
        msg = f"{source}: the suite defines no benchmarks.\nHint: add at least one [[benchmarks]] table."
        raise SuiteError(msg)
    benchmarks = tuple(
        parse_benchmark(raw, where=f"{source}: benchmarks[{index}]")
        for index, raw in enumerate(raw_benchmarks)
    )
    names = [b.name for b in benchmarks]
    _check_benchmark_names(names, where=source)
    _check_total_weight([b.weight for b in benchmarks], where=source)
    pairs = [
        source_key(s.task, s.metric, s.instance)
        for b in benchmarks
        for s in b.subtasks
        if s.task
    ]
    check_unique(pairs, what="(task, metric) pair", where=source)
    check_clusters(benchmarks, where=source)
    board = parse_board(document.get("board"), benchmarks=names, where=source)
    _check_board(board, benchmarks, where=source)
    return Suite(
        name=name,
        description=str(document.get("description", "")),
        benchmarks=benchmarks,
        source=source,
        sha256=hashlib.sha256(data).hexdigest(),
        text=data.decode("utf-8"),
        board=board,
    )


def recorded_suite(record: dict[str, Any], *, cwd: str | None) -> Suite | None:
    """The suite an output's manifest records, wherever it is read (None: gone or changed).

    Tried in turn: the source as recorded (relative to where the command runs),
    its absolute path, the source relative to `cwd` (the folder the output was
    written from), then the suite text the record embeds; each only with the
    recorded sha256.
    """
    source = str(record.get("source", ""))
    if not source:
        return None
    if source.startswith("builtin:"):
        candidates: list[str] = [source.removeprefix("builtin:")]
    else:
        places = [source, record.get("resolved"), cwd and str(Path(cwd) / source)]
        candidates = [place for place in places if isinstance(place, str) and place]
    text = record.get("text")

    def found() -> Iterator[Suite]:  # each loaded only if the ones before did not match
        for candidate in dict.fromkeys(candidates):
            with contextlib.suppress(LbnormError):
                yield load_suite(candidate)
        if isinstance(text, str):  # the file moved or changed: the text it had
            with contextlib.suppress(LbnormError):
                yield parse_suite(text.encode("utf-8"), source=source)

    return next((s for s in found() if s.sha256 == record.get("sha256")), None)


def _check_board(
    board: Board, benchmarks: tuple[Benchmark, ...], *, where: str
) -> None:
    """The board's rules fit the benchmarks they name."""
    if board.summation == "left-to-right" and (
        pooled := [
            b.name for b in benchmarks if b.aggregation != "normalize-then-average"
        ]
    ):
        msg = f'{where}: [board]: summation = "left-to-right" sums subtask scores, but benchmark(s) {pooled[:5]} pool raw scores or come from battles.\nHint: use summation = "exact" (the default), or make them normalize-then-average.'
        raise SuiteError(msg)
    by_name = {b.name: b for b in benchmarks}
    for rate in board.rates:
        if rate.reads_subtasks and (
            pairwise := [n for n in rate.benchmarks if by_name[n].is_pairwise]
        ):
            msg = f"{where}: [board] rate {rate.name!r} reads subtask scores, but {pairwise[:5]} are scored from battles.\nHint: compare benchmarks with subtask scores."
            raise SuiteError(msg)


def _check_benchmark_names(names: list[str], *, where: str) -> None:
    """Unique ignoring case, and none a leaderboard column of its own or a raw column.

    A benchmark `X` becomes the leaderboard columns `X` and `X Raw`; SQL (``lbnorm
    query``) compares names ignoring case, so ``GPQA`` and ``gpqa`` would clash.
    """
    check_unique(names, what="benchmark name", where=where)
    folded = Counter(name.casefold() for name in names)
    if clash := [name for name in names if folded[name.casefold()] > 1]:
        msg = (
            f"{where}: benchmark names {clash[:5]} differ only in case; as leaderboard "
            "columns (and in SQL, which ignores case) they would be one.\n"
            "Hint: give each benchmark a name of its own."
        )
        raise SuiteError(msg)
    contract = {column.casefold() for column in leaderboard_schema(()).names}
    taken = [
        name
        for name in names
        if name.casefold() in contract
        or name.casefold().endswith(_RAW_SUFFIX)
        or name.casefold().startswith(_RANK_WITHIN_PREFIX)
    ]
    if taken:
        msg = (
            f"{where}: benchmark name(s) {taken[:5]} clash with the leaderboard's own "
            f"columns ({', '.join(sorted(contract))}, rank_within_<column>, and "
            "'<benchmark> Raw' for each benchmark's raw score).\n"
            "Hint: rename the benchmark (e.g. 'Average score', or 'X raw-scored' for "
            "'X Raw')."
        )
        raise SuiteError(msg)


def _check_total_weight(weights: list[float], *, where: str) -> None:
    """The weighted sums of the average must stay finite."""
    if not math.isfinite(_MAX_SCORE * sum(weights)):  # fsum would raise on overflow
        msg = (
            f"{where}: the benchmark weights sum to more than a float can hold "
            f"({weights[:5]}{' ...' if len(weights) > 5 else ''}), so every average "
            "would be empty.\nHint: weights are relative: scale them down (e.g. 1, 2, 0.5)."
        )
        raise SuiteError(msg)


def matching_benchmarks(name: str, benchmarks: Sequence[str]) -> list[str]:
    """The benchmarks `name` can mean: the one rule for benchmark names everywhere.

    The rule (``lbnorm show --benchmark``, ``lbnorm impact --set-bound``, and
    whatever else takes a benchmark's name): the exact name; else the names equal
    to it ignoring case; else the names it starts, ignoring case. One match is
    the benchmark; several are ambiguous; none, unknown. Suites keep benchmark
    names unique ignoring case, so only a prefix can be ambiguous.

    Examples:
        >>> matching_benchmarks("gpqa", ["GPQA", "GPQA-extended"])
        ['GPQA']
        >>> matching_benchmarks("m", ["MATH Lvl 5", "MMLU-PRO", "BBH"])
        ['MATH Lvl 5', 'MMLU-PRO']
    """
    if name in benchmarks:
        return [name]
    folded = name.casefold()
    if same := [b for b in benchmarks if b.casefold() == folded]:
        return same
    return [b for b in benchmarks if b.casefold().startswith(folded)]


def match_benchmark(
    name: str,
    benchmarks: Sequence[str],
    *,
    where: str = "this leaderboard",
    error: type[LbnormError] = LbnormError,
) -> str:
    """Return the benchmark `name` means, by :func:`matching_benchmarks`' rule.

    Args:
        name: What the user typed.
        benchmarks: The benchmark names to choose from.
        where: What holds them, for the message.
        error: The error to raise (its exit code fits the command).

    Returns:
        The benchmark's name as spelt in `benchmarks`.

    Raises:
        LbnormError: No benchmark, or several, match (`error`'s class).

    Examples:
        >>> match_benchmark("math", ["BBH", "MATH Lvl 5", "MMLU-PRO"])
        'MATH Lvl 5'
    """
    found = matching_benchmarks(name, benchmarks)
    if len(found) == 1:
        return found[0]
    msg = (
        f"benchmark {name!r} "
        + (f"is ambiguous: {found[:5]}." if found else f"is not in {where}.")
        + f"\nHint: {benchmark_hint(benchmarks)}."
    )
    raise error(msg)


def benchmark_hint(benchmarks: Sequence[str]) -> str:
    """The hint of a message about a benchmark name: the names and the rule.

    Examples:
        >>> benchmark_hint(["GPQA", "MUSR"])
        "use one of ['GPQA', 'MUSR'] (any case; a unique prefix will do)"
    """
    more = " ..." if len(benchmarks) > 12 else ""
    return (
        f"use one of {list(benchmarks)[:12]}{more} (any case; a unique prefix will do)"
    )


@functools.cache
def _builtin_suite(name: str) -> Suite:
    """The built-in suite of that name, parsed once (also for :attr:`Suite.is_modified`)."""
    data = (_FOLDER / f"{name}.toml").read_bytes()
    return parse_suite(data, source=f"builtin:{name}")


def suite_arrays(suite: Suite) -> SuiteArrays:
    """Return the suite as the kernel's arrays (subtasks in suite order).

    Examples:
        >>> arrays = suite_arrays(load_suite("openllm-v2"))
        >>> int(arrays.benchmark_index.max()) + 1, arrays.lower_bound.shape
        (6, (40,))
    """
    subtasks = [
        (index, b, s) for index, b in enumerate(suite.benchmarks) for s in b.subtasks
    ]
    return SuiteArrays(
        lower_bound=np.array([s.lower_bound for _, _, s in subtasks], dtype=np.float64),
        n_samples=np.array(
            [s.n_samples or 0 for _, _, s in subtasks], dtype=np.float64
        ),
        items=np.array(  # a statistic's stderr is never estimated as binomial
            [
                0 if b.kind == "statistic" else s.items or s.n_samples or 0
                for _, b, s in subtasks
            ],
            dtype=np.float64,
        ),
        benchmark_index=np.array([i for i, _, _ in subtasks], dtype=np.int64),
        is_pooled=np.array(
            [b.aggregation == "pool-then-normalize" for b in suite.benchmarks],
            dtype=bool,
        ),
        weight=np.array([b.weight for b in suite.benchmarks], dtype=np.float64),
        scales=_scales(suite),
        keeps_scores=suite.board.needs_subtask_scores,
        can_spill=not suite.board.needs_subtask_scores and not suite.board.rates,
        is_averaged=(
            None
            if all(b.averaged for b in suite.benchmarks)
            else np.array([b.averaged for b in suite.benchmarks], dtype=bool)
        ),
        missing=(
            tuple(b.missing for b in suite.benchmarks)
            if any(b.missing is not None for b in suite.benchmarks)
            else ()
        ),
    )


def _scales(suite: Suite) -> Scales | None:
    """The suite's ranges and statistics per subtask; None when it declares none."""
    if all(
        b.kind == "score" and b.value_range == DEFAULT_RANGE for b in suite.benchmarks
    ):
        return None
    rows = [(b, s) for b in suite.benchmarks for s in b.subtasks]
    return Scales.of(
        low=np.array([b.value_range[0] for b, _ in rows], dtype=np.float64),
        high=np.array([b.value_range[1] for b, _ in rows], dtype=np.float64),
        bound=np.array([s.lower_bound for _, s in rows], dtype=np.float64),
        is_statistic=np.array([b.kind == "statistic" for b, _ in rows], dtype=bool),
    )
