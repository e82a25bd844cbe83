"""``lbnorm explain``'s face: one variant's explanation as readable text or JSON.

The numbers come from :func:`lbnorm.analysis.explain.explain_variant`; this module
chooses the variant the way ``lbnorm compare`` matches a name
(:func:`lbnorm.faces.show.find_variants`) and lays the explanation out.
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

from lbnorm.analysis.explain import Explanation
from lbnorm.core.errors import OptionsError
from lbnorm.core.schemas import KEY_COLUMNS
from lbnorm.faces.show import find_variants
from lbnorm.faces.terminal import format_table, printable

__all__ = ["choose_variant", "explanation_json", "format_explanation"]

_SHOWN = 10


def choose_variant(
    leaderboard: pd.DataFrame,
    name: str,
    *,
    precision: str | None = None,
    revision: str | None = None,
    chat_template: bool | None = None,
) -> dict[str, Any]:
    """Return the keys of the one variant `name` (and the narrowing options) names.

    Args:
        leaderboard: The output's leaderboard.
        name: A model name, or a unique part of one (as ``lbnorm compare`` takes).
        precision: Only this precision.
        revision: Only revisions starting with this.
        chat_template: Only with (True) or without (False) a chat template.

    Returns:
        The variant's ``model``, ``precision``, ``revision`` and ``chat_template``.

    Raises:
        LbnormError: The name matches no model, or several.
        OptionsError: The model has several variants left (they are listed), or
            none once narrowed.
    """
    variants = find_variants(leaderboard, [name])
    keep = pd.Series(True, index=variants.index)
    if precision is not None:
        keep &= variants["precision"].astype("str") == precision
    if revision is not None:
        keep &= variants["revision"].astype("str").str.startswith(revision)
    if chat_template is not None:
        keep &= variants["chat_template"].astype(bool) == chat_template
    left = variants.loc[keep]
    if len(left) == 1:
        return {key: _plain(left.iloc[0][key]) for key in KEY_COLUMNS}
    listed = variants[list(KEY_COLUMNS)].head(_SHOWN)
    candidates = "\n".join(
        f"  --precision {_shell(str(r.precision))} --revision "
        f"{_shell(str(r.revision)[:12])} --chat-template {'yes' if r.chat_template else 'no'}"
        for r in listed.itertuples()  # at most ten candidates, for the message
    )
    count = f"{len(left)} variants" if len(left) else "no variant matching the options"
    msg = (
        f"model {name!r} has {count}; its variants:\n{candidates}\n"
        "Hint: narrow it with --precision, --revision (a prefix will do) or "
        "--chat-template yes/no."
    )
    raise OptionsError(msg)


def format_explanation(explanation: Explanation, *, digits: int = 4) -> str:
    """Render an explanation as text: the variant, subtasks, benchmarks, average, rank."""
    variant = explanation.variant
    suite = explanation.suite
    lines = [
        f"model      {printable(str(variant['model']))}",
        f"precision  {variant['precision'] or '-'}    revision {variant['revision'] or '-'}"
        f"    chat template {'yes' if variant['chat_template'] else 'no'}",
        f"suite      {suite['name']} ({suite['source']})"
        + (
            ""
            if suite["found"]
            else ": file gone or changed; rules read from the tables"
        ),
        "",
        "subtasks: normalized = (raw - lower_bound) / (1 - lower_bound) x 100, clipped at 0",
    ]
    root = explanation.input_root
    subtasks = explanation.subtasks.assign(
        source=explanation.subtasks["source"].map(lambda path: _under(path, root))
    )
    shown = subtasks[
        [
            "benchmark",
            "subtask",
            "raw_score",
            "num_choices",
            "lower_bound",
            "bound_from",
            "normalized",
            "normalized_score",
            "n_samples",
            "source",
            "key",
        ]
    ].rename(columns={"normalized": "unclipped", "normalized_score": "normalized"})
    lines += [format_table(shown, digits=digits), "", "benchmarks:"]
    for row in explanation.benchmarks.itertuples():  # one line per benchmark
        rows = subtasks[subtasks["benchmark"] == row.benchmark]
        lines.append(f"  {row.benchmark}: {_rule_text(row, rows, digits)}")
    lines.append(format_table(explanation.benchmarks, digits=digits))
    average, rank = explanation.average, explanation.rank
    lines += [
        "",
        f"average    {_number(average['average'], digits)}  (stderr "
        f"{_number(average['average_stderr'], digits)}; {average['formula']}: "
        f"{_number(average['recomputed'], digits)})",
        f"rank       {rank['rank'] if rank['rank'] is not None else '-'}  "
        f"({rank['level']:.0%} interval: {rank['rank_best'] or '-'} to "
        f"{rank['rank_worst'] or '-'}, from {rank['interval_from']})",
    ]
    return "\n".join(lines)


def explanation_json(explanation: Explanation) -> str:
    """The explanation as indented JSON."""
    return json.dumps(explanation.to_dict(), indent=2, ensure_ascii=False)


def _rule_text(benchmark: Any, subtasks: pd.DataFrame, digits: int) -> str:
    """How the benchmark's score comes from its subtasks, with the numbers."""
    score = _number(benchmark.normalized_score, digits)
    if benchmark.rule == "pool-then-normalize":
        sizes = subtasks["n_samples"].astype("Int64")
        bound = float(subtasks["lower_bound"].iloc[-1])
        return (
            f"pool-then-normalize: raw = sum(n_samples x raw) / {int(sizes.sum()):,} "
            f"samples ({' + '.join(map(str, sizes.tolist()))}) = "
            f"{_number(benchmark.raw_score, digits)}; max(0, (raw - {bound:g}) / "
            f"(1 - {bound:g})) x 100 = {score}"
        )
    return (
        f"normalize-then-average: the plain mean of {len(subtasks)} subtask(s)' "
        f"normalized (clipped) scores = {score}"
    )


def _under(path: object, root: str) -> str:
    """A source file relative to the folder the run's inputs share, else as recorded.

    Examples:
        >>> _under("tree/org/m/results_1.json", "tree"), _under("a/b.json", "a")
        ('org/m/results_1.json', 'b.json')
        >>> _under("x/results.json", "tree")
        'x/results.json'
    """
    text = str(path)
    if root and text.startswith(root.rstrip("/") + "/"):
        text = text[len(root.rstrip("/")) + 1 :]
    return printable(text)


def _number(value: object, digits: int) -> str:
    return "-" if value is None else f"{float(str(value)):.{digits}f}"


def _shell(text: str) -> str:
    return printable(text) if text else '""'


def _plain(value: object) -> Any:
    return value.item() if hasattr(value, "item") else value
