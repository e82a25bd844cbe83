"""lbnorm.engines.encode: variant and subtask codes, across batches and Arrow layouts.

The oracle is a plain Python factorization of key tuples in order of first
appearance; the encoder must agree with it whatever the batches, the row order,
the chunking or the dictionary encoding of the columns.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from strategies import OPENLLM_V2, batches, model_names, score_tables, shuffled

from lbnorm.core.schemas import KEY_COLUMNS, Batch
from lbnorm.engines import variants as variants_module
from lbnorm.engines import vocabulary
from lbnorm.engines.encode import KeyEncoder, Variants, factorize, merge_variants

PAIRS = [(b.name, s.name) for b in OPENLLM_V2.benchmarks for s in b.subtasks]
SUITE_INDEX = {pair: index for index, pair in enumerate(PAIRS)}
DEFAULTS: dict[str, Any] = {"precision": "", "revision": "", "chat_template": False}

Key = tuple[Any, Any, Any, Any]


def _keys(table: pa.Table) -> list[Key]:
    """Each row's variant key, absent optional columns at their defaults."""
    columns = [
        table.column(name).to_pylist()
        if name in table.column_names
        else [DEFAULTS[name]] * table.num_rows
        for name in KEY_COLUMNS
    ]
    return list(zip(*columns, strict=True))


def _oracle(keys: list[Key]) -> tuple[list[int], list[Key]]:
    """Codes in order of first appearance (-1 for a key with a null), and the keys."""
    codes: dict[Key, int] = {}
    out = []
    for key in keys:
        if any(part is None for part in key):
            out.append(-1)
        else:
            out.append(codes.setdefault(key, len(codes)))
    return out, list(codes)


def _subtask_oracle(table: pa.Table) -> list[int]:
    pairs = zip(
        table.column("benchmark").to_pylist(),
        table.column("subtask").to_pylist(),
        strict=True,
    )
    return [SUITE_INDEX.get(pair, -1) for pair in pairs]


def _key_table(keys: list[Key]) -> pa.Table:
    """A table of key columns, a row per key."""
    types = [pa.string(), pa.string(), pa.string(), pa.bool_()]
    return pa.table(
        {
            name: pa.array([key[position] for key in keys], type_)
            for position, (name, type_) in enumerate(
                zip(KEY_COLUMNS, types, strict=True)
            )
        }
    )


def _variant_rows(variants: Variants) -> list[Key]:
    return [tuple(row.values()) for row in variants.table().to_pylist()]


def _plain(table: pa.Table) -> pa.Table:
    """Dictionary columns as plain strings."""
    for index, field in enumerate(table.schema):
        if pa.types.is_dictionary(field.type):
            table = table.set_column(
                index, field.name, table.column(index).cast(pa.string())
            )
    return table


# --- codes: stable across batches, any layout -----------------------------------------


@given(table=score_tables(OPENLLM_V2, max_variants=8), data=st.data())
def test_codes_are_first_appearance_and_stable_across_batches(
    table: pa.Table, data: st.DataObject
) -> None:
    table = data.draw(shuffled(table))  # interleaved variants, not only runs
    parts = data.draw(batches(table))
    encoder = KeyEncoder(PAIRS)
    variant, subtask = [], []
    for part in parts:
        codes, subtasks = encoder.encode(part.table)
        variant += codes.tolist()
        subtask += subtasks.tolist()
    expected, keys = _oracle(_keys(_plain(table)))
    assert variant == expected
    assert subtask == _subtask_oracle(_plain(table))
    assert encoder.n_variants == len(keys)
    assert _variant_rows(encoder.variants()) == keys


@given(table=score_tables(OPENLLM_V2, max_variants=8, dictionary=False), data=st.data())
def test_chunked_dictionaries_give_the_codes_of_plain_strings(
    table: pa.Table, data: st.DataObject
) -> None:
    """Chunks each with a dictionary of its own (Parquet row groups), or sharing one."""
    cuts = sorted(data.draw(st.sets(st.integers(1, max(table.num_rows - 1, 1)))))
    bounds = [0, *(cut for cut in cuts if cut < table.num_rows), table.num_rows]
    chunked = {}
    for field in table.schema:
        column = table.column(field.name)
        pieces = [
            column.slice(start, stop - start).combine_chunks()
            for start, stop in itertools.pairwise(bounds)
        ]
        if pa.types.is_string(field.type):
            if data.draw(st.booleans()):  # one dictionary per chunk
                pieces = [piece.dictionary_encode() for piece in pieces]
            else:  # one dictionary shared by every chunk
                whole = column.combine_chunks().dictionary_encode()
                pieces = [
                    pa.DictionaryArray.from_arrays(
                        whole.indices.slice(start, stop - start), whole.dictionary
                    )
                    for start, stop in itertools.pairwise(bounds)
                ]
        chunked[field.name] = pa.chunked_array(pieces, pieces[0].type)
    layout = pa.table(chunked)
    plain_codes = [c.tolist() for c in KeyEncoder(PAIRS).encode(table)]
    chunked_codes = [c.tolist() for c in KeyEncoder(PAIRS).encode(layout)]
    assert chunked_codes == plain_codes


