"""Seeded generator of a tree of full-structure lm-evaluation-harness results files.

``python benchmarks_perf/generate_tree.py --out DIR [--n 4576] [--seed S]`` writes
``DIR/<org>/<model>/results_<ISO timestamp>.json``, ``--n`` files in all, each a copy
of the structure of the real leaderboard files in
``tests/fixtures/full_structure`` (Yi-34B-Chat's; same top-level keys in the same order,
configs with prompts and few-shot samples, aliases, stderrs, ``"N/A"`` stderrs, the
unused ``leaderboard`` and ``leaderboard_arc_challenge`` tasks, IFEval's loose
metrics, ``groups``, ``group_subtasks``, ``n-samples``, ``task_hashes``, the
environment text), about 130 KB each.

What varies per file, from a seeded RNG: the model (``org/name``, precision,
revision, chat template or none), the timestamp and run times, every score (under
the openllm-v2 suite's bounds and sample counts, quantized to k/n, about 10% of the
multiple-choice scores below chance), the stderrs (about 2% more ``"N/A"``), the task
hashes. Like the real leaderboard: about 3% of files are re-runs of an earlier model
(same keys, later timestamp) and about 2% repeat a model name with another precision;
about 10% lack the ``leaderboard_gpqa`` and ``leaderboard_math_hard`` group values
(upstream harness mid-2024 to spring 2025) and about 10% keep a stale MATH value in
``groups`` (the Feb 2025 re-scoring).
"""

from __future__ import annotations

import argparse
import copy
import datetime as dt
import hashlib
import json
import math
import time
import tomllib
from pathlib import Path
from typing import Any

import numpy as np
from generate import BELOW_SHIFT, DEFAULT_SEED, make_variants, v2_suite_text

HERE = Path(__file__).resolve().parent
REFERENCE = HERE.parent / "tests" / "fixtures" / "full_structure"
TEMPLATE = REFERENCE / "01-ai/Yi-34B-Chat/results_2025-02-13T18-27-04.338360.json"
DEFAULT_N = 4_576

# Items per task where the suite gives none (IFEval prompts/instructions, ARC).
EXTRA_ITEMS = {
    "prompt_level_strict_acc,none": 541,
    "prompt_level_loose_acc,none": 541,
    "inst_level_strict_acc,none": 834,
    "inst_level_loose_acc,none": 834,
    "leaderboard_arc_challenge": 1172,
}
GROUPS = {
    "leaderboard_bbh": "leaderboard_bbh_",
    "leaderboard_gpqa": "leaderboard_gpqa_",
    "leaderboard_math_hard": "leaderboard_math_",
    "leaderboard_musr": "leaderboard_musr_",
}
START = dt.datetime(2024, 6, 10, tzinfo=dt.UTC)
SPAN_SECONDS = 280 * 24 * 3600  # June 2024 to March 2025
CHAT_TEMPLATES = [
    "{% for message in messages %}{{ message['content'] }}{% endfor %}",
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}",
    "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}"
    "{{ '[INST] ' + message['content'] + ' [/INST]' }}{% else %}"
    "{{ message['content'] + eos_token }}{% endif %}{% endfor %}",
]


def suite_tasks() -> dict[tuple[str, str], tuple[float, int]]:
    """Map (harness task, metric) -> (lower bound, items) from lbnorm's v2 suite."""
    suite = tomllib.loads(v2_suite_text())
    out = {}
    for bench in suite["benchmarks"]:
        for sub in bench["subtasks"]:
            choices = sub.get("num_choices", 0)
            lb = sub.get("lower_bound", 1.0 / choices if choices else 0.0)
            items = sub.get("n_samples") or EXTRA_ITEMS.get(sub["metric"], 500)
            out[sub["task"], sub["metric"]] = (float(lb), int(items))
    return out


