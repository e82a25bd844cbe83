"""Arrow's hash kernels against lbnorm's own registries, on the 200M shape's sizes.

``python benchmarks_perf/arrow_hash.py [--names 500000] [--files 10]``

Issue 43 asked whether ``pyarrow.compute`` could replace the hand-written string
hash of :mod:`lbnorm.engines.vocabulary` and the integer factorizations of
:mod:`lbnorm.engines.variants`. Arrow keeps no hash table between calls, so a
growing vocabulary is looked up with ``pc.index_in`` against all of it each time
(or the other way round: the vocabulary probed against the batch's values); the
integer codes compare ``pc.dictionary_encode`` with :func:`factorize` on the key
shapes the encoder meets (dense, in runs, spread). CPU seconds (process time),
best of three; every pair is checked to give the same ids.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lbnorm.engines.variants import factorize
from lbnorm.engines.vocabulary import Vocabulary


def _cpu(call: Callable[[], Any], repeats: int = 3) -> tuple[float, Any]:
    best, result = float("inf"), None
    for _ in range(repeats):
        start = time.process_time()
        result = call()
        best = min(best, time.process_time() - start)
    return best, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--names", type=int, default=500_000, help="new names a file")
    parser.add_argument("--files", type=int, default=10)
    args = parser.parse_args()
    files = [
        pa.array([f"org-{i % 9973}/model-{f}-{i}-instruct" for i in range(args.names)])
        for f in range(args.files)
    ]
    vocabulary = Vocabulary(expected=args.names * args.files)
    start = time.process_time()
    for names in files[:-1]:
        vocabulary.lookup(names)
    print(f"Vocabulary.lookup, {args.files - 1} files of new names: "
          f"{time.process_time() - start:.2f} s")  # fmt: skip
    known = vocabulary.values()
    last = files[-1]
    theirs, found = _cpu(lambda: pc.index_in(last, value_set=known))
    back, _ = _cpu(lambda: pc.index_in(known, value_set=last))
    ours, ids = _cpu(lambda: vocabulary.lookup(last), 1)  # (it adds them: once)
    assert found.null_count == len(last)
    assert ids[0] == len(known)
    print(f"the last file against {len(known):,} names: Vocabulary.lookup {ours:.2f} s, "
          f"pc.index_in {theirs:.2f} s, the vocabulary probed against the file "
          f"{back:.2f} s")  # fmt: skip
    rng = np.random.default_rng(0)
    n = args.names * args.files
    shapes = {
        "dense, in order": np.arange(n),
        "dense, shuffled": rng.permutation(n),
        "spread 10x, in runs": np.sort(rng.choice(10 * n, n, replace=False)),
        "spread 2**40, shuffled": rng.choice(2**40, n),
    }
    for name, values in shapes.items():
        ours, (codes, first) = _cpu(partial(factorize, values))
        theirs, (arrow_codes, arrow_first) = _cpu(partial(_arrow_factorize, values))
        assert np.array_equal(codes, arrow_codes)
        assert np.array_equal(first, arrow_first)
        print(f"factorize {n:,} ints, {name}: {ours:.2f} s; "
              f"pc.dictionary_encode {theirs:.2f} s")  # fmt: skip


def _arrow_factorize(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Codes in order of first appearance by Arrow's hash table alone, and each code's first row."""
    codes = pc.dictionary_encode(pa.array(values)).indices.to_numpy().astype(np.int64)
    is_first = np.empty(codes.size, dtype=bool)
    is_first[0] = True
    is_first[1:] = codes[1:] > np.maximum.accumulate(codes)[:-1]
    return codes, np.flatnonzero(is_first)


if __name__ == "__main__":
    main()