def test_dictionaries_with_nulls_and_unused_values() -> None:
    model = pa.DictionaryArray.from_arrays(
        pa.array([2, None, 0, 2], pa.int32()), pa.array(["a", "unused", "b"])
    )
    table = pa.table(
        {"model": model, "benchmark": ["GPQA"] * 4, "subtask": ["main"] * 4}
    )
    encoder = KeyEncoder(PAIRS)
    variant, _ = encoder.encode(table)
    assert variant.tolist() == [0, -1, 1, 0]
    assert _variant_rows(encoder.variants()) == [
        ("b", "", "", False),
        ("a", "", "", False),
    ]


def test_a_null_value_in_a_dictionary_is_a_null_key() -> None:
    """Valid Arrow: the rows pointing at it have no variant, as a null index."""
    for values in (["a", None], ["a", None, "b", "c", "d"]):  # all used, or not
        model = pa.DictionaryArray.from_arrays(
            pa.array([1, 0, 1], pa.int32()), pa.array(values)
        )
        table = pa.table(
            {"model": model, "benchmark": ["GPQA"] * 3, "subtask": ["main"] * 3}
        )
        encoder = KeyEncoder(PAIRS)
        variant, _ = encoder.encode(table)
        assert variant.tolist() == [-1, 0, -1]
        assert _variant_rows(encoder.variants()) == [("a", "", "", False)]


def test_a_dictionary_with_a_repeated_value_is_one_value() -> None:
    model = pa.DictionaryArray.from_arrays(
        pa.array([0, 1], pa.int32()), pa.array(["org/a", "org/a"])
    )
    table = pa.table(
        {"model": model, "benchmark": ["GPQA"] * 2, "subtask": ["main", "diamond"]}
    )
    encoder = KeyEncoder(PAIRS)
    variant, _ = encoder.encode(table)
    assert variant.tolist() == [0, 0]
    assert _variant_rows(encoder.variants()) == [("org/a", "", "", False)]


def test_codes_survive_many_batches_and_growth() -> None:
    """More variants than the encoder's first arrays hold, a batch at a time."""
    encoder = KeyEncoder(PAIRS)
    names = [f"org/m{i:04d}" for i in range(300)]
    for start in range(0, 300, 7):
        chunk = names[start : start + 7]
        table = pa.table(
            {
                "model": chunk,
                "benchmark": ["GPQA"] * len(chunk),
                "subtask": ["main"] * len(chunk),
            }
        )
        assert encoder.encode(table)[0].tolist() == list(
            range(start, start + len(chunk))
        )
    again = pa.table(
        {
            "model": names[::-1],
            "benchmark": ["BBH"] * 300,
            "subtask": ["navigate"] * 300,
        }
    )
    variant, subtask = encoder.encode(again)
    assert variant.tolist() == list(range(299, -1, -1))
    assert set(subtask.tolist()) == {SUITE_INDEX[("BBH", "navigate")]}
    assert encoder.n_variants == 300


# --- nulls and absent key columns ------------------------------------------------------


def test_nulls_in_chat_template_are_null_keys() -> None:
    table = pa.table(
        {
            "model": ["a", "a", "a", "b"],
            "chat_template": pa.array([True, None, False, None], pa.bool_()),
            "benchmark": ["GPQA"] * 4,
            "subtask": ["main"] * 4,
        }
    )
    encoder = KeyEncoder(PAIRS)
    variant, _ = encoder.encode(table)
    assert variant.tolist() == [0, -1, 1, -1]
    assert encoder.variants().flags().to_pylist() == [True, False]


