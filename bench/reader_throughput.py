"""FileReader records/s against tf.data.experimental.CsvDataset on the same Criteo-shaped file.

Run:  python bench/reader_throughput.py [--rows 500000] [--batch-size 512] [--runs 3]

Both pipelines read the same tab-separated file (label, 13 integer, 26
categorical fields, some empty), parse every field into typed batches, and are
drained the same way; runs alternate and the median is reported. FileReader
also checks every record (field count, number syntax) and tracks file and line
for bad-record reports; CsvDataset fails the whole input on the first bad one.
Results go to bench/results/reader_throughput.{json,md}.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples", "criteo"))

import tensorflow as tf  # noqa: E402

import generate_data  # noqa: E402
from elastimator.data import DataSetInput, DataSetSpec, FileReader  # noqa: E402
from report import RESULTS, rate_rows, write_results  # noqa: E402



def _drain(dataset) -> tuple[int, float]:
    start, rows = time.perf_counter(), 0
    for batch in dataset:
        labels = batch[1] if isinstance(batch, tuple) and not isinstance(batch[0], tf.Tensor) else batch[0]
        rows += int(labels.shape[0])
    return rows, time.perf_counter() - start


def file_reader_run(path: str, batch_size: int) -> float:
    spec = DataSetSpec(reader=FileReader(path), columns=generate_data.columns(), batch_size=batch_size,
                       name="bench")
    rows, secs = _drain(DataSetInput(spec)())
    return rows / secs


def csv_dataset_run(path: str, batch_size: int) -> float:
    defaults = [tf.constant(0, tf.int64)] * (1 + generate_data.NUM_INT) + [tf.constant("")] * generate_data.NUM_CAT
    dataset = tf.data.experimental.CsvDataset(path, defaults, field_delim="\t", buffer_size=1 << 20)
    dataset = dataset.batch(batch_size).prefetch(tf.data.AUTOTUNE)
    rows, secs = _drain(dataset)
    return rows / secs


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=500_000)
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", default=RESULTS)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "criteo.tsv")
        generate_data.generate(path, args.rows)
        rates = {"file_reader": [], "csv_dataset": []}
        file_reader_run(path, args.batch_size)  # warm-up: imports, graph tracing, page cache
        csv_dataset_run(path, args.batch_size)
        for _ in range(args.runs):
            rates["file_reader"].append(file_reader_run(path, args.batch_size))
            rates["csv_dataset"].append(csv_dataset_run(path, args.batch_size))
    median = {k: statistics.median(v) for k, v in rates.items()}
    result = {
        "benchmark": "reader_throughput",
        "data": f"Criteo-shaped TSV, {args.rows} rows: label + 13 int + 26 categorical, ~10% / 5% empty fields",
        "batch_size": args.batch_size,
        "runs": args.runs,
        "records_per_sec": rates,
        "median_records_per_sec": median,
        "ratio_file_reader_over_csv_dataset": median["file_reader"] / median["csv_dataset"],
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "tensorflow": tf.__version__},
    }
    markdown = (
        f"# FileReader vs CsvDataset\n\n{result['data']}, batch {args.batch_size}, {args.runs} interleaved "
        f"runs after one warm-up each.\nMachine: {os.cpu_count()} CPUs, {platform.platform()}, "
        f"TF {tf.__version__}.\n\n| pipeline | median records/s | runs |\n|---|---|---|\n"
        + rate_rows(rates, median)
        + f"\n**Ratio FileReader / CsvDataset: {result['ratio_file_reader_over_csv_dataset']:.3f}**\n"
    )
    write_results(args.out, "reader_throughput", result, markdown)
    return result


if __name__ == "__main__":
    main()
