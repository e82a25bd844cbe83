"""Crash safety and concurrency, with real ``lbnorm`` processes.

Runs are killed with SIGKILL at named points (the fault-injection switch
``LBNORM_FAULT_POINT``, see ``lbnorm.core.faults``), a few milliseconds into the Parquet
writes, and at random moments. Each time the previous output directory must be
complete, readable and unchanged (or, once the swap happened, the complete new
output), and the next run must succeed and remove what the killed run left.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import random
import re
import resource
import shutil
import signal
import subprocess
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from lbnorm import load_suite, run
from lbnorm.cli import main

GOLDEN = sorted((Path(__file__).parent / "fixtures" / "golden").glob("*.json"))
EPOCH = "1700000000"
CREATED_AT = "2023-11-14T22:13:20+00:00"  # SOURCE_DATE_EPOCH=1700000000
Digests = dict[str, str]


#: A manifest's record of the checkout's commit: a commit made while the tests run
#: (in a checkout someone works in) changes it between two runs of one test.
_COMMIT = re.compile(rb'"lbnorm_commit": "[0-9a-f]+"')


def _digests(folder: Path) -> Digests:
    """Each file's sha256; a manifest's with the checkout's commit left out."""
    return {
        p.name: hashlib.sha256(
            _COMMIT.sub(b'"lbnorm_commit": null', p.read_bytes())
            if p.name == "manifest.json"
            else p.read_bytes()
        ).hexdigest()
        for p in sorted(folder.iterdir())
    }


def _siblings(out: Path) -> list[str]:
    """What lies beside the output directory: nothing, after a clean run."""
    return sorted(p.name for p in out.parent.iterdir() if p.name != out.name)


def _assert_readable(out: Path) -> None:
    for name in ("subtasks.parquet", "benchmarks.parquet", "leaderboard.parquet"):
        assert pq.read_table(out / name).num_rows > 0
    assert json.loads((out / "manifest.json").read_text())["tool"] == "lbnorm"


def _command(inputs: Sequence[Path], out: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "lbnorm",
        "run",
        *map(str, inputs),
        "--out",
        str(out),
        "--quiet",
    ]


def _env(fault: str = "") -> dict[str, str]:
    env = {**os.environ, "SOURCE_DATE_EPOCH": EPOCH}
    env.pop("LBNORM_FAULT_POINT", None)
    if fault:
        env["LBNORM_FAULT_POINT"] = fault
    return env


@dataclass(frozen=True, slots=True, kw_only=True)
class Reference:
    """Input sets and the exact output each one gives."""

    old_inputs: list[Path]
    new_inputs: list[Path]
    big_inputs: list[Path]
    old: Digests
    new: Digests
    big: Digests
    folder: Path