def test_chat_template_at_a_bit_offset() -> None:
    flags = pa.array([True, False, True, True, False, False, True, False, True, True])
    table = pa.table(
        {
            "model": ["a"] * 10,
            "chat_template": flags,
            "benchmark": ["GPQA"] * 10,
            "subtask": ["main"] * 10,
        }
    ).slice(3, 5)
    variant, _ = KeyEncoder(PAIRS).encode(table)
    assert variant.tolist() == [0, 1, 1, 0, 1]  # True, False, False, True, False


def test_absent_optional_keys_equal_their_defaults() -> None:
    encoder = KeyEncoder(PAIRS)
    bare = pa.table({"model": ["a"], "benchmark": ["GPQA"], "subtask": ["main"]})
    full = pa.table(
        {
            "model": ["a", "a"],
            "precision": ["", "bfloat16"],
            "revision": ["", ""],
            "chat_template": [False, False],
            "benchmark": ["GPQA", "GPQA"],
            "subtask": ["diamond", "diamond"],
        }
    )
    assert encoder.encode(bare)[0].tolist() == [0]
    assert encoder.encode(full)[0].tolist() == [0, 1]


def test_null_text_keys_and_unknown_pairs() -> None:
    table = pa.table(
        {
            "model": ["a", None, "b", "c", "d"],
            "revision": ["", "", None, "", ""],
            "benchmark": ["GPQA", "GPQA", "GPQA", None, "GPQA"],
            "subtask": ["main", "main", "main", "main", "navigate"],  # BBH's
        }
    )
    encoder = KeyEncoder(PAIRS)
    variant, subtask = encoder.encode(table)
    assert variant.tolist() == [0, -1, -1, 1, 2]
    assert subtask.tolist() == [
        SUITE_INDEX[("GPQA", "main")],
        *[SUITE_INDEX[("GPQA", "main")]] * 2,
        -1,
        -1,
    ]
    assert encoder.n_subtasks == len(PAIRS)


def test_empty_tables() -> None:
    encoder = KeyEncoder(PAIRS)
    empty = pa.table(
        {
            "model": pa.array([], pa.string()),
            "benchmark": pa.array([], pa.string()),
            "subtask": pa.array([], pa.string()),
        }
    )
    variant, subtask = encoder.encode(empty)
    assert (variant.size, subtask.size) == (0, 0)
    chunkless = pa.table(
        {
            name: pa.chunked_array([], pa.string())
            for name in ("model", "benchmark", "subtask")
        }
    )
    assert [c.size for c in encoder.encode(chunkless)] == [0, 0]
    assert len(encoder.variants()) == 0
    assert encoder.variants().table().num_rows == 0


def test_empty_model_names_are_found() -> None:
    encoder = KeyEncoder(PAIRS)
    variant, _ = encoder.encode(
        pa.table(
            {
                "model": ["a", "", None],
                "benchmark": ["GPQA"] * 3,
                "subtask": ["main"] * 3,
            }
        )
    )
    assert encoder.is_empty_model(variant).tolist() == [False, True, False]
    fresh = KeyEncoder(PAIRS)
    assert fresh.is_empty_model(np.array([-1, 0])).tolist() == [False, False]


# --- Variants: order, dictionaries, tables ----------------------------------------------


def _sort_key(key: Key) -> tuple[str, str, str, bool]:
    return (str(key[0]), str(key[1]), str(key[2]), bool(key[3]))


@given(
    keys=st.lists(
        st.tuples(
            model_names,
            st.sampled_from(["", "bfloat16", "float16"]),
            st.sampled_from(["", "b", "a"]),
            st.booleans(),
        ),
        max_size=30,
        unique=True,
    ),
)
def test_order_sorts_by_code_point(keys: list[Key]) -> None:
    """Arrow sorts the keys as Python sorts strings (code points)."""
    variants = Variants.from_table(
        pa.table(
            {
                "model": pa.array([k[0] for k in keys], pa.string()),
                "precision": pa.array([k[1] for k in keys], pa.string()),
                "revision": pa.array([k[2] for k in keys], pa.string()),
                "chat_template": pa.array([k[3] for k in keys], pa.bool_()),
            }
        )
    )
    ordered = variants.take(variants.order())
    assert _variant_rows(ordered) == sorted(keys, key=_sort_key)


