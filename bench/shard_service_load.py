"""Load on the shard service: concurrent clients request and report shards on loopback.

Run:  python bench/shard_service_load.py [--clients 64] [--shards 10000]

Every client asks for a shard, reports it trained, and asks again until the
data set is finished; the run checks that every shard was trained exactly once.
Reports requests/s and latency percentiles to bench/results/shard_service_load.{json,md}.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import platform
import statistics
import time

from elastimator.elastic.client import ShardClient
from elastimator.elastic.service import ShardServer, ShardService
from elastimator.elastic.shards import ShardingSpec, Finished, Wait
from report import RESULTS, write_results

TOKEN = "load-test-token"


def run_load(address: str, token: str, clients: int, shards: int, timeout_secs: float = 300) -> list[float]:
    """`clients` threads request and report until every shard is done; returns per-call latencies (s).

    Raises:
        AssertionError: when a shard was lost or trained twice.
    """
    setup = ShardClient(address, token, worker="setup")
    setup.add_dataset(ShardingSpec(name="load", size=shards, shard_size=1))
    deadline = time.monotonic() + timeout_secs

    def work(index: int) -> list[float]:
        client = ShardClient(address, token, worker=f"w{index}")
        latencies = []
        while time.monotonic() < deadline:
            started = time.perf_counter()
            decision = client.request("load")
            latencies.append(time.perf_counter() - started)
            if isinstance(decision, Finished):
                return latencies
            if isinstance(decision, Wait):
                time.sleep(0.001)
                continue
            started = time.perf_counter()
            client.report("load", decision.shard_id, decision.end - decision.start, offset=decision.start,
                          lease=decision.lease)  # as a trainer reports: with its lease, so it can go packed
            latencies.append(time.perf_counter() - started)
        raise TimeoutError(f"client {index} did not finish within {timeout_secs}s")

    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        results = list(pool.map(work, range(clients)))
    status = setup.status("load")
    assert status["finished"] and status["trained_records"] == shards and status["done_shards"] == shards, status
    return [latency for result in results for latency in result]


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--shards", type=int, default=10_000)
    parser.add_argument("--out", default=RESULTS)
    args = parser.parse_args(argv)
    server = ShardServer(ShardService(TOKEN), max_workers=args.clients).start()
    try:
        started = time.perf_counter()
        latencies = run_load(server.address, TOKEN, args.clients, args.shards)
        elapsed = time.perf_counter() - started
    finally:
        server.stop()
    latencies.sort()
    pick = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000  # noqa: E731
    result = {
        "benchmark": "shard_service_load", "clients": args.clients, "shards": args.shards,
        "requests": len(latencies), "seconds": elapsed, "requests_per_sec": len(latencies) / elapsed,
        "latency_ms": {"p50": pick(0.50), "p99": pick(0.99), "max": latencies[-1] * 1000,
                       "mean": statistics.fmean(latencies) * 1000},
        "lost_or_duplicated_shards": 0,
        "machine": f"{os.cpu_count()} CPUs, {platform.platform()}",
    }
    markdown = (
        f"# Shard service under load\n\n{args.clients} concurrent clients on loopback, {args.shards} shards "
        f"requested and reported once each ({result['requests']} calls). Machine: {result['machine']}.\n\n"
        f"| requests/s | p50 ms | p99 ms | max ms | lost or duplicated |\n|---|---|---|---|---|\n"
        f"| {result['requests_per_sec']:,.0f} | {result['latency_ms']['p50']:.2f} | "
        f"{result['latency_ms']['p99']:.2f} | {result['latency_ms']['max']:.1f} | 0 |\n"
    )
    write_results(args.out, "shard_service_load", result, markdown)
    return result


if __name__ == "__main__":
    main()
