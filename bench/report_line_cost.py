"""What one report costs the shard service, taken apart: the line's own work, and the system calls under it.

Run:  python bench/report_line_cost.py [--connections 200] [--rounds 100]

`bench/shard_service_scale.py` measures the service's CPU per report as a whole, under a real load. This splits
that figure, in one process and one run:

- **the line's work**: a real `ReportLineServer` and `ShardService`, its connections socket pairs (Unix
  sockets, the cheapest system calls there are); each round every connection sends one packed report and the
  server's turns of its loop (`_turn`) wait for, read, count and answer them all. Per report: the loop's work
  plus one cheap receive and one cheap send. Measured twice, interleaved: with the native loop
  (`_line_native`, where the install built it) and with the Python one.
- **a bare Unix socket pair**: one small frame sent and received, no Python beyond the two calls.
- **a bare loopback TCP connection**: the same over TCP, as remote workers' lines run (the sender's call also
  runs the receiver's protocol work, so the cost sits with whoever sends).

Each figure is CPU time (this process's, per message), the median of `--repeats` measurements, interleaved.
Output: results/report_line_cost.{json,md}.
"""

from __future__ import annotations

import argparse
import os
import platform
import selectors
import socket
import statistics
import time

from elastimator.elastic import report_line_server
from elastimator.elastic.report_line_codec import PACKED_REPORT, frame
from elastimator.elastic.report_line_server import ReportLineServer, _Connection
from elastimator.elastic.service import ShardService
from report import RESULTS, write_results

TOKEN = "cost-bench-token"
BATCH = 64


def line_work(connections: int, rounds: int, native: bool) -> float:
    """CPU µs per report of the line's turns (wait, read, count and answer), over socket pairs, with the native
    loop or the Python one."""
    service = ShardService(TOKEN)
    service.handle("add_dataset", {"dataset": {"name": "d", "size": connections * rounds * BATCH,
                                               "shard_size": rounds * BATCH}})
    server = ReportLineServer(service.handle, service.check_token, service.report_batch, local=False,
                              native=native)
    lines = []
    for i in range(connections):
        worker_end, service_end = socket.socketpair()
        service_end.setblocking(False)
        connection = _Connection(service_end, hello_by=0.0)
        connection.worker, connection.packed = f"w{i}", True
        # pylint: disable=protected-access  (as accepted and past its hello)
        server._connections[service_end] = connection
        server._selector.register(service_end, selectors.EVENT_READ, connection)
        server._mark(connection)
        shard = service.handle("request", {"dataset": "d", "worker": connection.worker, "request_id": "0"})
        lines.append((worker_end, connection, shard))
    spent = 0.0
    for step in range(rounds):
        for worker_end, _, shard in lines:
            worker_end.send(frame(PACKED_REPORT.pack(b"R", shard["shard_id"], BATCH, shard["lease"],
                                                     shard["start"] + step * BATCH) + b"d"))
        begun = time.process_time()
        while server.answered < (step + 1) * connections:
            server._turn(timeout_secs=0)  # pylint: disable=protected-access
        spent += time.process_time() - begun
        for worker_end, _, _ in lines:
            worker_end.recv(1 << 16)
    trained = service.handle("status", {"dataset": "d"})["trained_records"]
    if trained != connections * rounds * BATCH:
        raise RuntimeError(f"the book counted {trained} records of {connections * rounds * BATCH}")
    for worker_end, connection, _ in lines:
        worker_end.close()
        connection.sock.close()
    return spent / (connections * rounds) * 1e6


def bare_pair(make_pair, messages: int) -> float:
    """CPU µs to send and receive one report-sized frame over a connected pair."""
    sender, receiver = make_pair()
    message = frame(PACKED_REPORT.pack(b"R", 1, BATCH, 1, 0) + b"d")
    begun = time.process_time()
    for _ in range(messages):
        sender.send(message)
        receiver.recv(1 << 16)
    spent = time.process_time() - begun
    sender.close()
    receiver.close()
    return spent / messages * 1e6


def tcp_pair() -> tuple[socket.socket, socket.socket]:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        sender = socket.create_connection(listener.getsockname())
        receiver, _ = listener.accept()
    for sock in (sender, receiver):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sender, receiver


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--messages", type=int, default=20_000, help="frames through each bare pair")
    parser.add_argument("--repeats", type=int, default=5, help="measurements of each figure (the median is kept)")
    parser.add_argument("--out", default=RESULTS)
    args = parser.parse_args(argv)
    natively = report_line_server._line_native is not None  # pylint: disable=protected-access
    measured: dict[str, list[float]] = {"line_work_us_per_report": [], "native_line_work_us_per_report": [],
                                        "unix_pair_us_per_message": [], "tcp_loopback_us_per_message": []}
    for _ in range(args.repeats):
        measured["line_work_us_per_report"].append(line_work(args.connections, args.rounds, native=False))
        if natively:
            measured["native_line_work_us_per_report"].append(line_work(args.connections, args.rounds, native=True))
        measured["unix_pair_us_per_message"].append(bare_pair(socket.socketpair, args.messages))
        measured["tcp_loopback_us_per_message"].append(bare_pair(tcp_pair, args.messages))
    figures = {name: round(statistics.median(values), 2) if values else None for name, values in measured.items()}
    result = {"benchmark": "report_line_cost", "connections": args.connections, "rounds": args.rounds,
              "repeats": args.repeats, **figures,
              "each_measurement": {name: [round(v, 2) for v in values] for name, values in measured.items()},
              "machine": f"{os.cpu_count()} CPUs, {platform.platform()}"}
    markdown = (
        "# What one report costs the shard service, taken apart\n\n"
        f"`bench/report_line_cost.py`: {args.connections} report lines over Unix socket pairs, {args.rounds} "
        "reports each, waited for, read, counted and answered by the line's turns (its Python loop, and its "
        "native one); beside it, one "
        "report-sized frame sent and received over a bare socket pair. CPU µs per report (or message), the "
        f"median of {args.repeats} interleaved measurements. "
        f"Machine: {result['machine']}.\n\n"
        "| the line's work, Python loop (with a Unix send and receive) | the same, native loop | a bare Unix send "
        "+ receive | a bare loopback TCP send + receive |\n|---|---|---|---|\n"
        f"| {figures['line_work_us_per_report']} | {figures['native_line_work_us_per_report'] or 'not built'} "
        f"| {figures['unix_pair_us_per_message']} | {figures['tcp_loopback_us_per_message']} |\n")
    write_results(args.out, "report_line_cost", result, markdown)
    return result


if __name__ == "__main__":
    main()