def test_large_vocabularies_sort_as_python_does() -> None:
    """Many names, non-ASCII included (UTF-8 byte order)."""
    rng = np.random.default_rng(3)
    alphabet = np.array(list("aZz09-/_.é中😀\u00a0Ω"), dtype=object)
    n_models = 25_000
    lengths = rng.integers(1, 6, n_models)
    letters = rng.choice(alphabet, lengths.sum())
    starts = np.cumsum(lengths) - lengths
    names = sorted(  # a random prefix, then a number to make each name unique
        "".join(letters[start : start + size]) + str(number)
        for number, (start, size) in enumerate(zip(starts, lengths, strict=True))
    )
    shuffled_names = [names[i] for i in rng.permutation(len(names))]
    encoder = KeyEncoder(PAIRS)
    encoder.encode(
        pa.table(
            {
                "model": shuffled_names,
                "benchmark": ["GPQA"] * len(names),
                "subtask": ["main"] * len(names),
            }
        )
    )
    variants = encoder.variants()
    assert variants.take(variants.order()).strings("model").to_pylist() == names


def test_dictionary_per_variant_and_per_row() -> None:
    variants = Variants.from_table(
        pa.table(
            {
                "model": ["b", "a", "b"],
                "precision": ["x", "x", "y"],
                "revision": ["", "", ""],
                "chat_template": [False, True, False],
            }
        )
    )
    per_variant = variants.dictionary("model")
    assert per_variant.type == pa.dictionary(pa.int32(), pa.string())
    assert per_variant.dictionary.to_pylist() == ["b", "a"]
    assert per_variant.to_pylist() == ["b", "a", "b"]
    rows = np.array([2, 2, 1, 0])
    assert variants.dictionary("precision", rows).to_pylist() == ["y", "y", "x", "x"]
    assert variants.flags(rows).to_pylist() == [False, False, True, False]
    assert variants.strings("model").type == pa.string()


@given(
    keys=st.lists(
        st.tuples(
            st.sampled_from(["b", "a", "é", "c/d", ""]),
            st.sampled_from(["", "bfloat16"]),
            st.sampled_from(["", "main", "0f3e", "a1"]),
            st.booleans(),
        ),
        max_size=30,
        unique=True,
    ),
    unused=st.lists(st.sampled_from(["zz", "unused"]), max_size=3),
)
def test_take_renumbered_names_the_same_variants(
    keys: list[Key], unused: list[str]
) -> None:
    """Renumbered vocabularies: the same keys per variant, used strings only."""
    variants = Variants.from_table(_key_table(keys))
    # strings no variant uses (a registry may hold some): renumbering drops them
    vocabularies = {
        name: pa.concat_arrays([values, pa.array(unused, pa.string())])
        for name, values in variants.vocabularies.items()
    }
    variants = Variants(vocabularies=vocabularies, codes=variants.codes)
    order = variants.order()
    plain = variants.take(order)
    renumbered = variants.take(order, renumber=True)
    assert _variant_rows(renumbered) == _variant_rows(plain)
    assert renumbered.table().equals(plain.table())
    for name in ("model", "revision"):
        per_variant = renumbered.dictionary(name, distinct=False)
        assert per_variant.to_pylist() == plain.strings(name).to_pylist()
    # models come in runs in key order: renumbered by first use, unused dropped
    models = renumbered.vocabularies["model"].to_pylist()
    assert models == list(dict.fromkeys(plain.strings("model").to_pylist()))
    assert renumbered.codes[:, 0].tolist() == [
        models.index(key[0]) for key in _variant_rows(plain)
    ]
    assert variants.take(order).codes.tolist() == plain.codes.tolist()  # unchanged


def test_a_run_of_ids_takes_a_slice() -> None:
    """Names taken by one increasing run of ids share the vocabulary's buffers."""
    values = pa.array([f"model-{i}" for i in range(10)])
    run = variants_module._taken(values, np.arange(3, 8))
    assert run.to_pylist() == [f"model-{i}" for i in range(3, 8)]
    assert run.buffers()[2].address == values.buffers()[2].address  # no copy
    for ids in ([3, 5, 4], [2, 2], [9], [], [0, 1, 3]):
        taken = variants_module._taken(values, np.array(ids, dtype=np.int64))
        assert taken.to_pylist() == [f"model-{i}" for i in ids]


@given(keys=st.lists(st.tuples(model_names, st.booleans()), max_size=12, unique=True))
def test_from_table_and_table_round_trip(keys: list[tuple[str, bool]]) -> None:
    table = pa.table(
        {
            "model": pa.array([k[0] for k in keys], pa.string()),
            "precision": pa.array([""] * len(keys), pa.string()),
            "revision": pa.array(["r"] * len(keys), pa.string()),
            "chat_template": pa.array([k[1] for k in keys], pa.bool_()),
        }
    )
    variants = Variants.from_table(table)
    assert variants.table().equals(table)
    assert (
        Variants.from_table(variants.table().cast(table.schema)).table().equals(table)
    )
    dictionary = table.set_column(0, "model", table.column("model").dictionary_encode())
    assert Variants.from_table(dictionary).table().equals(table)


