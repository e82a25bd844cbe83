"""manifest.json's bytes and checks: the fast paths agree with json exactly."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lbnorm.core import manifest as manifest_module
from lbnorm.core.manifest import (
    Listing,
    manifest_bytes,
    manifest_head,
    manifest_problem,
)

pytest.importorskip("msgspec")  # the fast paths; without it json does all


def _as_json(manifest: dict[str, Any]) -> bytes:
    """What lbnorm wrote before the fast path, and still writes for small manifests."""
    return (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode()


_text = st.text(max_size=12)  # any code point: escapes, non-ASCII, surrogates
_row = st.dictionaries(
    st.sampled_from(["path", "sha256", "rows", "format", "tasks", "superseded_by"]),
    st.one_of(
        _text, st.integers(-(2**63), 2**63 - 1), st.booleans(), st.none(),
        st.lists(_text, max_size=4),
    ),
)  # fmt: skip


@given(rows=st.lists(_row, max_size=20), created=_text)
def test_a_listing_is_written_as_json_writes_it(
    rows: list[dict[str, Any]], created: str
) -> None:
    manifest = {"tool": "lbnorm", "created_at": created, "outputs": {"a": {"rows": 1}}}
    expected = _as_json({**manifest, "inputs": rows})
    with pytest.MonkeyPatch.context() as patch:  # msgspec for any listing
        patch.setattr(manifest_module, "_LONG_LISTING", 0)
        assert manifest_bytes({**manifest, "inputs": Listing(rows)}) == expected
    assert manifest_bytes({**manifest, "inputs": Listing(rows)}) == expected
    assert json.loads(expected) == {**manifest, "inputs": rows}


def test_a_results_tree_sized_listing_takes_the_fast_path_and_agrees() -> None:
    rows = [
        {
            "path": f"/tree/org-{at}/model/results_2024-01-01T00-00-00.json",
            "sha256": f"{at:064x}",
            "rows": 40,
            "bytes": 131_000 + at,
            "superseded_by": None if at % 7 else f"/tree/org-{at}/newer.json",
            "tasks": [f"leaderboard_task_{k}" for k in range(at % 5)],
            "chat_template": at % 2 == 0,
        }
        for at in range(5_000)
    ]
    manifest = {"tool": "lbnorm", "format": 1, "outputs": {}, "counts": {"x": 0.5}}
    listing = manifest_module._listing_bytes(rows)
    assert listing is not None  # msgspec wrote it
    assert manifest_bytes({**manifest, "inputs": Listing(rows)}) == _as_json(
        {**manifest, "inputs": rows}
    )


def test_text_that_json_escapes_is_written_by_json() -> None:
    rows = [{"path": "/tree/café/results_1.json"}] * 300  # (a long listing)
    assert manifest_module._listing_bytes(rows) is None  # json escapes it as \u00e9
    data = manifest_bytes({"inputs": Listing(rows)})
    assert b"caf\\u00e9" in data
    assert data == _as_json({"inputs": rows})


def _large(head: str) -> bytes:
    """A manifest over the size from which only its checked keys are decoded."""
    inputs = json.dumps(
        [{"path": f"/p/{at}", "sha256": "0" * 64} for at in range(20_000)]
    )
    data = ("{" + head + ', "inputs": ' + inputs + "}").encode()
    assert len(data) >= manifest_module._LARGE_MANIFEST
    return data


@pytest.mark.parametrize(
    "head",
    [
        '"tool": "lbnorm", "format": 1, "outputs": {"a.parquet": {"rows": 2}}',
        '"tool": "lbnorm", "outputs": {}, "kind": "ratings"',
        '"tool": "lbnorm", "format": 99, "outputs": {}',
        '"tool": "lbnorm", "format": "1", "outputs": {}',
        '"tool": "lbnorm", "format": 1, "outputs": [], "kind": "x"',
        '"tool": "other"',
        '"tool": "lbnorm", "format": 1, "outputs": {}, "score": NaN',  # json reads NaN
    ],
)
def test_a_large_manifest_is_checked_as_the_whole_json_would_be(head: str) -> None:
    data = _large(head)
    whole = json.loads(data)
    read = manifest_head(data)
    assert isinstance(read, dict)
    keys = ("tool", "format", "outputs", "kind")
    assert {k: read[k] for k in keys if k in read} == {
        k: whole[k] for k in keys if k in whole
    }
    assert manifest_problem(read) == manifest_problem(whole)


def test_a_large_file_that_is_not_a_manifest_reads_as_json_does() -> None:
    data = b"[" + b"1, " * 600_000 + b"1]"
    assert manifest_head(data) == json.loads(data)
    assert manifest_problem(manifest_head(data)) == 'has no "tool": "lbnorm"'
    with pytest.raises(ValueError, match="Expecting"):
        manifest_head(_large('"tool": "lbnorm"')[:-1])  # cut short
