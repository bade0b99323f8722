"""A TCP proxy that makes a link slow and lossy, for kernels without tc-netem (this machine's has none).

Every chunk of bytes is delivered `delay_secs` after it arrived, in order, in both directions; with
probability `loss`, a chunk (and, as on a real TCP connection, everything behind it) waits a retransmission
timeout more, which is what a lost segment costs a TCP stream. Runs in a thread of the test process.
"""

from __future__ import annotations

import asyncio
import random
import threading


class SlowLink:
    def __init__(self, listen_host: str, target: tuple[str, int], delay_secs: float = 0.2, loss: float = 0.05,
                 retransmit_secs: float = 0.6, seed: int = 0):
        self._listen_host, self._target = listen_host, target
        self._delay, self._loss, self._retransmit = delay_secs, loss, retransmit_secs
        self._random = random.Random(seed)
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self.port = 0
        self.chunks = self.stalled = 0

    def start(self) -> "SlowLink":
        threading.Thread(target=self._run, name="slow-link", daemon=True).start()
        self._ready.wait(10)
        return self

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._connect, self._listen_host, 0))
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()

    async def _connect(self, reader, writer) -> None:
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(*self._target)
        except OSError:
            writer.close()
            return
        await asyncio.gather(self._pump(reader, upstream_writer), self._pump(upstream_reader, writer))

    async def _pump(self, reader, writer) -> None:
        queue: asyncio.Queue = asyncio.Queue()

        async def deliver():
            while (item := await queue.get()) is not None:
                due, data = item
                await asyncio.sleep(max(0.0, due - self._loop.time()))
                writer.write(data)
                await writer.drain()
            writer.close()

        delivering = asyncio.ensure_future(deliver())
        last_due = 0.0
        try:
            while data := await reader.read(65536):
                self.chunks += 1
                due = self._loop.time() + self._delay
                if self._random.random() < self._loss:
                    self.stalled += 1
                    due += self._retransmit
                last_due = max(last_due, due)  # in order, like the bytes of one TCP stream
                queue.put_nowait((last_due, data))
        except (ConnectionError, OSError):
            pass
        queue.put_nowait(None)
        try:
            await delivering
        except (ConnectionError, OSError):
            pass