class TreeWriter:
    """Writes results files, all derived from one real file's structure."""

    def __init__(self, out: Path, seed: int) -> None:
        """Load the template and suite; seed the RNG."""
        self.out = out
        self.rng = np.random.default_rng(seed)
        self.template: dict[str, Any] = json.loads(TEMPLATE.read_text())
        self.tasks = suite_tasks()
        self.n_samples = {
            task: counts["effective"]
            for task, counts in self.template["n-samples"].items()
        }

    @staticmethod
    def dumps(doc: dict[str, Any]) -> bytes:
        """Serialize with 2-space indents, as the harness does; orjson if present."""
        try:
            import orjson
        except ImportError:  # pragma: no cover - orjson is optional
            return json.dumps(doc, indent=2).encode()
        return bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2))

    def _score(self, ability: float, lb: float, items: int) -> float:
        """One accuracy k/items around the model's ability, sometimes below lb."""
        z = ability + self.rng.normal(0.0, 0.8)
        v = (1.0 + BELOW_SHIFT) / (1.0 + math.exp(-z)) - BELOW_SHIFT
        raw = min(1.0, max(0.0, lb + (1.0 - lb) * v))
        return round(raw * items) / items

    def _stderr(self, value: float, items: int, template: object) -> object:
        """The stderr of a k/n accuracy; "N/A" where the template has it, or 2%."""
        if template == "N/A" or self.rng.random() < 0.02:
            return "N/A"
        return math.sqrt(value * (1.0 - value) / max(items - 1, 1))

    def results(self, ability: float) -> dict[str, Any]:
        """A ``results`` section with fresh scores for every task and metric."""
        results: dict[str, Any] = {}
        for task, entry in self.template["results"].items():
            new: dict[str, Any] = {}
            for key in entry:
                if key == "alias" or "_stderr," in key:
                    continue
                lb, items = self.tasks.get(
                    (task, key),
                    (0.25, EXTRA_ITEMS.get(key, EXTRA_ITEMS.get(task, 1000))),
                )
                new[key] = self._score(ability, lb, items)
                if "loose" in key:  # loose >= strict, as in real files
                    strict = new.get(key.replace("loose", "strict"), new[key])
                    new[key] = min(1.0, max(new[key], strict + 0.03))
            ordered = {}
            for key, value in entry.items():  # keep the template's key order
                if key == "alias":
                    ordered[key] = value
                elif "_stderr," in key:
                    metric = key.replace("_stderr,", ",")
                    items = self.n_samples.get(task, 1000)
                    ordered[key] = self._stderr(new.get(metric, 0.5), items, value)
                else:
                    ordered[key] = new[key]
            results[task] = ordered
        for group, prefix in GROUPS.items():  # sample-weighted, as lm-eval does
            for metric in results[group]:
                if metric == "alias" or "_stderr," in metric:
                    continue
                parts = [
                    (results[t][metric], self.n_samples[t])
                    for t in results
                    if t.startswith(prefix) and t != group and metric in results[t]
                ]
                total = sum(n for _, n in parts)
                results[group][metric] = sum(v * n for v, n in parts) / total
        return results

    def document(
        self, model: str, precision: str, revision: str, chat: bool, when: dt.datetime
    ) -> dict[str, Any]:
        """One full results file as a dict, in the template's key order."""
        rng = self.rng
        doc = dict(self.template)  # shallow: configs, env text etc. are shared
        results = self.results(float(rng.normal(-0.4, 1.0)))  # leaderboard-like
        groups = {g: copy.copy(results[g]) for g in self.template["groups"]}
        if rng.random() < 0.10:  # stale MATH value left by the Feb 2025 re-scoring
            stale = groups["leaderboard_math_hard"]
            stale["exact_match,none"] *= float(rng.uniform(0.4, 0.9))
        if rng.random() < 0.10:  # harness versions that omit these group values
            for group in ("leaderboard_gpqa", "leaderboard_math_hard"):
                results.pop(group)
                groups.pop(group)
        params = int(
            rng.choice([0.5, 1.5, 3, 7, 8, 14, 32, 70]) * 1e9 * rng.uniform(0.9, 1.1)
        )
        template_text = CHAT_TEMPLATES[int(rng.integers(len(CHAT_TEMPLATES)))]
        start = float(rng.uniform(1e4, 1e6))
        duration = float(rng.uniform(600, 40_000))
        config = dict(self.template["config"])
        config.update(
            model_args=f"pretrained={model},revision={revision},"
            f"trust_remote_code=True,dtype={precision},parallelize=True",
            model_num_parameters=params,
            model_dtype=f"torch.{precision}",
            model_revision=revision,
            model_sha=revision,
            batch_sizes=[int(rng.choice([1, 2, 4, 8, 16, 32]))],
        )
        doc.update(
            results=results,
            groups=groups,
            config=config,
            date=when.timestamp(),
            task_hashes={t: rng.bytes(32).hex() for t in self.template["task_hashes"]},
            model_name=model,
            model_name_sanitized=model.replace("/", "__"),
            chat_template=template_text if chat else None,
            chat_template_sha=(
                hashlib.sha256(template_text.encode()).hexdigest() if chat else None
            ),
            start_time=start,
            end_time=start + duration,
            total_evaluation_time_seconds=f"{duration:.1f}",
        )
        return doc

    def write(self, doc: dict[str, Any], when: dt.datetime) -> Path:
        """Write ``doc`` to ``<org>/<model>/results_<timestamp>.json``."""
        folder = self.out / str(doc["model_name"])
        folder.mkdir(parents=True, exist_ok=True)
        stamp = when.strftime("%Y-%m-%dT%H-%M-%S.%f")
        path = folder / f"results_{stamp}.json"
        path.write_bytes(self.dumps(doc))
        return path


def generate_tree(
    out: Path, n: int = DEFAULT_N, seed: int = DEFAULT_SEED
) -> dict[str, int]:
    """Write ``n`` results files under ``out``; return counts of what was written."""
    writer = TreeWriter(out, seed)
    rng = writer.rng
    variants = make_variants(n, rng)
    offsets = rng.uniform(0, SPAN_SECONDS, n)
    reruns = rng.random(n) < 0.03
    other_precision = rng.random(n) < 0.02
    keys: list[tuple[str, str, str, bool]] = []
    counts = {"files": 0, "reruns": 0, "name_repeats": 0, "bytes": 0}
    for i in range(n):
        if i and reruns[i]:  # a re-run of an earlier model: same keys, later time
            key = keys[int(rng.integers(len(keys)))]
            counts["reruns"] += 1
        elif i and other_precision[i]:  # same name, the other precision
            model, precision, _, chat = keys[int(rng.integers(len(keys)))]
            other = "float16" if precision == "bfloat16" else "bfloat16"
            key = (model, other, rng.bytes(20).hex(), chat)
            counts["name_repeats"] += 1
        else:
            key = (
                str(variants.model[i]),
                str(variants.precision[i]),
                str(variants.revision[i]),
                bool(variants.chat_template[i]),
            )
        keys.append(key)
        when = START + dt.timedelta(seconds=float(offsets[i]), microseconds=i)
        path = writer.write(writer.document(*key, when), when)
        counts["files"] += 1
        counts["bytes"] += path.stat().st_size
    return counts


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--n", type=int, default=DEFAULT_N, help="number of files")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    counts = generate_tree(args.out, args.n, args.seed)
    mean_kb = counts["bytes"] / max(counts["files"], 1) / 1e3
    print(
        f"{counts['files']} files ({mean_kb:.0f} KB each, {counts['reruns']} re-runs, "
        f"{counts['name_repeats']} repeated names) -> {args.out} "
        f"in {time.perf_counter() - t0:.1f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
