"""Debian's redis-server on a free loopback port, without persistence, for the tests that
need a real Redis (the engines' KV tier, the routers' shared state). kill() is SIGKILL;
start() starts it again on the same port (a Redis that went away and came back)."""
import socket
import subprocess
import time

from peer_servers import free_port


class RedisServer:
    def __init__(self):
        self.port = free_port()
        self.proc = None
        self.start()

    def start(self):
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                assert self.proc.poll() is None, "redis-server exited"
                assert time.monotonic() < deadline, "redis-server did not start"
                time.sleep(0.02)

    def kill(self):
        self.proc.kill()
        self.proc.wait()