# --- merge_variants ------------------------------------------------------------------


@st.composite
def variant_sets(draw: st.DrawFn) -> list[Variants]:
    """Sets of variants with overlapping keys, each with vocabularies of its own."""
    pool = draw(
        st.lists(
            st.tuples(
                st.sampled_from(["a", "b", "c", "é"]),
                st.sampled_from(["", "x"]),
                st.just(""),
                st.booleans(),
            ),
            min_size=1,
            max_size=10,
            unique=True,
        )
    )
    parts = draw(
        st.lists(
            st.lists(st.sampled_from(pool), unique=True, max_size=6),
            min_size=1,
            max_size=4,
        )
    )
    return [Variants.from_table(_key_table(part)) for part in parts]


@given(parts=variant_sets())
def test_merge_variants_matches_by_key(parts: list[Variants]) -> None:
    merged, rows = merge_variants(parts)
    every = [key for part in parts for key in _variant_rows(part)]
    expected_rows, distinct = _oracle(every)
    assert _variant_rows(merged) == distinct
    assert rows.tolist() == expected_rows
    assert _variant_rows(merged.take(rows)) == every


def test_merge_variants_with_empty_parts() -> None:
    empty = KeyEncoder(PAIRS).variants()  # a worker whose share held nothing
    one = Variants.from_table(
        pa.table(
            {
                "model": ["x"],
                "precision": [""],
                "revision": [""],
                "chat_template": [True],
            }
        )
    )
    merged, rows = merge_variants([empty, one, empty])
    assert _variant_rows(merged) == [("x", "", "", True)]
    assert rows.tolist() == [0]
    nothing, none = merge_variants([empty, empty])
    assert (len(nothing), none.size) == (0, 0)


# --- factorize -----------------------------------------------------------------------


@given(values=hnp.arrays(np.int64, st.integers(0, 50), elements=st.integers(-5, 5)))
def test_factorize_is_first_appearance(values: np.ndarray[Any, Any]) -> None:
    codes, first = factorize(values)
    seen: dict[int, int] = {}
    expected = [seen.setdefault(int(v), len(seen)) for v in values]
    assert codes.tolist() == expected
    assert values[first].tolist() == list(seen)
    assert codes.dtype == first.dtype == np.int64


@given(
    ids=st.lists(st.integers(0, 12), max_size=40),
    spread=st.sampled_from([1, 7, 20, 50, 10**6]),
    is_grouped=st.booleans(),
)
def test_factorize_wide_ids_grouped_or_not(
    ids: list[int], spread: int, is_grouped: bool
) -> None:
    """Ids too wide for the dense table: runs of equal ids in one pass, else a sort."""
    values = np.array(sorted(ids) if is_grouped else ids, dtype=np.int64) * spread
    codes, first = factorize(values)
    seen: dict[int, int] = {}
    expected = [seen.setdefault(int(v), len(seen)) for v in values]
    assert codes.tolist() == expected
    assert values[first].tolist() == list(seen)
    assert codes.dtype == first.dtype == np.int64


def test_factorize_strings_and_empty() -> None:
    codes, first = factorize(np.array(["b", "a", "b", "é"], dtype=object))
    assert (codes.tolist(), first.tolist()) == ([0, 1, 0, 2], [0, 1, 3])
    codes, first = factorize(np.zeros(0, dtype=np.int64))
    assert (codes.size, first.size) == (0, 0)


def test_batch_rows_of_a_reader_encode_like_their_table() -> None:
    """A Batch as a reader hands it on: dictionary text, a row locator column."""
    table = pa.table(
        {
            "model": pa.array(["b", "a", "b"]).dictionary_encode(),
            "benchmark": pa.array(["GPQA"] * 3).dictionary_encode(),
            "subtask": pa.array(["main", "main", "diamond"]).dictionary_encode(),
            "raw_score": [0.1, 0.2, 0.3],
            "_row": ["1", "2", "3"],
        }
    )
    batch = Batch(table=table, source="s.parquet")
    variant, subtask = KeyEncoder(PAIRS).encode(batch.table)
    assert variant.tolist() == [0, 1, 0]
    assert subtask.tolist() == [SUITE_INDEX[("GPQA", "main")]] * 2 + [
        SUITE_INDEX[("GPQA", "diamond")]
    ]


