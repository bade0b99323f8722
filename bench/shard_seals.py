"""What a seal costs as the data grows: build time, size and restore time at 10^4..10^7 shards.

Run:  python bench/shard_seals.py [--shards 10000 100000 1000000 10000000] [--workers 64]

A seal is taken under the shard service's lock right before every checkpoint, and written to
`model_dir/shards/` next to it. Each size registers a shuffled 2-epoch data set of N shards, puts
`--workers` workers in flight (half have reported part of their shard, one has failed and given its
shard back), then times, through the real ShardService with a SealStore on disk:
`seal` (snapshot + pending file written, the time other workers' reports wait),
`commit` (the seal file written) and restoring a fresh service from that file.

Beside it, up to `--listing-max` shards, the same book in the layout seals had before version 2 (every
TODO and DONE shard listed), built and serialized as that layout was: the ratio is what the compact
layout saves. Output: bench/results/shard_seals.{json,md}.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import tempfile
import time

from elastimator.elastic.seal_store import SealStore
from elastimator.elastic.service import ShardService
from elastimator.elastic.shards import ShardingSpec, Shard
from report import RESULTS, write_results

TOKEN = "seal-bench-token"
RECORDS_PER_SHARD = 100


def _in_flight(service: ShardService, shards: int, workers: int) -> None:
    spec = ShardingSpec(name="train", size=shards * RECORDS_PER_SHARD, shard_size=RECORDS_PER_SHARD, epochs=2,
                       shuffle=True, seed=1)
    service.handle("add_dataset", {"dataset": dataclasses.asdict(spec), "worker": "chief"})
    for index in range(workers):
        worker = f"worker-{index}"
        decision = service.handle("request", {"dataset": "train", "worker": worker})
        if index % 2:
            service.handle("report", {"dataset": "train", "worker": worker, "shard_id": decision["shard_id"],
                                      "consumed": RECORDS_PER_SHARD // 2, "lease": decision["lease"],
                                      "offset": decision["start"]})
    service.handle("fail_worker", {"worker": "chief", "failed_worker": "worker-1"})


def _listing_layout(service: ShardService) -> dict:
    """The book as seals before version 2 listed it: every TODO shard of the epoch and every DONE one."""
    dataset = service.book._datasets["train"]  # pylint: disable=protected-access
    todo = [*dataset.returned, *(dataset.base_shard(p) for p in range(dataset.cursor, dataset.spec.shards_per_epoch))]
    done = [Shard(i, 0, 0, RECORDS_PER_SHARD, consumed=RECORDS_PER_SHARD) for i in range(dataset.done_shards)]
    return {"datasets": {"train": {
        "spec": dataclasses.asdict(dataset.spec), "epoch": dataset.epoch, "next_id": dataset.next_id,
        "todo": [dataclasses.asdict(s) for s in todo], "doing": [dataclasses.asdict(s) for s in dataset.doing.values()],
        "done": [dataclasses.asdict(s) for s in done]}}, "next_lease": 0, "next_seal": 0}


def measure(shards: int, workers: int, listing_max: int) -> dict:
    with tempfile.TemporaryDirectory() as model_dir:
        service = ShardService(TOKEN, seal_store=SealStore(model_dir))
        started = time.perf_counter()
        _in_flight(service, shards, workers)
        setup = time.perf_counter() - started
        started = time.perf_counter()
        seal_id = service.handle("seal", {"worker": "chief", "checkpoint_step": 100})["seal_id"]
        seal = time.perf_counter() - started
        started = time.perf_counter()
        service.handle("commit", {"worker": "chief", "seal_id": seal_id, "checkpoint_step": 100})
        commit = time.perf_counter() - started
        size = os.path.getsize(SealStore(model_dir).path(100))
        started = time.perf_counter()
        ShardService(TOKEN, seal_store=SealStore(model_dir)).resume(100)
        restore = time.perf_counter() - started
        row = {"shards": shards, "workers_in_flight": workers, "setup_s": setup, "seal_ms": seal * 1000,
               "commit_ms": commit * 1000, "restore_ms": restore * 1000, "seal_bytes": size}
        if shards <= listing_max:
            started = time.perf_counter()
            listed = json.dumps(_listing_layout(service))
            row["listing_ms"] = (time.perf_counter() - started) * 1000
            row["listing_bytes"] = len(listed)
        return row


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, nargs="+", default=[10_000, 100_000, 1_000_000, 10_000_000])
    parser.add_argument("--workers", type=int, default=64)
    parser.add_argument("--listing-max", type=int, default=100_000,
                        help="largest size at which the pre-version-2 layout is built for comparison")
    parser.add_argument("--out", default=RESULTS)
    args = parser.parse_args(argv)
    rows = [measure(n, args.workers, args.listing_max) for n in args.shards]
    result = {"benchmark": "shard_seals", "rows": rows, "target": "seal < 50 ms and < 1 MB at 1M shards",
              "machine": f"{os.cpu_count()} CPUs, {platform.platform()}"}
    lines = [
        "# Seals as the data grows\n",
        f"A shuffled 2-epoch data set, {args.workers} workers in flight (half part-way through their shard, one "
        "failed). `seal`: the snapshot taken under the service lock plus its pending file; `commit`: the seal file "
        "written; `restore`: a new service resumed from that file; `register`: add_dataset and the first hand-outs. `listing`: the same book in the layout seals "
        f"had before version 2, every shard listed (built up to {args.listing_max:,} shards). "
        f"Machine: {result['machine']}.\n",
        "| shards | register + 64 hand-outs ms | seal ms | commit ms | restore ms | seal size | listing ms "
        "| listing size | size ratio |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        listing = (f"{row['listing_ms']:.0f} | {row['listing_bytes'] / 1e6:.1f} MB | "
                   f"{row['listing_bytes'] / row['seal_bytes']:,.0f}x") if "listing_ms" in row else "- | - | -"
        lines.append(f"| {row['shards']:,} | {row['setup_s'] * 1000:.1f} | {row['seal_ms']:.2f} | {row['commit_ms']:.2f} | {row['restore_ms']:.2f} "
                     f"| {row['seal_bytes'] / 1e3:.1f} kB | {listing} |")
    write_results(args.out, "shard_seals", result, "\n".join(lines) + "\n")
    return result


if __name__ == "__main__":
    main()
