"""A shard service in a process whose hard open-file limit is low (test_report_line.py runs this in a process of
its own: the limit cannot be raised back). Prints what the workers saw, as JSON.

1. 40 workers open report lines where the limit leaves room for fewer: how many are answered, how many closed.
2. With those closed, the process runs out of open files while one more worker connects: the line must stop
   accepting for a moment (not retry in a loop) and take the worker once files are free again.
"""

import json
import logging
import os
import resource
import socket
import struct
import sys

LIMIT = 320
resource.setrlimit(resource.RLIMIT_NOFILE, (LIMIT, LIMIT))

from elastimator.elastic import report_line_server  # noqa: E402  (after the limit: the server reads it as it starts)
from elastimator.elastic.service import ShardServer, ShardService  # noqa: E402

TOKEN = "few-files-token"


class Warnings(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def hello(sock: socket.socket, worker: str) -> None:
    body = json.dumps({"token": TOKEN, "worker": worker}).encode()
    sock.sendall(struct.pack(">I", len(body)) + body)


def answer(sock: socket.socket) -> dict | None:
    """The hello's answer, or None where the service closed the line."""
    with sock.makefile("rb") as stream:
        head = stream.read(4)
        return json.loads(stream.read(struct.unpack(">I", head)[0])) if len(head) == 4 else None


warnings = Warnings()
logging.getLogger("elastimator").addHandler(warnings)
server = ShardServer(ShardService(TOKEN)).start()
port, room = server.report_line.port, server.report_line.room

lines = []
for i in range(40):
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    hello(sock, f"w{i}")
    lines.append(sock)
answers = [answer(sock) for sock in lines]
closed_warnings = list(warnings.messages)
for sock in lines:
    sock.close()

report_line_server.WARN_EVERY_SECS = 0.0  # every time it runs out, so that a loop retrying at once would show
warnings.messages.clear()
late = socket.socket()  # its descriptor before they run out
filler = []
while True:
    try:
        filler.append(os.open(os.devnull, os.O_RDONLY))
    except OSError:
        break
late.settimeout(10)
late.connect(("127.0.0.1", port))  # waits in the listener's backlog: nothing left to accept it with
hello(late, "late")
late.settimeout(0.5)
try:
    early = late.recv(1)
except socket.timeout:
    early = b""
ran_out = list(warnings.messages)
for fd in filler:
    os.close(fd)
late.settimeout(10)
recovered = answer(late)
server.stop()
print(json.dumps({
    "room": room, "answered": sum(a is not None and "methods" in a for a in answers),
    "closed": sum(a is None for a in answers), "closed_warnings": closed_warnings,
    "answered_while_out": bool(early), "ran_out_warnings": ran_out, "late": recovered,
}))
sys.stdout.flush()