def _make_big_table(path: Path, *, n_models: int) -> None:
    """A long-format table big enough that writing its outputs takes a while."""
    subtasks = load_suite("openllm-v2").subtask_table()
    rng = np.random.default_rng(0)
    n = n_models * len(subtasks)
    pd.DataFrame(
        {
            "model": np.repeat(
                [f"org/model-{i:05d}" for i in range(n_models)], len(subtasks)
            ),
            "benchmark": np.tile(subtasks["benchmark"].to_numpy(), n_models),
            "subtask": np.tile(subtasks["subtask"].to_numpy(), n_models),
            "raw_score": rng.uniform(0.0, 1.0, n).round(6),
            "stderr": rng.uniform(0.0, 0.05, n).round(6),
        }
    ).to_csv(path, index=False)


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Reference:
    folder = tmp_path_factory.mktemp("reference")
    big = folder / "big.csv"
    _make_big_table(big, n_models=800)
    sets = {"old": GOLDEN[:3], "new": GOLDEN, "big": [big]}
    digests = {}
    for name, inputs in sets.items():
        run(inputs, out=folder / name, created_at=CREATED_AT)
        digests[name] = _digests(folder / name)
    return Reference(
        old_inputs=sets["old"],
        new_inputs=sets["new"],
        big_inputs=sets["big"],
        old=digests["old"],
        new=digests["new"],
        big=digests["big"],
        folder=folder,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Kill:
    """One killed run: how it was killed and what it may leave in the output."""

    name: str
    fault: str = ""  # LBNORM_FAULT_POINT
    big: bool = False  # the big table (long writes) instead of the golden files
    may_finish: bool = False  # the run may complete before the kill lands
    swapped: bool = False  # killed after the swap: the new output is in place


KILLS = [
    # At named points: inputs parsed, nothing computed; lock held; between tables; ...
    *(Kill(name=f"parsed-{i}", fault="computing") for i in range(2)),
    *(Kill(name=f"lock-held-{i}", fault="locked") for i in range(2)),
    *(Kill(name=f"after-table-{n}", fault=f"table-written@{n}") for n in (1, 2, 3)),
    *(Kill(name=f"staged-{i}", fault="staged") for i in range(2)),
    *(Kill(name=f"swapped-{i}", fault="swapped", swapped=True) for i in range(2)),
    # A timer thread kills the run a few ms after a point while it goes on: in the
    # middle of writing the second or third Parquet file of the big table, ...
    *(
        Kill(
            name=f"writing-table-{n}-{ms}ms",
            fault=f"table-written@{n}:after={ms}",
            big=True,
            may_finish=True,
        )
        for n in (1, 2)
        for ms in (1, 4)
    ),
    # ... anywhere in the writes, the swap or the cleanup, ...
    *(
        Kill(
            name=f"writer-{ms}ms", fault=f"locked:after={ms}", big=True, may_finish=True
        )
        for ms in (3, 12, 30)
    ),
    # ... or at a random moment of the computation and the writes.
    *(
        Kill(
            name=f"random-{i}",
            fault=f"computing:after={random.Random(i).randint(20, 600)}",
            big=True,
            may_finish=True,
        )
        for i in range(3)
    ),
]


def _killed_run(kill: Kill, reference: Reference, folder: Path) -> dict[str, Any]:
    """Run and kill one lbnorm process on a copy of the old output; report the aftermath."""
    out = folder / "out"
    shutil.copytree(reference.folder / "old", out)
    inputs = reference.big_inputs if kill.big else reference.new_inputs
    process = subprocess.Popen(
        _command(inputs, out),
        env=_env(kill.fault),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    _, stderr = process.communicate(timeout=120)
    return {
        "returncode": process.returncode,
        "stderr": stderr.decode(),
        "digests": _digests(out),
        "leftovers": _siblings(out),
        "is_readable": _readable(out),
        "is_torn": _has_torn_parquet(out),
    }


def _has_torn_parquet(out: Path) -> bool:
    """Whether the killed run left a half-written Parquet file in its staging directory."""
    for staging in out.parent.glob(".out.tmp-*"):
        for table in staging.glob("*.parquet"):
            try:
                pq.read_metadata(table)
            except Exception:  # a torn file is any file that cannot be read
                return True
    return False


def _readable(out: Path) -> bool:
    try:
        _assert_readable(out)
    except Exception:  # any failure to read counts as unreadable
        return False
    return True


@pytest.mark.slow  # a loop of killed subprocess runs: ~8 s
def test_killed_runs_leave_the_previous_output_intact(
    reference: Reference, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with ThreadPoolExecutor(max_workers=3) as pool:
        outcomes = dict(
            zip(
                [kill.name for kill in KILLS],
                pool.map(
                    lambda kill: _killed_run(kill, reference, tmp_path / kill.name),
                    KILLS,
                ),
                strict=True,
            )
        )
    killed = 0
    for kill in KILLS:
        outcome = outcomes[kill.name]
        new = reference.big if kill.big else reference.new
        if outcome["returncode"] == 0 and kill.may_finish:
            assert outcome["digests"] == new, kill
        else:
            assert outcome["returncode"] == -signal.SIGKILL, (kill, outcome["stderr"])
            killed += 1
            allowed = (
                [new]
                if kill.swapped
                else [reference.old, new]
                if kill.may_finish
                else [reference.old]
            )
            assert outcome["digests"] in allowed, (
                kill
            )  # complete, old or new, never a mix
        assert outcome["is_readable"], kill
        assert "Traceback" not in outcome["stderr"]
    # Every kill at a named point lands; timer kills land unless the run wins the
    # race (how many do depends on the machine's load), so ask for at least one.
    assert killed >= sum(not kill.may_finish for kill in KILLS) + 1
    torn = [kill.name for kill in KILLS if outcomes[kill.name]["is_torn"]]
    print(f"{killed} runs killed; {len(torn)} in the middle of a Parquet write: {torn}")
    # A later run succeeds and removes what each killed run left (staging, the old output).
    monkeypatch.setenv("SOURCE_DATE_EPOCH", EPOCH)
    left = [kill for kill in KILLS if outcomes[kill.name]["leftovers"] != []]
    assert left  # the kills did leave staging directories behind
    for kill in KILLS:
        out = tmp_path / kill.name / "out"
        inputs = reference.big_inputs if kill.big else reference.new_inputs
        if kill.big and kill not in left:
            continue  # nothing to clean; spare the time
        assert main(["run", *map(str, inputs), "--out", str(out), "--quiet"]) == 0
        assert _digests(out) == (reference.big if kill.big else reference.new)
        assert _siblings(out) == [], kill


@dataclass(frozen=True, slots=True, kw_only=True)
class Interruption:
    """A run stopped by SIGTERM or Ctrl-C: it cleans up, so nothing may stay behind."""

    name: str
    fault: str  # LBNORM_FAULT_POINT, with a signal action
    code: int  # 143 (SIGTERM) or 130 (Ctrl-C)
    big: bool = False
    may_finish: bool = False
    swapped: bool = False


INTERRUPTIONS = [
    *(
        Interruption(name=f"{kind}-at-{point}", fault=f"{point}:{kind}", code=code)
        for kind, code in (("term", 143), ("int", 130))
        for point in (
            "computing",
            "locked",
            "table-written@1",
            "table-written@3",
            "staged",
        )
    ),
    *(
        Interruption(
            name=f"{kind}-after-swap", fault=f"swapped:{kind}", code=code, swapped=True
        )
        for kind, code in (("term", 143), ("int", 130))
    ),
    # in the middle of the big table's writes, at random moments
    *(
        Interruption(
            name=f"{kind}-{ms}ms",
            fault=f"locked:{kind}-after={ms}",
            code=code,
            big=True,
            may_finish=True,
        )
        for kind, code in (("term", 143), ("int", 130))
        for ms in (3, 30)
    ),
    *(
        Interruption(
            name=f"term-random-{i}",
            fault=f"computing:term-after={random.Random(i).randint(20, 600)}",
            code=143,
            big=True,
            may_finish=True,
        )
        for i in range(4)
    ),
]


def _interrupted_run(
    interruption: Interruption, reference: Reference, folder: Path
) -> dict[str, Any]:
    out = folder / "out"
    shutil.copytree(reference.folder / "old", out)
    inputs = reference.big_inputs if interruption.big else reference.new_inputs
    process = subprocess.run(
        _command(inputs, out),
        env=_env(interruption.fault),
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    return {
        "returncode": process.returncode,
        "stderr": process.stderr,
        "digests": _digests(out),
        "leftovers": _siblings(out),
    }


@pytest.mark.slow
def test_sigterm_and_ctrl_c_clean_up_and_say_what_they_left(
    reference: Reference, tmp_path: Path
) -> None:
    """Old output (or, after the swap, the new one), nothing beside it, one true line."""
    with ThreadPoolExecutor(max_workers=3) as pool:
        outcomes = list(
            pool.map(
                lambda case: _interrupted_run(case, reference, tmp_path / case.name),
                INTERRUPTIONS,
            )
        )
    stopped = 0
    for case, outcome in zip(INTERRUPTIONS, outcomes, strict=True):
        new = reference.big if case.big else reference.new
        out = tmp_path / case.name / "out"
        assert outcome["leftovers"] == [], case
        assert "Traceback" not in outcome["stderr"], case
        if outcome["returncode"] == 0 and case.may_finish:
            assert outcome["digests"] == new, case
            continue
        stopped += 1
        word = "terminated" if case.code == 143 else "interrupted"
        assert outcome["returncode"] == case.code, (case, outcome["stderr"])
        if outcome["digests"] == new and (case.swapped or case.may_finish):
            assert (
                outcome["stderr"]
                == f"lbnorm: {word}; the new output is in place in {out}.\n"
            )
        else:
            assert outcome["digests"] == reference.old, case
            assert (
                outcome["stderr"]
                == f"lbnorm: {word}; the previous output is unchanged.\n"
            )
    assert stopped >= sum(not case.may_finish for case in INTERRUPTIONS) + 1


def test_a_run_killed_between_the_two_renames_is_repaired(
    reference: Reference, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Where renameat2 is missing, the swap is two renames; a kill between them is undone."""
    out = tmp_path / "out"
    shutil.copytree(reference.folder / "old", out)
    out.rename(tmp_path / ".out.old-0123456789ab")  # the state between the two renames
    (tmp_path / ".out.tmp-0123456789ab").mkdir()
    (tmp_path / ".out.tmp-0123456789ab" / ".lbnorm-staging").write_bytes(
        b""
    )  # its mark
    (tmp_path / ".out.tmp-0123456789ab" / "subtasks.parquet").write_bytes(b"PAR1 half")
    argv = ["run", *map(str, reference.new_inputs), "--out", str(out), "--quiet"]
    with pytest.MonkeyPatch.context() as patch:  # (the next run: this process)
        patch.setenv("SOURCE_DATE_EPOCH", EPOCH)
        assert main(argv) == 0, capsys.readouterr().err
    assert _digests(out) == reference.new
    assert _siblings(out) == []


def _wait_until_stopped(process: subprocess.Popen[bytes]) -> None:
    _, status = os.waitpid(process.pid, os.WUNTRACED)
    assert os.WIFSTOPPED(status), status


def test_second_writer_fails_clearly_while_the_first_holds_the_lock(
    reference: Reference, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    shutil.copytree(reference.folder / "old", out)
    first = subprocess.Popen(
        _command(reference.new_inputs, out),
        env=_env("staged:stop"),
        stderr=subprocess.PIPE,
    )
    try:
        _wait_until_stopped(first)  # fully staged, holding the lock, not swapped
        code = main(
            ["run", *map(str, reference.old_inputs[:1]), "--out", str(out), "--quiet"]
        )
        assert code == 6
        assert capsys.readouterr().err == (
            f"lbnorm: error: {out}: another lbnorm run is writing this output directory.\n"
            "Hint: wait for it to finish, or write to another --out.\n"
        )
        assert _digests(out) == reference.old
    finally:  # a failed assertion leaves no process running into the next test
        first.send_signal(signal.SIGCONT)
        _, stderr = first.communicate(timeout=120)
    assert first.returncode == 0, stderr
    assert _digests(out) == reference.new  # the first run's output, whole
    assert _siblings(out) == []


def test_concurrent_runs_one_output_never_mixed(
    reference: Reference, tmp_path: Path
) -> None:
    sets = [GOLDEN[0:3], GOLDEN[3:6], GOLDEN[6:8]]
    expected = []
    for index, inputs in enumerate(sets):
        run(inputs, out=tmp_path / f"expected-{index}", created_at=CREATED_AT)
        expected.append(_digests(tmp_path / f"expected-{index}"))
    out = tmp_path / "shared" / "out"
    for _round in range(1):
        processes = [
            subprocess.Popen(
                _command(inputs, out), env=_env(), stderr=subprocess.PIPE, text=True
            )
            for inputs in sets
        ]
        results = [(p.wait(timeout=120), p.communicate()[1]) for p in processes]
        winners = [index for index, (code, _) in enumerate(results) if code == 0]
        for code, stderr in results:
            assert code in {0, 6}, stderr
            if code == 6:
                assert (
                    "another lbnorm run is writing this output directory.\nHint:"
                    in stderr
                )
            assert "Traceback" not in stderr
        assert winners
        assert _digests(out) in [
            expected[index] for index in winners
        ]  # one run's output, whole
        assert _siblings(out) == []


def test_a_stopped_run_does_not_block_other_outputs_in_its_folder(
    reference: Reference, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    shutil.copytree(reference.folder / "old", out)
    first = subprocess.Popen(
        _command(reference.new_inputs, out),
        env=_env("staged:stop"),
        stderr=subprocess.PIPE,
    )
    try:
        _wait_until_stopped(first)  # it holds its staging folder's lock
        beside = tmp_path / "beside"  # written by this process
        monkeypatch.setenv("SOURCE_DATE_EPOCH", EPOCH)
        argv = ["run", *map(str, reference.old_inputs), "--out", str(beside), "--quiet"]
        assert main(argv) == 0
        assert _digests(beside) == reference.old
    finally:  # a failed assertion leaves no process running into the next test
        first.send_signal(signal.SIGCONT)
        _, stderr = first.communicate(timeout=120)
    assert first.returncode == 0, stderr
    assert _digests(out) == reference.new
    assert sorted(p.name for p in tmp_path.iterdir()) == ["beside", "out"]


@pytest.mark.slow
def test_many_runs_on_one_output_and_beside_it(
    reference: Reference, tmp_path: Path
) -> None:
    """12 runs on one output and 4 on others in the same folder, all at once."""
    out = tmp_path / "shared" / "out"
    shared = [
        (reference.old_inputs if index % 2 else reference.new_inputs, out)
        for index in range(12)
    ]
    beside = [
        (reference.old_inputs, out.with_name(f"other-{index}")) for index in range(4)
    ]
    processes = [
        subprocess.Popen(
            _command(inputs, target), env=_env(), stderr=subprocess.PIPE, text=True
        )
        for inputs, target in [*shared, *beside]
    ]
    results = [(p.wait(timeout=300), p.communicate()[1]) for p in processes]
    for code, stderr in results[:12]:
        assert "Traceback" not in stderr
        assert (code, stderr) == (0, "") or (
            code == 6
            and "another lbnorm run is writing this output directory" in stderr
        ), stderr
    assert any(code == 0 for code, _ in results[:12])
    assert results[12:] == [(0, "")] * 4  # never refused for another output's sake
    assert _digests(out) in [reference.old, reference.new]  # one run's output, whole
    for index in range(4):
        assert _digests(out.with_name(f"other-{index}")) == reference.old
    assert sorted(p.name for p in out.parent.iterdir()) == [
        "other-0",
        "other-1",
        "other-2",
        "other-3",
        "out",
    ]


# --- a full disk, a read-only directory ----------------------------------------------


def _limit_file_size() -> None:
    signal.signal(
        signal.SIGXFSZ, signal.SIG_IGN
    )  # get EFBIG, as on a full disk, not a kill
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))


def test_file_size_limit_mid_write_is_a_clear_error(
    reference: Reference, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    shutil.copytree(reference.folder / "old", out)
    process = subprocess.run(
        _command(reference.new_inputs, out),
        env=_env(),
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        preexec_fn=_limit_file_size,
    )
    assert process.returncode == 6
    assert re.fullmatch(
        rf"lbnorm: error: {re.escape(str(out))}: cannot write the output \(.*File too large\); "
        r"the previous output is unchanged\.\nHint: a file size limit \(ulimit -f\) was hit; raise it or write elsewhere\.\n",
        process.stderr,
    ), process.stderr
    assert _digests(out) == reference.old
    assert _siblings(out) == []  # the half-written staging directory is gone


def test_disk_full_is_a_clear_error(
    reference: Reference,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "out"
    shutil.copytree(reference.folder / "old", out)
    from lbnorm.output import tablefile

    write = tablefile.Hashed.write  # where every table's bytes go to the disk

    def write_half_then_fail(sink: Any, data: Any) -> int:
        write(sink, memoryview(data).cast("B")[: len(data) // 2])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(tablefile.Hashed, "write", write_half_then_fail)
    assert (
        main(["run", *map(str, reference.new_inputs), "--out", str(out), "--quiet"])
        == 6
    )
    assert capsys.readouterr().err == (
        f"lbnorm: error: {out}: cannot write the output (No space left on device); "
        "the previous output is unchanged.\nHint: free disk space or write elsewhere.\n"
    )
    assert _digests(out) == reference.old
    assert _siblings(out) == []


def _without_override() -> list[str]:
    """A command prefix under which root, too, is bound by file permissions."""
    if os.geteuid() != 0:
        return []
    if setpriv := shutil.which("setpriv"):
        return [
            setpriv,
            "--bounding-set=-dac_override,-dac_read_search,-fowner",
            "--inh-caps=-all",
        ]
    pytest.skip("running as root without setpriv: permissions cannot be enforced")


READ_ONLY = (
    r"cannot write the output \(the folder is read-only, dr-xr-xr-x\); the previous "
    r"output is unchanged\.\nHint: make it writable \(chmod u\+w {out}\) or choose "
    r"another --out\."
)
NO_STAGING = (
    r"cannot write the output \((Permission denied|Read-only file system)\); the "
    r"previous output is unchanged\.\nHint: (check the directory's permissions|the "
    r"file system is read-only)[^\n]*"
)


@pytest.mark.parametrize(
    ("parent_mode", "out_mode", "message"),
    [
        (0o755, 0o555, READ_ONLY),  # a read-only output in a writable folder
        # (the same refusal as the first: a quick sibling)
        pytest.param(0o555, 0o555, READ_ONLY, marks=pytest.mark.slow),
        (0o555, 0o755, NO_STAGING),  # no room beside it for the staging folder
    ],
    ids=["output", "both", "parent"],
)
def test_read_only_output_directory_is_a_clear_error(
    parent_mode: int, out_mode: int, message: str, reference: Reference, tmp_path: Path
) -> None:
    """The folder's permissions are the user's word: refused, kept, nothing left."""
    parent = tmp_path / "readonly"
    parent.mkdir()
    out = parent / "out"
    shutil.copytree(reference.folder / "old", out)
    prefix = _without_override()
    parent.chmod(parent_mode)
    out.chmod(out_mode)
    try:
        process = subprocess.run(
            [*prefix, *_command(reference.new_inputs, out)],
            env=_env(),
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
    finally:
        parent.chmod(0o755)
        out.chmod(0o755)
    assert process.returncode == 6, process.stderr
    assert re.fullmatch(
        rf"lbnorm: error: {re.escape(str(out))}: "
        + message.format(out=re.escape(str(out)))
        + r"\n",
        process.stderr,
    ), process.stderr
    assert _digests(out) == reference.old
    assert _siblings(out) == []


def test_leftovers_of_other_outputs_are_not_touched(
    reference: Reference, tmp_path: Path
) -> None:
    """Cleaning up matches this output's name literally: 'a*' is not a pattern."""
    other_staging = tmp_path / ".ab.tmp-0123456789ab"  # another run, writing ./ab
    other_staging.mkdir()
    (other_staging / "subtasks.parquet").write_bytes(b"in progress")
    odd = tmp_path / "res[1]"
    shutil.copytree(reference.folder / "old", odd)
    odd.rename(tmp_path / ".res[1].old-0123456789ab")  # killed between two renames
    run(reference.new_inputs, out=tmp_path / "a*", created_at=CREATED_AT)
    assert (other_staging / "subtasks.parquet").read_bytes() == b"in progress"
    run(reference.new_inputs, out=odd, created_at=CREATED_AT)
    assert _digests(odd) == reference.new
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".ab.tmp-0123456789ab",
        "a*",
        "res[1]",
    ]


# --- one transaction: concurrent nightly runs, readers racing a swap (issue 38) ------------


def _assert_whole(out: Path) -> None:
    """The folder holds exactly the files its manifest names, each as it records."""
    manifest = json.loads((out / "manifest.json").read_text())
    listed = manifest["outputs"]
    assert sorted(p.name for p in out.iterdir()) == sorted([*listed, "manifest.json"])
    for name, entry in listed.items():
        data = (out / name).read_bytes()
        assert (len(data), hashlib.sha256(data).hexdigest()) == (
            entry["bytes"],
            entry["sha256"],
        ), name


@pytest.mark.slow  # 12 rounds of two nightly runs at once: ~1 min
def test_concurrent_nightly_runs_leave_whole_outputs(
    reference: Reference, tmp_path: Path
) -> None:
    """A nightly run swapped twice, unlocked in between: a second run could come in."""
    out = tmp_path / "out"
    nightly = ["--health", "--intervals", "--report"]
    pairs = [
        (reference.old_inputs, reference.old),
        (reference.new_inputs, reference.new),
    ]
    for round_ in range(12):
        sets = pairs[:: 1 if round_ % 2 else -1]
        processes = [
            subprocess.Popen(
                [*_command(inputs, out), *nightly, str(tmp_path / f"r{index}.json")],
                env=_env(),
                stderr=subprocess.PIPE,
                text=True,
            )
            for index, (inputs, _) in enumerate(sets)
        ]
        results = [(p.wait(timeout=300), p.communicate()[1]) for p in processes]
        for code, stderr in results:
            assert code in {0, 6, 7}, stderr
            assert "Traceback" not in stderr
            if code == 6:
                assert "another lbnorm run is writing this output directory" in stderr
        assert any(code != 6 for code, _ in results)
        _assert_whole(out)
        manifest = json.loads((out / "manifest.json").read_text())
        assert {"health.parquet", "intervals.parquet"} <= set(manifest["outputs"])
        board = _digests(out)["leaderboard.parquet"]
        in_place = 0 if board == sets[0][1]["leaderboard.parquet"] else 1
        assert board == sets[in_place][1]["leaderboard.parquet"]
        assert results[in_place][0] != 6  # exit 6 says the previous output is in place
        models = pq.read_table(out / "leaderboard.parquet")["model"].to_pylist()
        intervals = pq.read_table(out / "intervals.parquet")["model"].to_pylist()
        assert sorted(intervals) == sorted(
            models
        )  # one run's tables, not two runs' mixed
        assert _siblings(out) == sorted(
            name for name in ("r0.json", "r1.json") if (tmp_path / name).exists()
        )


_SWAPPING = """
import sys
from pathlib import Path
from lbnorm import run
sets = [[Path(p) for p in s.split(",")] for s in sys.argv[2:4]]
for at in range(int(sys.argv[4])):
    run(sets[at % 2], out=sys.argv[1])
"""


@pytest.mark.slow  # a reader loop against 30 swaps: ~1 min
def test_readers_racing_a_swap_read_one_version(
    reference: Reference, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """diff and export while a run swaps the folder: never a false "damaged", no traceback."""
    out = tmp_path / "out"
    run(reference.old_inputs, out=out, created_at=CREATED_AT)
    inputs = [",".join(map(str, files)) for files in (reference.big_inputs, GOLDEN)]
    writer = subprocess.Popen(
        [sys.executable, "-c", _SWAPPING, str(out), *inputs, "30"],
        env=_env(),
        stderr=subprocess.PIPE,
        text=True,
    )
    readers = {
        "diff": ["diff", str(reference.folder / "old"), str(out), "--no-intervals"],
        "export": [
            *["export", str(out), "--format", "open-llm-leaderboard"],
            *["--out", str(tmp_path / "e.csv"), "--skip-incomplete"],
            *["--unknown-precision", "bfloat16"],
        ],
        "show": ["show", str(out), "--top", "3"],
    }
    reads = 0
    try:
        while writer.poll() is None:
            for argv in readers.values():
                code = main(argv)
                err = capsys.readouterr().err
                assert "Traceback" not in err
                assert "does not match the output's manifest" not in err, err
                assert code == 0, err
                reads += 1
    finally:
        _, stderr = writer.communicate(timeout=300)
    assert writer.returncode == 0, stderr
    assert reads >= 10
