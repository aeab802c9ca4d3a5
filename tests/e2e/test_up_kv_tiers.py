"""`switchyard up --kv-offloading-size G` with `--kv-offloading-shared` (one host KV tier in
shared memory for all engines) or `--kv-redis` (a redis-server that all of them use as a
shared tier): a prefix one engine computed is loaded, not recomputed, by another. The Redis
child and the shared memory go away with `up`."""
import os
import pathlib
import re
import signal

import requests

from conftest import wait_until
from engine_server import sample
from test_up import Up, child_pids

_REDIS = re.compile(r"redis-server on 127\.0\.0\.1:(\d+)")
# 100 tokens: 6 full blocks that a prefix hit may cover.
PROMPT = [(7 * i + 3) % 500 + 10 for i in range(100)]


def complete(url, prompt):
    r = requests.post(f"{url}/v1/completions", json={
        "model": "tiny-llama3", "prompt": prompt, "max_tokens": 8, "temperature": 0}, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]["text"]


def redis_children(up):
    return [pid for pid in child_pids(up.proc.pid)
            if open(f"/proc/{pid}/comm").read().strip().startswith("redis-server")]


def test_up_shares_a_redis_tier_between_its_engines():
    up = Up("--engines", 2, "--threads", 1, "--kv-offloading-size", 0.01, "--kv-redis")
    try:
        assert _REDIS.search(up.text()), up.text()
        assert len(redis_children(up)) == 1
        (_, first), (_, second) = up.engines
        answer = complete(first, PROMPT)
        wait_until(lambda: sample(first, "switchyard:kv_tier_stored_blocks_total", medium="REDIS") >= 6,
                   "the first engine's blocks in Redis")
        assert complete(second, PROMPT) == answer
        assert sample(second, "switchyard:kv_tier_hits_total", medium="REDIS") == 96
    finally:
        up.stop()
    assert redis_children(up) == []


def test_redis_dies_with_a_killed_up():
    up = Up("--engines", 1, "--threads", 1, "--kv-offloading-size", 0.01, "--kv-redis")
    [redis] = redis_children(up)
    os.kill(up.proc.pid, signal.SIGKILL)
    up.proc.wait()

    def gone():
        try:
            with open(f"/proc/{redis}/stat") as f:
                return f.read().split(") ", 1)[1].startswith("Z")  # reaped by init soon
        except OSError:
            return True
    wait_until(gone, "redis-server to exit with its parent")


def test_kv_redis_needs_the_host_tier(switchyard):
    result = switchyard("up", "--engines", "1", "--kv-redis", "--port", "0", check=False)
    assert result.returncode != 0
    assert b"need CPU engines with a host KV tier" in result.stderr


def test_up_shares_one_host_tier_between_its_engines():
    up = Up("--engines", 2, "--threads", 1, "--kv-offloading-size", 0.01,
            "--kv-offloading-shared")
    shm = pathlib.Path(f"/dev/shm/switchyard-kv-up-{up.proc.pid}")
    try:
        assert shm.exists()
        (_, first), (_, second) = up.engines
        answer = complete(first, PROMPT)
        wait_until(lambda: sample(first, "switchyard:kv_tier_stored_blocks_total", medium="CPU") >= 6,
                   "the first engine's blocks in the shared tier")
        assert complete(second, PROMPT) == answer
        assert sample(second, "switchyard:kv_tier_hits_total", medium="CPU") == 96
    finally:
        up.stop()
    assert not shm.exists()
