"""The shard service at the size of a large job: N simulated workers stepping at a given rate, a chief sealing.

Run:  python bench/shard_service_scale.py [--workers 1000] [--step-rate 10] [--seal-every 5] [--kill-share 0.25]
                                          [--load c|python|client ...] [--tcp] [--against REV]

The service is the real standalone one (`serve`, as `elastimator shard-service` runs it: gRPC, the report line,
the book, seals on disk), pinned to one core, counting which path its calls took (`run_service`: the reports its
native loop read, of the packed ones, and the calls it handled by method). The workers are lean: a few load
processes on the other core, each an event loop over raw report-line connections that speak the line's frames
(the hello, a packed report per step, a JSON shard request when a shard ends: the bytes a `ShardClient` sends),
over the line's Unix socket as a `ShardClient` on the service's machine takes it (`--tcp`: TCP, as from another
machine), so the service's cost is its own and the clients' do not share its core. `--load client` runs real
`ShardClient`s instead, a thread each (a gRPC channel and a report line per worker), to compare. The load
processes are C (`report_load.c`, built with the machine's `cc`; the Python ones where there is none, or with
`--load python`): at 5,000 workers the Python ones saturated their own core, so what the benchmark measured
was partly the load. A worker reports a `--batch`-record batch every 1/`--step-rate` s and asks for a shard of
`--shard-steps` batches when its shard ends; a report refused because a seal is pending is sent again 10 ms
later, as `ShardClient` does. The chief (this process) seals and commits over gRPC every `--seal-every` s. Half
way, one load process (`--kill-share` of the workers) is killed: its shards go back when the service has not
heard from its workers for `--worker-timeout-secs`, and the others train them.

Reported: steps/s reached against the target (counted by the book from a quarter of the way until the kill),
the service's CPU per report (its /proc utime + stime over the reports it counted: in that same window, while every
worker steps, and over the whole run, with its kernel share), report and
request round trips (p50, p99, max) as the workers saw them, seal + commit time, and that the book is exact:
the data set finished with every record counted once (trained records == records; a shard handed back is done
in pieces, so done shards may exceed shards). Output: results/shard_service_scale.{json,md}.
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import platform
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

from elastimator.elastic.client import ShardClient
from elastimator.elastic.report_line_codec import (PACKED_REPLY, PACKED_REPORT, FrameBuffer, frame, read_frame,
                                                   send_frame)
from elastimator.elastic.shards import Assigned, Drained, Finished, ShardingSpec
from report import RESULTS, worktree, write_results

TOKEN = "scale-bench-token"
DATASET = "scale"


def percentiles(values: list[float]) -> dict:
    """p50, p99 and max of `values` (seconds) in milliseconds."""
    if not values:
        return {"p50": None, "p99": None, "max": None, "count": 0}
    values = sorted(values)
    pick = lambda q: round(values[min(len(values) - 1, int(q * len(values)))] * 1000, 2)  # noqa: E731
    return {"p50": pick(0.50), "p99": pick(0.99), "max": round(values[-1] * 1000, 2), "count": len(values)}


# ---------------------------------------------------------------- a load process: many workers, one event loop

class _Worker:
    """One simulated worker: its report line, its shard, what it waits for."""

    def __init__(self, index: int, name: str, sock: socket.socket):
        self.index = index
        self.name = name
        self.sock = sock
        self.received = FrameBuffer()
        self.shard: dict | None = None
        self.next_record = 0
        self.waiting: tuple[str, float] | None = None
        """The call in flight ("report" or "request", sent at)."""
        self.done = False
        self.request_number = 0


def _connect(host: str, port: int, name: str) -> socket.socket:
    """A report line of worker `name`, past its hello, non-blocking; `host` "@NAME" takes the line's abstract Unix
    socket NAME, as a `ShardClient` on the service's machine does."""
    if host.startswith("@"):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect("\0" + host[1:])
    else:
        sock = socket.create_connection((host, port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    send_frame(sock, {"token": TOKEN, "worker": name})
    with sock.makefile("rb") as stream:
        hello = read_frame(stream)
    if "report" not in hello.get("packed", ()):
        raise RuntimeError(f"the service's report line does not take packed reports: {hello}")
    sock.setblocking(False)
    return sock


def run_load_process(host: str, port: int, first: int, count: int, step_rate: float, batch: int, out: str,
                     seconds_limit: float) -> None:
    """Runs workers first..first+count-1 until the data set is finished; writes what they measured to `out`."""
    selector = selectors.DefaultSelector()
    workers = []
    for index in range(first, first + count):
        worker = _Worker(len(workers), f"w{index}", _connect(host, port, f"w{index}"))
        selector.register(worker.sock, selectors.EVENT_READ, worker)
        workers.append(worker)
    name = DATASET.encode()
    period = 1.0 / step_rate
    reports, requests, resent = [], [], 0
    started = time.monotonic()
    due: list[tuple[float, int]] = []  # (when, worker index): its next call
    for i, worker in enumerate(workers):
        heapq.heappush(due, (started + period * i / len(workers), i))  # spread over one step's period

    def send_request(worker):
        worker.request_number += 1
        body = json.dumps({"method": "request", "dataset": DATASET, "worker": worker.name,
                           "request_id": f"{worker.name}-{worker.request_number}"}).encode()
        worker.sock.sendall(frame(body))
        worker.waiting = ("request", time.monotonic())

    def send_report(worker):
        shard = worker.shard
        records = min(batch, shard["end"] - worker.next_record)
        body = PACKED_REPORT.pack(b"R", shard["shard_id"], records, shard["lease"], worker.next_record) + name
        worker.sock.sendall(frame(body))
        worker.waiting = ("report", time.monotonic())

    while not all(w.done for w in workers):
        now = time.monotonic()
        if now - started > seconds_limit:
            raise TimeoutError(f"workers {first}..{first + count - 1} did not finish within {seconds_limit:.0f} s")
        while due and due[0][0] <= now:
            _, i = heapq.heappop(due)
            worker = workers[i]
            if worker.done or worker.waiting is not None:
                continue
            if worker.shard is None:
                send_request(worker)
            else:
                send_report(worker)
        timeout = max(0.0, due[0][0] - time.monotonic()) if due else 0.05
        for key, _ in selector.select(min(timeout, 0.05)):
            worker = key.data
            chunk = worker.sock.recv(65536)
            if not chunk:
                raise ConnectionError(f"the service closed {worker.name}'s line")
            worker.received.add(chunk)
            while (body := worker.received.next_body()) is not None:
                kind, sent_at = worker.waiting
                now = time.monotonic()
                if kind == "report":
                    if body[:1] != b"A":
                        raise RuntimeError(f"{worker.name}: a report refused: {body[:300]!r}")
                    _, sealing, _floor = PACKED_REPLY.unpack(body)
                    worker.waiting = None
                    if sealing:  # a seal is pending: the same report again shortly
                        resent += 1
                        heapq.heappush(due, (now + 0.01, worker.index))
                        continue
                    reports.append(now - sent_at)
                    worker.next_record += min(batch, worker.shard["end"] - worker.next_record)
                    if worker.next_record >= worker.shard["end"]:
                        worker.shard = None
                    heapq.heappush(due, (sent_at + period, worker.index))
                else:
                    reply = json.loads(body)
                    worker.waiting = None
                    decision = reply.get("decision")
                    if decision == "assigned":
                        requests.append(now - sent_at)
                        worker.shard, worker.next_record = reply, reply["start"]
                        heapq.heappush(due, (now, worker.index))
                    elif decision in ("finished", "drained"):
                        worker.done = True
                    elif decision == "wait":  # every shard is out: ask again, as ShardFeed does
                        heapq.heappush(due, (now + 0.2, worker.index))
                    else:
                        raise RuntimeError(f"{worker.name}: unexpected reply to a request: {reply}")
    with open(out, "w") as f:
        json.dump({"reports": reports, "requests": requests, "resent": resent}, f)


# ---------------------------------------------------------------- a client process: real ShardClients, a thread each

def run_client_process(address: str, first: int, count: int, step_rate: float, batch: int, out: str,
                       seconds_limit: float, heartbeat_secs: float = 0.0) -> None:
    """Workers first..first+count-1 as a trainer's shard feed drives them: a thread each, each its own
    `ShardClient` (a gRPC channel and a report line, over the Unix socket on this machine), asking for a shard and
    reporting each batch of it with its lease, every 1/`step_rate` s, and (`heartbeat_secs` > 0) heartbeating
    over gRPC that often, as `ShardFeed` does every second; writes what they measured to `out`."""
    period = 1.0 / step_rate
    started = time.monotonic()
    reports: list[float] = []
    requests: list[float] = []
    errors: list[BaseException] = []

    def work(index: int) -> None:
        client = ShardClient(address, TOKEN, worker=f"w{first + index}")
        due = started + period * index / count  # spread over one step's period, as the load processes do
        beat_at = started + heartbeat_secs * index / count
        try:
            while time.monotonic() - started < seconds_limit:
                asked = time.perf_counter()
                shard = client.request(DATASET)
                if isinstance(shard, (Finished, Drained)):
                    return
                if not isinstance(shard, Assigned):  # every shard is out: ask again, as ShardFeed does
                    time.sleep(0.2)
                    continue
                requests.append(time.perf_counter() - asked)
                for offset in range(shard.start, shard.end, batch):
                    time.sleep(max(0.0, due - time.monotonic()))
                    if heartbeat_secs and time.monotonic() >= beat_at:
                        client.heartbeat()
                        beat_at += heartbeat_secs
                    sent = time.perf_counter()
                    client.report(DATASET, shard.shard_id, min(batch, shard.end - offset), offset=offset,
                                  lease=shard.lease)
                    reports.append(time.perf_counter() - sent)
                    due += period
            raise TimeoutError(f"worker w{first + index} did not finish within {seconds_limit:.0f} s")
        except BaseException as e:  # noqa: BLE001 (said below, with the worker's name)
            errors.append(e)
        finally:
            client.close()

    threads = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise RuntimeError(f"{len(errors)} of workers {first}..{first + count - 1} failed; the first: {errors[0]!r}")
    with open(out, "w") as f:
        json.dump({"reports": reports, "requests": requests, "resent": 0}, f)


# ---------------------------------------------------------------- the driver: service, load processes, chief

def build_c_load(directory: str) -> str | None:
    """Compiles `report_load.c` (the lean load process) into `directory`; its path, or None without a C compiler
    (the Python load process runs instead)."""
    compiler = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if compiler is None:
        return None
    binary = os.path.join(directory, "report_load")
    source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "report_load.c")
    subprocess.run([compiler, "-O2", "-o", binary, source], check=True)
    return binary


CLIENT_LOAD = "client"
"""`run`'s load of real `ShardClient`s (`run_client_process`), one thread per worker."""


def run_service(model_dir: str, worker_timeout_secs: float) -> None:
    """The standalone service as `elastimator shard-service` runs it (`serve`), counting the paths its calls take:
    prints its address, and once stopped (SIGTERM) the counts, as JSON: reports the native loop read
    (`native_reports`), packed reports counted in all (`packed_reports`), calls the report line answered
    (`line_calls`: packed and JSON), and every call the service handled by method (`handled`: JSON over the line
    or gRPC)."""
    from elastimator.elastic.seal_store import SealStore
    from elastimator.elastic.service import ShardServer, ShardService

    stops = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, stops)
    service = ShardService(TOKEN, SealStore(model_dir), worker_timeout_secs=worker_timeout_secs)
    counts = {"native_reports": 0, "packed_reports": 0, "handled": {}}
    report_batch, handle = service.report_batch, service.handle

    def counted_batch(reports):
        counts["packed_reports"] += len(reports)
        return report_batch(reports)

    def counted_handle(method, request):
        counts["handled"][method] = counts["handled"].get(method, 0) + 1
        return handle(method, request)

    service.report_batch, service.handle = counted_batch, counted_handle  # before the server takes them
    server = ShardServer(service).start()
    native = server.report_line._native

    class CountedNative:
        def poll(self, *args):
            polled = native.poll(*args)
            counts["native_reports"] += len(polled[0])
            return polled

        def answer(self, *args):
            return native.answer(*args)

    if native is not None:
        server.report_line._native = CountedNative()
    print(server.address, flush=True)
    signal.sigwait(stops)
    counts["line_calls"] = server.report_line.answered
    server.stop()
    print(json.dumps(counts), flush=True)