# --- the hashed registries --------------------------------------------------------------


@given(texts=st.lists(st.text(max_size=12), max_size=40), data=st.data())
def test_string_hashes_follow_the_strings_not_the_layout(
    texts: list[str], data: st.DataObject
) -> None:
    """Equal strings hash alike, sliced, as large strings or in another order."""
    values = pa.array(["pad", *texts], pa.string()).slice(1)
    hashes = vocabulary.hash_strings(values).tolist()
    by_text = dict(zip(texts, hashes, strict=True))
    assert len(by_text) == len(set(texts))  # one hash per string
    order = data.draw(st.permutations(range(len(texts))))
    other = pa.array([texts[i] for i in order], pa.large_string())
    assert vocabulary.hash_strings(other).tolist() == [by_text[texts[i]] for i in order]
    assert len(set(by_text.values())) == len(by_text)  # no collision on small sets


def test_string_hashes_of_strings_across_hashing_blocks() -> None:
    """Strings longer than a block, and blocks cut between strings, hash alike."""
    long = "x" * (vocabulary._HASH_BLOCK + 5)
    texts = ["a", long, "b" * 1000, "", long, "a"] * 50
    hashes = vocabulary.hash_strings(pa.array(texts)).tolist()
    assert hashes[0] == hashes[5]
    assert hashes[1] == hashes[4]
    assert len(set(hashes)) == 4
    assert vocabulary.hash_strings(pa.array(texts[1:2])).tolist() == [hashes[1]]


def test_hash_index_agrees_with_a_dict() -> None:
    rng = np.random.default_rng(7)
    index = vocabulary.HashIndex(capacity=4)
    expected: dict[int, int] = {}
    for _ in range(30):  # batches that grow the table several times
        keys = np.unique(rng.integers(0, 2**64, 200, dtype=np.uint64, endpoint=False))
        new = np.array([key not in expected for key in keys.tolist()], dtype=bool)
        ids = np.arange(len(expected), len(expected) + int(new.sum()))
        index.insert(keys[new], ids)
        expected.update(zip(keys[new].tolist(), ids.tolist(), strict=True))
        probe = np.concatenate([keys, rng.integers(0, 2**64, 50, dtype=np.uint64)])
        found = index.find(probe).tolist()
        assert found == [expected.get(key, -1) for key in probe.tolist()]


@given(
    batches=st.lists(
        st.lists(st.integers(0, 40).map(lambda key: key * 2**58), max_size=30),
        max_size=6,
    )
)
def test_hash_index_adds_a_key_given_twice_once_and_says_so(
    batches: list[list[int]],
) -> None:
    """Keys on few slots (a multiple of 2**58), some given twice in one insert."""
    index = vocabulary.HashIndex(capacity=4)
    expected: dict[int, list[int]] = {}  # key -> the ids given with it
    next_id = 0
    for batch in batches:
        keys = [key for key in batch if key not in expected]
        ids = np.arange(next_id, next_id + len(keys))
        next_id += len(keys)
        is_distinct = index.insert(np.array(keys, dtype=np.uint64), ids)
        assert is_distinct == (len(set(keys)) == len(keys))
        for key, id_ in zip(keys, ids.tolist(), strict=True):
            expected.setdefault(key, []).append(id_)
        assert index.size == len(expected)
        probe = np.array([*expected, 2**57], dtype=np.uint64)
        found = index.find(probe).tolist()
        assert found[-1] == -1
        assert all(
            id_ in expected[key] for key, id_ in zip(expected, found[:-1], strict=True)
        )


def test_a_lookup_with_a_value_twice_gives_it_one_id_in_first_seen_order() -> None:
    """New values repeated in one lookup (valid in a dictionary), beside known ones."""
    names = vocabulary.Vocabulary()
    assert names.lookup(pa.array(["a", "b"])).tolist() == [0, 1]
    repeated = pa.array(["c", "b", "d", "c", "a", "d"])
    assert names.lookup(repeated).tolist() == [2, 1, 3, 2, 0, 3]
    assert names.values().to_pylist() == ["a", "b", "c", "d"]
    assert names.lookup(pa.array(["d", "e", "a"])).tolist() == [3, 4, 0]
    assert names._index is not None  # no collision: the hashed table goes on


