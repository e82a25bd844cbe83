from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("quick", max_examples=10, deadline=None)
settings.register_profile("dev", max_examples=25, deadline=None)
settings.register_profile(
    "ci", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def pytest_configure(config: pytest.Config) -> None:
    """The property tests' example count: fewer in the quick run, every one in the full suite.

    The quick run (``-m "not slow"``, the default) draws 10 examples per property;
    the full suite (``-m ""``, what ``.ci/run`` runs) draws 25, or 200 with ``CI``
    set. ``HYPOTHESIS_PROFILE=quick|dev|ci`` chooses outright.
    """
    full = "ci" if os.environ.get("CI") else "dev"
    quick = config.getoption("markexpr", "") == "not slow"
    settings.load_profile(
        os.environ.get("HYPOTHESIS_PROFILE", "quick" if quick else full)
    )


FIXTURES = Path(__file__).parent / "fixtures"
REPO = Path(__file__).parent.parent


@pytest.fixture(scope="session", autouse=True)
def _subprocesses_run_this_checkout() -> Iterator[None]:
    """Commands the tests start (``python -m lbnorm``, ``lbnorm``) import this checkout's lbnorm.

    The tests import it from ``src`` (``pythonpath`` in ``pyproject.toml``); a
    subprocess would import whatever copy the interpreter has installed, which on
    a machine shared by several clones (CI runs ``pip install -e`` into one
    Python) may be another clone's, at another commit: its manifests would differ
    from those written in the test process.
    """
    path = os.pathsep.join(
        filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")])
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYTHONPATH", path)
        yield


@pytest.fixture(scope="session")
def fixtures() -> Path:
    """The committed fixture files (copied from the reference material)."""
    return FIXTURES


@pytest.fixture(scope="session")
def golden_dir() -> Path:
    """Excerpts of 8 real results files and their expected values."""
    return FIXTURES / "golden"


@pytest.fixture(scope="session")
def full_structure_dir() -> Path:
    """Two real results files in the leaderboard's directory layout."""
    return FIXTURES / "full_structure"


@pytest.fixture(scope="session")
def published_csv() -> Path:
    """The final published Open LLM Leaderboard v2 table (4,576 models)."""
    return REPO / "data" / "published_v2_final.csv"


@pytest.fixture(autouse=True)
def _sums_on_their_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every batch summed on the summing thread, as real inputs' batches are.

    Test inputs are small: under the default threshold they would all be summed
    at once, and the thread (the path a large input takes) would go untested.
    So too the output tables: the benchmark table's keys built while the sums
    are finished, the leaderboard beside the benchmark table
    (:meth:`lbnorm.engines.result.TableParts.beside`). Command lines run in a subprocess keep
    the default (small batches at once).
    """
    monkeypatch.setattr("lbnorm._runtime.THREAD_ROWS", 1)
