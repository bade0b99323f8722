"""A Criteo-shaped synthetic data set: label, 13 integer and 26 hashed categorical columns, tab-separated.

Like the Criteo display-advertising logs, integer fields are skewed counts and
sometimes empty, categorical fields are 8-hex-digit hashes (sometimes empty),
and the click label depends on a few of them, so a model can learn something.

Run:  python examples/criteo/generate_data.py OUT.tsv --rows 1000000 [--seed 0]
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

NUM_INT, NUM_CAT = 13, 26
HEADER = ["label"] + [f"I{i}" for i in range(1, NUM_INT + 1)] + [f"C{i}" for i in range(1, NUM_CAT + 1)]


def columns():
    """The elastimator columns of this data (empty fields default to 0 / "")."""
    from elastimator.data import Column

    return ([Column.create("label", "int", is_label=True)]
            + [Column.create(f"I{i}", "int", default=0) for i in range(1, NUM_INT + 1)]
            + [Column.create(f"C{i}", "string", default="") for i in range(1, NUM_CAT + 1)])


def generate(path: str, rows: int, seed: int = 0, chunk: int = 100_000) -> None:
    rng = np.random.default_rng(seed)
    vocab = rng.integers(0, 2**32, size=(NUM_CAT, 1000), dtype=np.uint64)
    with open(path, "w") as out:
        for start in range(0, rows, chunk):
            n = min(chunk, rows - start)
            ints = rng.zipf(1.8, size=(n, NUM_INT)).clip(max=10_000) - 1
            missing_int = rng.random((n, NUM_INT)) < 0.1
            cat_ids = (rng.zipf(1.3, size=(n, NUM_CAT)) - 1) % 1000
            missing_cat = rng.random((n, NUM_CAT)) < 0.05
            score = 0.4 * np.log1p(ints[:, 0]) - 0.3 * np.log1p(ints[:, 1]) + (cat_ids[:, 0] % 3 == 0) - 1.0
            labels = (rng.random(n) < 1 / (1 + np.exp(-score))).astype(int)
            for r in range(n):
                int_fields = ["" if missing_int[r, j] else str(ints[r, j]) for j in range(NUM_INT)]
                cat_fields = ["" if missing_cat[r, j] else f"{int(vocab[j, cat_ids[r, j]]):08x}"[:8]
                              for j in range(NUM_CAT)]
                out.write("\t".join([str(labels[r])] + int_fields + cat_fields) + "\n")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    generate(args.out, args.rows, args.seed)
    print(f"wrote {args.rows} rows to {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