@given(table=score_tables(OPENLLM_V2, max_variants=8), data=st.data())
def test_hash_collisions_never_merge_names(
    table: pa.Table, data: st.DataObject
) -> None:
    """With a hash that collides all the time, codes are still exact (the dict takes over)."""
    table = data.draw(shuffled(table))
    encoder = KeyEncoder(PAIRS)
    variant: list[int] = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(
            vocabulary,
            "hash_strings",
            lambda values: np.full(len(values), 7, np.uint64),
        )
        for part in data.draw(batches(table)):
            variant += encoder.encode(part.table)[0].tolist()
    expected, keys = _oracle(_keys(_plain(table)))
    assert variant == expected
    assert _variant_rows(encoder.variants()) == keys


def test_a_collision_in_a_later_batch_keeps_earlier_codes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    encoder = KeyEncoder(PAIRS)

    def table(models: list[str]) -> pa.Table:
        n = len(models)
        return pa.table(
            {"model": models, "benchmark": ["GPQA"] * n, "subtask": ["main"] * n}
        )

    assert encoder.encode(table(["a", "b", ""]))[0].tolist() == [0, 1, 2]
    real = vocabulary.hash_strings
    monkeypatch.setattr(  # "c" now hashes as "a" does
        vocabulary,
        "hash_strings",
        lambda values: real(pc.replace_substring(values, "c", "a")),
    )
    variant, _ = encoder.encode(table(["c", "a", "b", "d"]))
    assert variant.tolist() == [3, 0, 1, 4]
    assert encoder.variants().strings("model").to_pylist() == ["a", "b", "", "c", "d"]
    assert encoder.is_empty_model(np.array([2, 3])).tolist() == [True, False]
    assert encoder._vocabularies["model"]._index is None  # the dict took over


def test_variant_keys_pack_exactly_as_ids_grow() -> None:
    """Ids outgrowing their packed bits re-key the table; codes stay first-appearance."""
    encoder = KeyEncoder(PAIRS)
    seen: dict[tuple[str, str, str], int] = {}
    rng = np.random.default_rng(3)
    for size in (3, 10, 40, 200, 700):
        rows = [
            (f"m{rng.integers(size)}", f"p{rng.integers(5)}", f"r{rng.integers(size)}")
            for _ in range(size)
        ]
        models, precisions, revisions = (
            list(column) for column in zip(*rows, strict=True)
        )
        part = pa.table(
            {
                "model": models,
                "precision": precisions,
                "revision": revisions,
                "benchmark": ["GPQA"] * size,
                "subtask": ["main"] * size,
            }
        )
        codes = encoder.encode(part)[0].tolist()
        assert codes == [seen.setdefault(row, len(seen)) for row in rows]


def test_slices_of_a_row_group_look_its_dictionaries_up_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """--batch-rows cuts a row group into slices that share its dictionaries."""
    names = [f"org/model-{at % 7}" for at in range(40)]
    table = pa.table(
        {
            "model": pa.array(names).dictionary_encode(),
            "revision": pa.array(
                [f"r{at % 3}" for at in range(40)]
            ).dictionary_encode(),
            "benchmark": pa.array([PAIRS[at % 5][0] for at in range(40)]),
            "subtask": pa.array([PAIRS[at % 5][1] for at in range(40)]),
        }
    )
    whole = KeyEncoder(PAIRS).encode(table)
    looked_up: list[int] = []
    lookup = vocabulary.Vocabulary.lookup

    def counted(self: vocabulary.Vocabulary, values: pa.Array) -> Any:
        looked_up.append(len(values))
        return lookup(self, values)

    monkeypatch.setattr(vocabulary.Vocabulary, "lookup", counted)
    encoder = KeyEncoder(PAIRS)
    parts = [encoder.encode(table.slice(start, 8)) for start in range(0, 40, 8)]
    for at in range(2):
        assert (
            np.concatenate([part[at] for part in parts]).tolist() == whole[at].tolist()
        )
    # model and revision: their dictionaries once; the rest (plain strings, and
    # precision left out) once a slice
    assert looked_up.count(7) == 1
    assert looked_up.count(3) == 1
    # a new dictionary with the same values is recognised by its content
    fresh = table.set_column(0, "model", pa.array(names).dictionary_encode())
    again = encoder.encode(fresh)
    assert looked_up.count(7) == 1
    assert again[0].tolist() == whole[0].tolist()
    # one with other values is looked up
    other = table.set_column(0, "model", pa.array(names[::-1]).dictionary_encode())
    encoder.encode(other)
    assert looked_up.count(7) == 2


