"""Slowloris for the chaos tests: many connections from one loopback source address, each
sending a request head one byte at a time and never finishing it.

Slowloris(port, n, source).open() connects n sockets from `source` (another loopback address,
127.0.0.3 by default, so that a per-source-address cap can tell the attacker from the normal
clients on 127.0.0.1); trickle() then sends each open socket its next byte every `interval_s`
until close(). Connections the server refuses, resets or closes are counted, not reopened:
the load stays bounded in count and time."""
import asyncio

HEAD = (b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"X-Slow: " + b"s" * 4000 + b"\r\n\r\n")


class Slowloris:
    def __init__(self, port, n, source="127.0.0.3", interval_s=1.0):
        self.port, self.n, self.source, self.interval_s = port, n, source, interval_s
        self.writers = []
        self.refused = 0   # connects that failed
        self.dropped = 0   # connections the server closed or reset while we trickled
        self.sent = 0      # bytes of HEAD sent on each open connection
        self._task = None

    async def open(self, batch=256):
        """Connects every socket (in batches, so the listen backlog is not the limit) and
        sends each its first byte."""
        async def one():
            try:
                _, w = await asyncio.wait_for(asyncio.open_connection(
                    "127.0.0.1", self.port, local_addr=(self.source, 0)), 10)
            except (OSError, asyncio.TimeoutError):
                self.refused += 1
                return
            w.write(HEAD[:1])
            self.writers.append(w)

        for start in range(0, self.n, batch):
            await asyncio.gather(*(one() for _ in range(min(batch, self.n - start))))
        self.sent = 1
        self._task = asyncio.create_task(self._trickle())
        return self

    async def _trickle(self):
        while self.sent < len(HEAD) - 1:  # never the last byte
            await asyncio.sleep(self.interval_s)
            byte = HEAD[self.sent:self.sent + 1]
            self.sent += 1
            alive = []
            for w in self.writers:
                if w.is_closing() or w.transport.get_extra_info("socket") is None:
                    self.dropped += 1
                    continue
                try:
                    w.write(byte)
                    alive.append(w)
                except (ConnectionError, RuntimeError):
                    self.dropped += 1
            self.writers = alive

    @property
    def open_count(self):
        return len(self.writers)

    async def close(self):
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        for w in self.writers:
            w.transport.abort()
        self.writers = []
