"""The options of a run, defined once: their ``Literal`` types and :class:`RunOptions`.

One frozen object carries every choice a user makes about a run, from the
command line (or :func:`lbnorm.run`) through the pipeline, the readers, the
engines, the parse cache and the nightly runs; each layer reads the fields it
needs. The manifest records it whole (:meth:`RunOptions.to_manifest`), so an
output says every option that could change a number or a row.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal, get_args

from lbnorm.core.errors import OptionsError, shown_number

__all__ = [
    "DEFAULT_SUITE",
    "MOST_COUNT",
    "MOST_GIB",
    "MOST_TIMEOUT",
    "ComparabilityCheck",
    "EngineName",
    "ExtraColumns",
    "MissingPolicy",
    "PairedAdjust",
    "ProgressCallback",
    "RunOptions",
    "UnknownSubtasks",
    "check_paired_alpha",
]

#: The suite used when none is named.
DEFAULT_SUITE = "openllm-v2"

#: What to do with a model variant that lacks a subtask or a benchmark:
#: ``exclude`` leaves the incomplete benchmark / average null and the variant
#: unranked (the Open LLM Leaderboard shows no partial rows); ``partial``
#: averages what is present; ``zero`` counts what is missing as 0.
MissingPolicy = Literal["exclude", "partial", "zero"]

#: What to do with rows whose (benchmark, subtask) the suite does not define.
UnknownSubtasks = Literal["error", "ignore"]

#: What to do with table columns outside the contract.
ExtraColumns = Literal["error", "keep", "drop"]

#: How scores are aggregated (see :mod:`lbnorm.engines`): ``stream`` writes the
#: subtask table in input order as it reads; ``memory`` is the same engine
#: holding the subtask table, written sorted by benchmark, variant and subtask;
#: ``auto`` is ``stream``, or ``memory`` when extra columns are kept.
EngineName = Literal["auto", "memory", "stream", "dask"]

#: Whether to compare the settings results files were run with (few-shot count,
#: sample limit, task and harness versions; see :mod:`lbnorm.readers.comparability`):
#: ``off``; ``report`` (the default) names the variants that differ from the
#: majority; ``strict`` makes a difference an error.
ComparabilityCheck = Literal["off", "report", "strict"]

#: How paired comparisons' p-values are adjusted across a table (``--paired-adjust``):
#: ``holm`` (Holm's step-down rule: the family-wise error rate) or ``bh``
#: (Benjamini and Hochberg's step-up rule: the false discovery rate).
PairedAdjust = Literal["holm", "bh"]

#: The largest count a count option takes (rows, models, places, processes): more
#: than any leaderboard holds, and well inside the 64-bit integers Arrow and numpy
#: slice and compare with.
MOST_COUNT = 10**12

#: The most GiB a memory budget takes (1 PiB): a larger one is no budget, and its
#: bytes (``inf``, ``1e308``) are no integer.
MOST_GIB = float(2**20)

#: The longest ``--scheduler-timeout`` taken, in seconds (a day; ``inf`` is no timeout).
MOST_TIMEOUT = 86_400.0

#: ``callback(stage, done, total)``: `done` of `total` units of `stage` finished.
ProgressCallback = Callable[[str, int, int], None]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunOptions:
    """Every choice about a run, checked when made.

    Attributes:
        missing: Policy for absent subtasks and benchmarks.
        unknown: Policy for subtasks the suite does not define.
        extra_columns: Policy for table columns outside the contract.
        subtasks: Write ``subtasks.parquet`` (False: only the benchmark and
            leaderboard tables, read with only the columns they need).
        engine: The engine (see :data:`EngineName`).
        workers: Processes the stream engine sums Parquet row groups in (one
            when the run spills: see `sum_memory`).
        batch_rows: Rows per batch for the stream engine (None: a row group).
        sum_memory: GiB the stream engine's exact sums may take; a larger input
            spills its rows to a temporary folder and is summed a partition of
            the variants at a time (:mod:`lbnorm.engines.spill`).
        scheduler: The Dask scheduler's address (None: a local cluster).
        scheduler_timeout: Seconds to try to reach `scheduler` (None: Dask's
            ``distributed.comm.timeouts.connect``, 30 s unless configured).
        metadata: A model metadata table (CSV or Parquet) joined into the
            leaderboard (None: the demo's own for the demo, else none).
        rank_within: Leaderboard columns to rank within (``rank_within_<col>``).
        exclude_flagged: Give variants flagged in the metadata no rank.
        cache: A parse cache directory for nightly runs (None: no cache).
        full_rebuild: With `cache`, ignore its contents and rebuild it.
        health: Check every benchmark and subtask; write ``health.parquet``.
        health_config: Health thresholds (a TOML file).
        intervals: Rank intervals from the stderrs; write ``intervals.parquet``.
        report: Write a JSON run report here (also when the run fails).
        model_map: A table ``arena_name, model`` (CSV, JSONL or Parquet) that
            renames the models of battle files to the results' names, for a
            suite's pairwise benchmark (None: names kept as they are).
        comparability: Compare results files' run settings
            (:data:`ComparabilityCheck`; on by default: the settings are read
            in the results parser's one pass); recorded in the manifest unless
            off.
        failures: When scores fail validation, write every failure (not only
            the first thousand per check and batch) to this file, in file and
            line order: CSV (``.csv``) or Parquet (``.parquet``, ``.pq``) by
            its suffix. Recorded in the manifest when set.
        spill_dir: Where a spilled run makes its temporary folder (None: the
            system's temporary folder). :func:`lbnorm.run` and the command line
            pass ``TMPDIR`` as set; a stage reads no environment. Where, not
            what: not in the manifest.
        paired: Compare every pair of variants adjacent in rank on the items
            both answered (per-sample inputs); write ``paired.parquet``.
        paired_adjust: How `paired`'s p-values are adjusted across the table.
        paired_alpha: The level below which an adjusted p-value separates a pair.

    Examples:
        >>> RunOptions(missing="partial").resolved().engine
        'stream'
        >>> RunOptions(engine="dask").resolved().subtasks
        False
        >>> RunOptions(workers=0)
        Traceback (most recent call last):
        ...
        lbnorm.core.errors.OptionsError: workers (--workers) must be at least 1, got 0.
        Hint: use --workers 1 for one process.
    """

    missing: MissingPolicy = "exclude"
    unknown: UnknownSubtasks = "error"
    extra_columns: ExtraColumns = "error"
    subtasks: bool = True
    engine: EngineName = "auto"
    workers: int = 1
    batch_rows: int | None = None
    sum_memory: float = 0.5
    scheduler: str | None = None
    scheduler_timeout: float | None = None
    metadata: str | None = None
    rank_within: tuple[str, ...] = ()
    exclude_flagged: bool = False
    cache: str | None = None
    full_rebuild: bool = False
    health: bool = False
    health_config: str | None = None
    intervals: bool = False
    report: str | None = None
    model_map: str | None = None
    comparability: ComparabilityCheck = "report"
    failures: str | None = None
    spill_dir: str | None = None
    paired: bool = False
    paired_adjust: PairedAdjust = "holm"
    paired_alpha: float = 0.05

    def __post_init__(self) -> None:
        _check_choice("missing", self.missing, MissingPolicy)
        _check_choice("unknown", self.unknown, UnknownSubtasks)
        _check_choice("extra_columns", self.extra_columns, ExtraColumns)
        _check_choice("engine", self.engine, EngineName)
        _check_choice("comparability", self.comparability, ComparabilityCheck)
        _check_choice("paired_adjust", self.paired_adjust, PairedAdjust)
        check_paired_alpha(self.paired_alpha)
        hint = "use --workers 1 for one process."
        _check_count("workers (--workers)", self.workers, "processes", hint=hint)
        if self.batch_rows is not None:
            hint = "leave --batch-rows out to stream a Parquet row group at a time."
            _check_count(
                "batch_rows (--batch-rows)", self.batch_rows, "rows", hint=hint
            )
        if not 0 < self.sum_memory <= MOST_GIB:
            msg = (
                f"sum_memory (--sum-memory) must be a positive number of GiB up to {MOST_GIB:,.0f}, got {self.sum_memory}.\n"
                "Hint: leave --sum-memory out for the default (0.5)."
            )
            raise OptionsError(msg)
        if self.scheduler is not None and self.engine != "dask":
            msg = (
                "a scheduler (--scheduler) is only used by the Dask engine.\n"
                "Hint: add --engine dask, or leave out --scheduler."
            )
            raise OptionsError(msg)
        if self.failures is not None and not self.failures.lower().endswith(
            (".csv", ".parquet", ".pq")
        ):
            msg = (
                f"failures (--failures) is written as CSV or Parquet by its suffix; "
                f"{self.failures!r} has neither.\n"
                "Hint: name it failures.csv or failures.parquet."
            )
            raise OptionsError(msg)
        if self.scheduler_timeout is not None and (
            self.scheduler is None or not 0 < self.scheduler_timeout <= MOST_TIMEOUT
        ):
            msg = (
                "scheduler_timeout (--scheduler-timeout) is how long to try to reach "
                f"--scheduler: a positive number of seconds up to {MOST_TIMEOUT:,.0f} "
                "(a day), with --scheduler, got "
                f"{self.scheduler_timeout!r}"
                + ("" if self.scheduler is not None else " without --scheduler")
                + ".\nHint: e.g. --scheduler tcp://host:8786 --scheduler-timeout 5."
            )
            raise OptionsError(msg)
        if self.full_rebuild and self.cache is None:
            msg = (
                "full_rebuild (--full) rebuilds the parse cache; it needs a cache "
                "(--cache DIR).\nHint: add --cache DIR, or leave out --full."
            )
            raise OptionsError(msg)

    def resolved(self) -> RunOptions:
        """These options with ``auto`` resolved and `subtasks` as the engine allows.

        ``auto`` is ``stream``, or ``memory`` (the subtask table held and
        sorted) when kept extra columns ride along in the subtask table: their
        set and types are known only once every batch is read. The Dask engine
        builds no subtask table.

        Raises:
            OptionsError: Forked workers asked for with the subtask table.
        """
        engine = self.engine
        if engine == "auto":
            keeps_extras = self.subtasks and self.extra_columns == "keep"
            engine = "memory" if keeps_extras else "stream"
        subtasks = self.subtasks and engine != "dask"
        if self.workers > 1 and subtasks:
            msg = (
                "workers (--workers) sum scores without the subtask table: the "
                "subtask table is written as the input is read, in one process.\n"
                "Hint: add --no-subtasks, or leave out --workers."
            )
            raise OptionsError(msg)
        return replace(self, engine=engine, subtasks=subtasks)

    @property
    def is_monitored(self) -> bool:
        """Whether the run is a nightly job (a cache, health, intervals or a report)."""
        return bool(self.cache or self.health or self.intervals or self.report)

    def to_manifest(self) -> dict[str, Any]:
        """Every option, JSON-ready, for the manifest."""
        options = asdict(self)
        del options["spill_dir"]  # where the run spilled, not what it computed
        options["rank_within"] = list(self.rank_within)
        if self.comparability == "off":  # outputs of runs without it stay as they were
            del options["comparability"]
        for name in ("failures", "scheduler_timeout"):
            if options[name] is None:  # (likewise)
                del options[name]
        if not self.paired:  # likewise
            for name in ("paired", "paired_adjust", "paired_alpha"):
                del options[name]
        return options


def _check_count(name: str, value: int, what: str, *, hint: str) -> None:
    """Refuse a count below 1 or past :data:`MOST_COUNT` (no input is that large; int64 overflows soon after)."""
    if value < 1:
        msg = f"{name} must be at least 1, got {value}.\nHint: {hint}"
        raise OptionsError(msg)
    if value > MOST_COUNT:
        msg = (
            f"{name} must be at most {MOST_COUNT:,}, got {shown_number(value)}.\n"
            f"Hint: no run needs more {what}; leave the option out for its default."
        )
        raise OptionsError(msg)


def check_paired_alpha(alpha: float) -> None:
    """Refuse a paired tests' level outside (0, 1) (NaN and infinities too).

    Raises:
        OptionsError: `alpha` is not strictly between 0 and 1.

    Examples:
        >>> check_paired_alpha(0.05)
        >>> check_paired_alpha(float("nan"))
        Traceback (most recent call last):
        ...
        lbnorm.core.errors.OptionsError: paired_alpha (--paired-alpha) must be between 0 and 1, got nan.
        Hint: leave --paired-alpha out for 0.05.
    """
    if not 0.0 < alpha < 1.0:
        msg = (
            f"paired_alpha (--paired-alpha) must be between 0 and 1, got {alpha:.6g}.\n"
            "Hint: leave --paired-alpha out for 0.05."
        )
        raise OptionsError(msg)


def _check_choice(name: str, value: object, choices: object) -> None:
    allowed = get_args(choices)
    if value not in allowed:
        msg = (
            f"{name} must be one of {list(allowed)}, got {value!r}.\n"
            f"Hint: choose one of {', '.join(map(str, allowed))}."
        )
        raise OptionsError(msg)