def test_a_dictionary_larger_than_its_batch_costs_its_used_entries(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A categorical's row groups each carry every category: only used ones are looked up."""
    categories = pa.array([f"org/model-{at}" for at in range(1_000)])
    looked_up: list[int] = []
    lookup = vocabulary.Vocabulary.lookup

    def counted(self: vocabulary.Vocabulary, values: pa.Array) -> Any:
        if len(values) > 1:
            looked_up.append(len(values))
        return lookup(self, values)

    monkeypatch.setattr(vocabulary.Vocabulary, "lookup", counted)
    encoder = KeyEncoder(PAIRS)
    seen: dict[int, int] = {}
    for start in range(0, 30, 3):  # 3 models a batch, each with 2 rows
        used = np.repeat(np.arange(start, start + 3) * 7 % 1_000, 2)
        table = pa.table(
            {
                "model": pa.DictionaryArray.from_arrays(
                    pa.array(used, pa.int32()), categories
                ),
                "benchmark": ["GPQA"] * 6,
                "subtask": ["main"] * 6,
            }
        )
        variant = encoder.encode(table)[0].tolist()
        assert variant == [seen.setdefault(int(at), len(seen)) for at in used]
    assert looked_up == [3] * 10  # the 30 models used, never the 1,000
    strings = encoder.variants().strings("model").to_pylist()
    assert strings == [f"org/model-{at}" for at in seen]


@given(
    names=st.lists(
        st.sampled_from(["a", "b", "c", "", "d\u00e9", None]), min_size=1, max_size=12
    ),
    picks=st.lists(st.lists(st.integers(-1, 11), max_size=8), min_size=1, max_size=5),
)
def test_one_dictionary_in_every_batch_codes_as_plain_strings(
    names: list[str | None], picks: list[list[int]]
) -> None:
    """A dictionary larger or smaller than its batch, values repeated in it or null
    (valid Arrow), null indices: the codes and variants of the same rows as plain
    strings."""
    dictionary = pa.array(names, pa.string())
    encoder, plain = KeyEncoder(PAIRS), KeyEncoder(PAIRS)
    for rows in picks:
        indices = pa.array(
            [at % len(names) if at >= 0 else None for at in rows], pa.int32()
        )
        n = len(rows)
        table = pa.table(
            {
                "model": pa.DictionaryArray.from_arrays(indices, dictionary),
                "revision": pa.DictionaryArray.from_arrays(indices, dictionary),
                "benchmark": pa.DictionaryArray.from_arrays(
                    pa.array([1] * n, pa.int32()), pa.array(["NOPE", "GPQA"])
                ),
                "subtask": ["main"] * n,
            }
        )
        as_plain = table.set_column(0, "model", table.column("model").cast(pa.string()))
        as_plain = as_plain.set_column(
            1, "revision", table.column("revision").cast(pa.string())
        )
        got, expected = encoder.encode(table), plain.encode(as_plain)
        assert got[0].tolist() == expected[0].tolist()
        assert got[1].tolist() == expected[1].tolist()
    assert _variant_rows(encoder.variants()) == _variant_rows(plain.variants())


def test_subtask_codes_of_a_dictionary_with_unused_pairs() -> None:
    """Benchmark and subtask dictionaries larger than the batch, an unused "NOPE" in them."""
    encoder = KeyEncoder(PAIRS)
    benchmarks = pa.array(["NOPE", *sorted({b for b, _ in PAIRS})])
    subtasks = pa.array(["x", *sorted({s for _, s in PAIRS})])
    pair = PAIRS[3]
    table = pa.table(
        {
            "model": ["m"],
            "benchmark": pa.DictionaryArray.from_arrays(
                pa.array([benchmarks.to_pylist().index(pair[0])], pa.int32()),
                benchmarks,
            ),
            "subtask": pa.DictionaryArray.from_arrays(
                pa.array([subtasks.to_pylist().index(pair[1])], pa.int32()), subtasks
            ),
        }
    )
    assert encoder.encode(table)[1].tolist() == [3]


def test_a_registry_sized_up_front_is_bounded() -> None:
    """The room made from a run's rows is capped: a huge guess costs 64 MB at most."""
    index = vocabulary.HashIndex(10**9)
    assert index._slots_ids.size == vocabulary._MOST_SLOTS
    assert index._keys.size == vocabulary._MOST_SLOTS // 2
    small = vocabulary.HashIndex(4_576)
    assert small._slots_ids.size == 16_384  # at most half full at 4,576 keys
    keys = np.arange(1, 10_001, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    assert small.insert(keys, np.arange(10_000))  # past the guess: it grows
    assert small.find(keys).tolist() == list(range(10_000))