def _cpu_seconds(pid: int) -> float:
    return sum(_cpu_split(pid))


def _cpu_split(pid: int) -> tuple[float, float]:
    """A process's CPU seconds so far: (in user mode, in the kernel)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return int(fields[11]) / os.sysconf("SC_CLK_TCK"), int(fields[12]) / os.sysconf("SC_CLK_TCK")


def run(workers: int, processes: int, step_rate: float, batch: int, shard_steps: int, seconds: float,
        seal_every: float, kill_share: float, worker_timeout_secs: float, pin: bool = True,
        service_src: str | None = None, load: str | None = None, tcp: bool = False,
        heartbeat_secs: float = 0.0) -> dict:
    """One run (see the module doc); `pin` puts the service on a core of its own and this process and the load on
    the others (a test sharing the machine leaves it off); `service_src` runs the service from another source tree
    (a worktree of another revision); `load` is the built C load process (`build_c_load`), None for Python's, or
    CLIENT_LOAD; `tcp` has the C and Python load processes take TCP where a `ShardClient` takes the line's Unix
    socket (this machine's); `heartbeat_secs` has CLIENT_LOAD's workers heartbeat over gRPC that often."""
    records = int(workers * step_rate * batch * seconds)
    shard_size = batch * shard_steps
    model_dir = tempfile.mkdtemp(prefix="shard-scale-")
    env = dict(os.environ, ELASTIMATOR_JOB_TOKEN=TOKEN)
    if service_src:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [service_src, env.get("PYTHONPATH")]))
    log = open(os.path.join(model_dir, "service.log"), "w")
    affinity = os.sched_getaffinity(0)  # this process's cores, given back as the run ends
    cpus = sorted(affinity)
    pinned = pin and len(cpus) > 1
    # Pinned before it starts, so that every thread it starts is pinned too (pinning its pid afterwards moved
    # the main thread only, and the report line's thread went on sharing the load's core).
    service = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--service", model_dir,
                                str(worker_timeout_secs)],
                               stdout=subprocess.PIPE, stderr=log, text=True, env=env,
                               preexec_fn=(lambda: os.sched_setaffinity(0, {cpus[0]})) if pinned else None)
    loads: list[subprocess.Popen] = []
    try:
        address = service.stdout.readline().strip()
        if pinned:  # this process and the load processes it starts: the other cores
            os.sched_setaffinity(0, set(cpus[1:]))
        chief = ShardClient(address, TOKEN, worker="chief")
        chief.add_dataset(ShardingSpec(name=DATASET, size=records, shard_size=shard_size))
        chief.open()  # a fresh book: the chief's "model restored" (nothing to restore) opens the hand-out
        where = chief.call("report_line")
        line_port = where["port"]
        host = address.rpartition(":")[0]
        line_host = f"@{where['local']}" if where.get("local") and not tcp else host  # as a ShardClient here
        per_process = [workers // processes + (1 if i < workers % processes else 0) for i in range(processes)]
        outs = [os.path.join(model_dir, f"load-{i}.json") for i in range(processes)]
        user_before, system_before = _cpu_split(service.pid)
        cpu_before = user_before + system_before
        started = time.monotonic()
        first = 0
        for i, count in enumerate(per_process):
            arguments = [line_host, str(line_port), str(first), str(count), str(step_rate), str(batch), outs[i],
                         str(seconds * 10)]
            if load == CLIENT_LOAD:
                command = [sys.executable, os.path.abspath(__file__), "--client-process", address, *arguments[2:],
                           str(heartbeat_secs)]
            elif load:
                command = [load, *arguments, TOKEN, DATASET]
            else:
                command = [sys.executable, os.path.abspath(__file__), "--load-process", *arguments]
            loads.append(subprocess.Popen(command))
            first += count
        killed = round(kill_share * processes) if kill_share else 0
        seals, kill_at = [], started + seconds / 2
        steady, quarter, steady_cores = None, None, (0.0, 0.0)
        while any(p.poll() is None for p in loads[killed:]):
            time.sleep(min(seal_every, 0.5))
            now = time.monotonic()
            if quarter is None and now >= started + seconds / 4:
                quarter = (time.monotonic(), chief.status(DATASET)["trained_records"], _cpu_seconds(service.pid),
                           sum(_cpu_seconds(p.pid) for p in loads))
            if steady is None and now >= kill_at:
                # Steps/s reached: what the book counted from a quarter of the way to the kill (every worker
                # started and stepping); and the cores the service and the load used meanwhile.
                window = time.monotonic() - quarter[0]
                steady = (chief.status(DATASET)["trained_records"] - quarter[1]) / batch / window
                steady_cores = ((_cpu_seconds(service.pid) - quarter[2]) / window,
                                (sum(_cpu_seconds(p.pid) for p in loads) - quarter[3]) / window)
                for p in loads[:killed]:
                    p.send_signal(signal.SIGKILL)
            if now - started >= (len(seals) + 1) * seal_every:
                step = len(seals) + 1  # the checkpoint this seal stands for
                begun = time.perf_counter()
                chief.commit(chief.seal(checkpoint_step=step), step)
                seals.append(time.perf_counter() - begun)
        elapsed = time.monotonic() - started
        user, system = (after - before for after, before in zip(_cpu_split(service.pid), (user_before, system_before)))
        cpu = user + system
        failed = [i for i, p in enumerate(loads) if i >= killed and p.returncode != 0]
        if failed:
            raise RuntimeError(f"load process(es) {failed} failed (their errors are above)")
        status = chief.status(DATASET)
    finally:
        for p in loads:
            if p.poll() is None:
                p.kill()
        service.terminate()
        paths, _ = service.communicate(timeout=30)
        os.sched_setaffinity(0, affinity)
    measured = [json.load(open(out)) for out in outs[killed:]]
    reports = [x for m in measured for x in m["reports"]]
    requests = [x for m in measured for x in m["requests"]]
    counted_reports = -(-status["trained_records"] // batch)
    shards = -(-records // shard_size)
    # Exact: finished, and every record counted once (a shard handed back is done in pieces: done_shards grows).
    exact = bool(status["finished"]) and status["trained_records"] == records
    return {
        "workers": workers, "load_processes": processes, "step_rate": step_rate, "batch": batch,
        "shard_steps": shard_steps, "records": records, "shards": shards, "killed_workers": sum(per_process[:killed]),
        "seconds": round(elapsed, 1),
        "target_steps_per_sec": workers * step_rate,
        "steps_per_sec": round(steady if steady is not None else counted_reports / elapsed),
        "service_cpu_cores": round(cpu / elapsed, 3),
        "steady_cores": {"service": round(steady_cores[0], 2), "load": round(steady_cores[1], 2)},
        # While every worker steps (a quarter of the way to the kill): the service's CPU over the reports it counted.
        "steady_service_cpu_us_per_report": round(steady_cores[0] / steady * 1e6, 1) if steady else None,
        "service_cpu_us_per_report": round(cpu / max(1, counted_reports) * 1e6, 1),
        "service_kernel_us_per_report": round(system / max(1, counted_reports) * 1e6, 1),
        "report_ms": percentiles(reports), "request_ms": percentiles(requests), "seal_commit_ms": percentiles(seals),
        "reports_resent_for_a_seal": sum(m["resent"] for m in measured),
        "paths": json.loads(paths.strip().splitlines()[-1]) if paths.strip() else None,
        "book": {"finished": status["finished"], "trained_records": status["trained_records"],
                 "done_shards": status["done_shards"], "exact": exact},
    }


def _row(r: dict) -> str:
    """A run's row of the results table."""
    if "failed" in r:
        return f"| {r['workers']:,} | {r['code']} | | failed: {r['failed'][:160]} | | | | | | | |\n"
    cores = r["steady_cores"]
    return (f"| {r['workers']:,} ({r['killed_workers']} killed) | {r['code']} | {r.get('load', 'Python')} "
            f"| {r['steps_per_sec']:,} of {r['target_steps_per_sec']:,.0f} "
            f"| {r.get('steady_service_cpu_us_per_report', '?')} µs ({cores['service']} cores; load {cores['load']}) "
            f"| {r['service_cpu_us_per_report']} µs, {r.get('service_kernel_us_per_report', '?')} in the kernel "
            f"| {r['report_ms']['p50']} / {r['report_ms']['p99']} "
            f"| {r['request_ms']['p50']} / {r['request_ms']['p99']} "
            f"| {r['seal_commit_ms']['p50']} / {r['seal_commit_ms']['max']} "
            f"| {'exact' if r['book']['exact'] else 'WRONG'} | {_paths(r.get('paths'))} |\n")


def _paths(paths: dict | None) -> str:
    """What a run's calls took: reports read natively of the packed ones, and the calls handled by method."""
    if not paths:
        return ""
    handled = ", ".join(f"{method} {n:,}" for method, n in sorted(paths["handled"].items()))
    return f"{paths['native_reports']:,} of {paths['packed_reports']:,} packed reports native; handled: {handled}"


def main(argv=None) -> dict:
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == "--load-process":
        host, port, first, count, rate, batch, out, limit = sys.argv[2:10]
        run_load_process(host, int(port), int(first), int(count), float(rate), int(batch), out, float(limit))
        return {}
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == "--client-process":
        address, first, count, rate, batch, out, limit, heartbeat = sys.argv[2:10]
        run_client_process(address, int(first), int(count), float(rate), int(batch), out, float(limit),
                           float(heartbeat))
        return {}
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == "--service":
        run_service(sys.argv[2], float(sys.argv[3]))
        return {}
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1000])
    parser.add_argument("--processes", type=int, default=4, help="load processes (the workers split among them)")
    parser.add_argument("--step-rate", type=float, default=10.0)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--shard-steps", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60.0, help="the data set's size, in seconds at the target")
    parser.add_argument("--seal-every", type=float, default=5.0)
    parser.add_argument("--kill-share", type=float, default=0.25, help="share of the load processes killed")
    parser.add_argument("--worker-timeout-secs", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=1, help="runs of each size and code, interleaved")
    parser.add_argument("--against", metavar="REV", help="also run the service with the code of this git revision "
                        "(a worktree), side by side: before each run of this checkout's, at each size")
    parser.add_argument("--load", choices=["c", "python", CLIENT_LOAD], nargs="+", default=["c"],
                        help="the load processes: the lean C one (report_load.c; Python's where no C compiler is "
                        "found), Python's, or real ShardClients (a thread per worker); several: each in turn, at "
                        "each size and round")
    parser.add_argument("--tcp", action="store_true",
                        help="the C and Python load processes take TCP, as workers on other machines do (by default "
                        "they take the report line's Unix socket, as a ShardClient on the service's machine does)")
    parser.add_argument("--client-heartbeat-secs", type=float, default=0.0,
                        help="with --load client: each worker also heartbeats over gRPC this often, as a trainer's "
                        "ShardFeed does every second (0: never)")
    parser.add_argument("--out", default=RESULTS)
    args = parser.parse_args(argv)
    runs = []
    with worktree(args.against) as src, tempfile.TemporaryDirectory() as scratch:
        built = build_c_load(scratch) if "c" in args.load else None
        over = " over TCP" if args.tcp else " over the Unix socket"
        beats = f", a gRPC heartbeat every {args.client_heartbeat_secs:g} s" if args.client_heartbeat_secs else ""
        loads = [(CLIENT_LOAD, "ShardClient" + beats) if kind == CLIENT_LOAD else
                 (built, "C" + over) if kind == "c" and built else (None, "Python" + over) for kind in args.load]
        for n in [n for n in args.workers for _ in range(args.rounds)]:
            for load, load_kind in loads:
                for code, service_src in ([(f"@{args.against}", src)] if src else []) + [("this checkout", None)]:
                    try:
                        runs.append({"code": code, **run(n, args.processes, args.step_rate, args.batch,
                                                         args.shard_steps, args.seconds, args.seal_every,
                                                         args.kill_share, args.worker_timeout_secs,
                                                         service_src=service_src, load=load, tcp=args.tcp,
                                                         heartbeat_secs=args.client_heartbeat_secs),
                                     "load": load_kind})
                    except (RuntimeError, OSError, TimeoutError) as e:  # e.g. a service that refuses connections
                        runs.append({"code": code, "workers": n, "failed": f"{type(e).__name__}: {e}"})
    result = {"benchmark": "shard_service_scale", "runs": runs,
              "machine": f"{os.cpu_count()} CPUs, {platform.platform()}"}
    rows = "".join(map(_row, runs))
    markdown = (
        "# The shard service at scale\n\n"
        f"`bench/shard_service_scale.py`: the standalone service pinned to one core; simulated workers in "
        f"{args.processes} lean load processes on the other core (C: `report_load.c`, one epoll loop per process; "
        f"or Python's), each reporting a {args.batch}-record batch at "
        f"{args.step_rate:g} steps/s over the report line and asking for a {args.shard_steps}-step shard when one "
        f"ends; the chief seals and commits every {args.seal_every:g} s; {args.kill_share:.0%} of the workers killed "
        f"half way. Machine: {result['machine']}.\n\n"
        "| workers | service code | load | steps/s reached | service CPU per report while all step (cores used by the "
        "service; by the load) | over the whole run, in the kernel of it "
        "| report p50 / p99 ms | shard request p50 / p99 ms | seal + commit p50 / max ms | book "
        "| paths the calls took |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|\n" + rows)
    write_results(args.out, "shard_service_scale", result, markdown)
    return result


if __name__ == "__main__":
    main()
