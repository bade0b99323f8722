"""How long a seal holds the shard book, with a large book: many shards done, one in flight per worker.

Run:  python bench/seal_hold.py [--done 100000] [--workers 5000] [--seals 10] [--against REV]

(`bench/shard_seals.py` measures what a seal costs as the data set grows; this one, what it holds up while it is
taken, as the job grows: a seal lists every shard in flight.)

A chief seals and commits the book of a real `ShardService` with a seal store on disk (in process, no
network: the figure is the book's), while another thread reports as a worker does, one report after another.
The book first has `--done` shards trained and `--workers` shards in flight, one per worker, each partly
reported. Reported per code version (this checkout, and `--against REV` from a worktree, each in a process of
its own, interleaved): how long each seal and each commit held the book's lock (p50, max), how long each call
took as the chief saw it, and the longest a report waited for its answer meanwhile.
Output: results/seal_hold.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time

from report import RESULTS, worktree, write_results


class _TimedLock:
    """The service's lock, timing how long each holder keeps it (installed by this benchmark only)."""

    def __init__(self):
        self._lock = threading.Lock()
        self.held: list[float] = []
        self._since = 0.0

    def __enter__(self):
        self._lock.acquire()
        self._since = time.perf_counter()

    def __exit__(self, *exc):
        self.held.append(time.perf_counter() - self._since)
        self._lock.release()


def _ms(values: list[float]) -> dict:
    values = sorted(values)
    return {"p50": round(values[len(values) // 2] * 1000, 2), "max": round(values[-1] * 1000, 2)}


def measure(done: int, workers: int, seals: int) -> dict:
    """One code version's figures (run in a process whose PYTHONPATH picks the version)."""
    from elastimator.elastic.seal_store import SealStore  # pylint: disable=import-outside-toplevel
    from elastimator.elastic.service import ShardService  # pylint: disable=import-outside-toplevel

    service = ShardService("bench-token", SealStore(tempfile.mkdtemp(prefix="seal-hold-")))
    call = service.handle
    call("add_dataset", {"dataset": {"name": "d", "size": (done + workers + 1) * 4, "shard_size": 4}})
    for i in range(done):
        shard = call("request", {"dataset": "d", "worker": "filler", "request_id": str(i)})
        call("report", {"dataset": "d", "worker": "filler", "shard_id": shard["shard_id"], "consumed": 4,
                        "lease": shard["lease"], "offset": shard["start"]})
    for w in range(workers):
        shard = call("request", {"dataset": "d", "worker": f"w{w}", "request_id": "0"})
        call("report", {"dataset": "d", "worker": f"w{w}", "shard_id": shard["shard_id"], "consumed": 1,
                        "lease": shard["lease"], "offset": shard["start"]})
    reporter = call("request", {"dataset": "d", "worker": "reporter", "request_id": "0"})
    waits: list[float] = []
    stop = threading.Event()

    def report_on():  # a worker reporting one batch after another, the same batch again while a seal holds it
        offset = reporter["start"]
        while not stop.is_set() and offset < reporter["end"]:
            begun = time.perf_counter()
            reply = call("report", {"dataset": "d", "worker": "reporter", "shard_id": reporter["shard_id"],
                                    "consumed": 1, "lease": reporter["lease"], "offset": offset})
            waits.append(time.perf_counter() - begun)
            if not reply.get("sealing"):
                offset += 1
            time.sleep(0.0005)

    lock = service._lock = _TimedLock()  # pylint: disable=protected-access
    thread = threading.Thread(target=report_on)
    thread.start()
    held = {"seal": [], "commit": []}
    calls = {"seal": [], "commit": []}
    for step in range(1, seals + 1):
        for method in ("seal", "commit"):
            lock.held.clear()
            begun = time.perf_counter()
            if method == "seal":
                seal_id = call("seal", {"checkpoint_step": step, "worker": "chief"})["seal_id"]
            else:
                call("commit", {"checkpoint_step": step, "seal_id": seal_id, "worker": "chief"})
            calls[method].append(time.perf_counter() - begun)
            held[method].append(max(lock.held))
        time.sleep(0.05)
    stop.set()
    thread.join()
    status = call("status", {"dataset": "d"})
    return {"done_shards": status["done_shards"], "doing_shards": status["doing_shards"],
            "lock_held_ms": {m: _ms(v) for m, v in held.items()}, "call_ms": {m: _ms(v) for m, v in calls.items()},
            "report_wait_ms": _ms(waits), "reports": len(waits)}


def run(done: int, workers: int, seals: int, src: str | None) -> dict:
    env = dict(os.environ)
    if src:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [src, env.get("PYTHONPATH")]))
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--measure", str(done), str(workers), str(seals)],
                         env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def _row(r: dict) -> str:
    held, calls = r["lock_held_ms"], r["call_ms"]
    return (f"| {r['code']} | {r['done_shards']:,} / {r['doing_shards']:,} "
            f"| {held['seal']['p50']} / {held['seal']['max']} | {held['commit']['p50']} / {held['commit']['max']} "
            f"| {calls['seal']['p50']} / {calls['commit']['p50']} "
            f"| {r['report_wait_ms']['p50']} / {r['report_wait_ms']['max']} |\n")


def main(argv=None) -> dict:
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == "--measure":
        print(json.dumps(measure(*map(int, sys.argv[2:5]))))
        return {}
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--done", type=int, default=100_000, help="shards trained before the seals")
    parser.add_argument("--workers", type=int, default=5000, help="shards in flight, one per worker")
    parser.add_argument("--seals", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=2, help="runs of each code, interleaved")
    parser.add_argument("--against", metavar="REV", help="also measure the code of this git revision (a worktree)")
    parser.add_argument("--out", default=RESULTS)
    args = parser.parse_args(argv)
    runs = []
    with worktree(args.against) as src:
        for _ in range(args.rounds):
            for code, version in ([(f"@{args.against}", src)] if src else []) + [("this checkout", None)]:
                runs.append({"code": code, **run(args.done, args.workers, args.seals, version)})
    result = {"benchmark": "seal_hold", "runs": runs, "machine": f"{os.cpu_count()} CPUs, {platform.platform()}"}
    markdown = (
        "# How long a seal holds the shard book\n\n"
        f"`bench/seal_hold.py`: a `ShardService` with its seal store on disk; {args.seals} seals and commits by the "
        "chief while another thread reports as a worker does. Milliseconds. Machine: "
        f"{result['machine']}.\n\n"
        "| code | shards done / in flight | seal holds the book p50 / max | commit holds it p50 / max "
        "| seal / commit call p50 | a report's wait p50 / max |\n"
        "|---|---|---|---|---|---|\n" + "".join(map(_row, runs)))
    write_results(args.out, "seal_hold", result, markdown)
    return result


if __name__ == "__main__":
    main()
