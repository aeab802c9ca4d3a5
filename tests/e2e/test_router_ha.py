"""Two router replicas sharing state through Redis behind haproxy (Debian's), as an
operator runs them: 200 concurrent streams through the balancer, then one replica is
killed with SIGKILL. Only the streams that replica was serving fail (each is counted), every
other one completes, none is answered twice, new requests succeed at once, and the sessions
and prefixes the fleet learnt through both replicas still land where they did (the hit rate
before and after is printed)."""
import asyncio
import json
import random
import string
import subprocess
import tempfile
import time

import aiohttp
import pytest
import requests

from conftest import wait_until
from engine_server import MODEL_NAME, start_engines
from peer_servers import free_port
from redis_server import RedisServer
from router_server import Router, metric_sum
from test_router_replicas import SCHEDULING, shared_state

STREAMS = 200


class Haproxy:
    """haproxy in HTTP mode over the routers, round robin, checking each one's /health every
    200 ms (down after two failed checks: one slow answer from a loaded 2-core machine is
    not a dead replica); it names the replica that answered in x-router."""

    def __init__(self, routers):
        self.port = free_port()
        servers = "\n".join(
            f"    server r{i} 127.0.0.1:{r.url.rsplit(':', 1)[1]} check inter 200 fall 2 rise 2"
            for i, r in enumerate(routers))
        self.config = tempfile.NamedTemporaryFile("w", suffix=".cfg", delete=False)
        self.config.write(f"""global
    maxconn 4096
defaults
    mode http
    timeout connect 2s
    timeout client 60s
    timeout server 60s
    timeout check 1s
    retries 2
    option redispatch
    retry-on conn-failure empty-response
frontend fleet
    bind 127.0.0.1:{self.port}
    default_backend routers
backend routers
    balance roundrobin
    option httpchk GET /health
    http-response set-header x-router %[srv_name]
{servers}
""")
        self.config.close()
        self.proc = subprocess.Popen(["haproxy", "-f", self.config.name, "-db"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.url = f"http://127.0.0.1:{self.port}"
        wait_until(self._up, "haproxy answers", timeout=10)

    def _up(self):
        assert self.proc.poll() is None, self.proc.stderr.read().decode()
        try:
            return requests.get(f"{self.url}/health", timeout=1).status_code == 200
        except requests.RequestException:
            return False

    def stop(self):
        self.proc.kill()
        self.proc.wait()


def prompt(rng, words=48):
    return " ".join("".join(rng.choices(string.ascii_lowercase, k=6)) for _ in range(words))


def complete(url, text, session=None):
    headers = {"x-session-id": session} if session else {}
    r = requests.post(f"{url}/v1/completions", headers=headers, timeout=30,
                      json={"model": MODEL_NAME, "prompt": text, "max_tokens": 2})
    assert r.status_code == 200, r.text
    return r.headers["x-switchyard-endpoint"], r.headers["x-router"]


async def stream(http, url, i, outcomes):
    """One streamed chat completion; its outcome: ok (all tokens and [DONE]) or failed."""
    body = {"model": MODEL_NAME, "stream": True, "max_tokens": 24,
            "messages": [{"role": "user", "content": f"stream {i}"}]}
    outcome = {"router": None, "ids": set(), "chunks": 0, "done": False}
    try:
        async with http.post(f"{url}/v1/chat/completions", json=body) as r:
            outcome["router"] = r.headers.get("x-router")
            if r.status != 200:
                outcome["status"] = r.status
            else:
                async for line in r.content:
                    line = line.decode().strip()
                    if line == "data: [DONE]":
                        outcome["done"] = True
                    elif line.startswith("data: "):
                        chunk = json.loads(line[6:])
                        outcome["ids"].add(chunk["id"])
                        outcome["chunks"] += 1
    except (aiohttp.ClientError, asyncio.TimeoutError) as e:
        outcome["error"] = repr(e)
    outcomes[i] = outcome


def test_killing_a_replica_fails_only_its_streams_and_the_other_keeps_state(switchyard):
    engines = start_engines(4, "--backend", "sim", "--sim-latency", "zero,decode_ms_per_seq=5",
                            "--max-num-seqs", "64")
    redis = RedisServer()
    routers = [Router(engines, scheduling=SCHEDULING, extra=shared_state(redis, name))
               for name in ("replica-a", "replica-b")]
    lb = Haproxy(routers)
    a, b = routers
    try:
        # Sessions and prefixes learnt through both replicas (round robin alternates them).
        rng = random.Random(1)
        prompts = [prompt(rng) for _ in range(16)]
        first = {p: complete(lb.url, p) for p in prompts}
        assert {router for _, router in first.values()} == {"r0", "r1"}
        sessions = {f"s{i}": complete(lb.url, prompt(rng), f"s{i}")[0] for i in range(16)}
        wait_until(lambda: all(metric_sum(r.metrics(),
                                          "switchyard_router_shared_state_updates_received_total")
                               >= 4 for r in routers), "replicas synced")
        time.sleep(0.2)  # two sync rounds (10 ms each) after the last pick, and then some
        before = sum(complete(lb.url, p)[0] == first[p][0] for p in prompts) / len(prompts)

        async def run():
            outcomes = {}
            timeout = aiohttp.ClientTimeout(total=60)
            async with aiohttp.ClientSession(timeout=timeout) as http:
                tasks = [asyncio.create_task(stream(http, lb.url, i, outcomes))
                         for i in range(STREAMS)]

                def busy(r):
                    return sum(e["active_requests"] - e["elsewhere_requests"]
                               for e in r.endpoints())
                deadline = time.monotonic() + 20
                while min(busy(a), busy(b)) < 20:
                    assert time.monotonic() < deadline, "streams did not start on both"
                    await asyncio.sleep(0.02)
                in_flight_on_a = busy(a)
                a.kill()
                await asyncio.gather(*tasks)
            return outcomes, in_flight_on_a

        outcomes, in_flight_on_a = asyncio.run(run())
        ok = [o for o in outcomes.values() if o["done"] and not o.get("error")]
        failed = [o for o in outcomes.values() if not (o["done"] and not o.get("error"))]
        print(f"\n{STREAMS} streams: {len(ok)} completed, {len(failed)} failed; "
              f"{in_flight_on_a} were in flight on the killed replica")
        assert len(ok) + len(failed) == STREAMS
        # Only the killed replica's streams fail: every stream the other one answered
        # completed, and no more failed than the killed one had in flight. (A stream cut
        # before its response head has no x-router: haproxy's own 502, or a reset.)
        assert all(o in ok for o in outcomes.values() if o["router"] == "r1")
        assert all(o["router"] in ("r0", None) for o in failed), failed[:3]
        assert 0 < len(failed) <= in_flight_on_a, [o.get("error", o.get("status")) for o in failed]
        # None served twice: each completed stream is one completion id of its own.
        ids = [next(iter(o["ids"])) for o in ok]
        assert all(len(o["ids"]) == 1 for o in ok) and len(set(ids)) == len(ids)
        # New requests succeed at once, on the replica left.
        assert all(complete(lb.url, prompt(rng))[1] == "r1" for _ in range(20))
        # What both replicas learnt still holds on the survivor.
        after = sum(complete(lb.url, p)[0] == first[p][0] for p in prompts) / len(prompts)
        kept = sum(complete(lb.url, prompt(rng), s)[0] == e for s, e in sessions.items())
        print(f"prefix hits before the kill {before:.0%}, after {after:.0%}; "
              f"sessions kept {kept}/{len(sessions)}")
        assert before == 1 and after == 1 and kept == len(sessions)
        assert metric_sum(b.metrics(), "switchyard_router_shared_state_connected") == 1
    finally:
        lb.stop()
        for r in routers:
            if r.proc.poll() is None:
                r.stop()
        redis.kill()
        for e in engines:
            e.stop()
