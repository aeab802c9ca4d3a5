"""The KV tiers under the engine's pool: host memory (vLLM's `--kv-offloading-size`,
`--kv-offloading-backend native`) and disk (`--kv-offloading-disk-path`). A prompt's blocks
that leave a small pool are written to the tiers, and the same prompt later loads them back
instead of computing them. The answer must be the one an engine without tiers gives (the KV
loaded is the KV computed), the traffic shows in vLLM's offload series and Switchyard's tier
series, the KV pool goes back to its baseline, and a corrupt or torn disk entry is a
fallback to computing, never wrong KV."""
import concurrent.futures
import os
import pathlib
import signal
import time

import msgpack
import openai
import pytest
import requests
import zmq

from conftest import MODELS_DIR, wait_until
from engine_server import EngineServer, kv_events_flags
from kv_wire import as_dict
from peer_servers import free_port
from redis_server import RedisServer

# 100 tokens: 6 full blocks of 16 that a prefix hit may cover, and a partial one.
PROMPT = [(7 * i + 3) % 500 + 10 for i in range(100)]
MAX_TOKENS = 16
# 24 blocks of 16: room for three 100-token requests, so three others evict PROMPT's blocks.
SMALL_POOL = ["--num-gpu-blocks-override", "24", "--max-model-len", "256"]
TIER = ["--kv-offloading-size", "0.01"]


def other_prompt(k):
    return [(11 * i + 5 * k + 1) % 500 + 10 for i in range(100)]


def complete(engine, prompt, **extra):
    c = openai.OpenAI(base_url=engine.base_url, api_key="unused", max_retries=0)
    return c.completions.create(model=engine.name, prompt=prompt, max_tokens=MAX_TOKENS,
                                temperature=0, extra_body=extra).choices[0].text


def tier(engine, name, medium="CPU"):
    return engine.sample(f"switchyard:kv_tier_{name}", medium=medium)


def tier_loads(engine, medium, outcome):
    return engine.sample("switchyard:kv_tier_loads_total", medium=medium, outcome=outcome)


def stored_all(engine, blocks):
    """Waits for the tier to hold `blocks` stored blocks (stores finish on transfer threads)."""
    wait_until(lambda: tier(engine, "stored_blocks_total") >= blocks,
               f"{blocks} blocks stored in the host tier")


def evict_from_pool(engine, count=4):
    for k in range(count):
        complete(engine, other_prompt(k))


@pytest.fixture(scope="module")
def expected(switchyard):
    with EngineServer(*SMALL_POOL) as plain:
        return complete(plain, PROMPT)


def test_a_prefix_evicted_from_the_pool_comes_back_from_the_host_tier(expected):
    with EngineServer(*SMALL_POOL, *TIER) as engine:
        assert complete(engine, PROMPT) == expected
        stored_all(engine, 6)
        evict_from_pool(engine)
        hits_before = tier(engine, "hits_total")
        assert complete(engine, PROMPT) == expected
        # Every full block the prompt's hit may cover came back from the tier.
        assert tier(engine, "hits_total") - hits_before == 96
        assert tier_loads(engine, "CPU", "loaded") == 1
        assert tier_loads(engine, "CPU", "fell_back") == 0
        assert engine.sample("vllm:prompt_tokens_by_source_total", source="external_kv_transfer") == 96
        stored_bytes = engine.sample("vllm:kv_offload_total_bytes_total", transfer_type="GPU_to_CPU")
        block_bytes = stored_bytes / tier(engine, "stored_blocks_total")
        assert engine.sample("vllm:kv_offload_total_bytes_total", transfer_type="CPU_to_GPU") == 6 * block_bytes
        assert tier(engine, "used_blocks") >= 6
        assert tier(engine, "capacity_blocks") >= tier(engine, "used_blocks")
        engine.wait_idle()


def test_the_tier_serves_many_requests_and_the_pool_goes_back_to_empty(expected):
    with EngineServer(*SMALL_POOL, *TIER) as engine:
        for _ in range(3):
            assert complete(engine, PROMPT) == expected
            evict_from_pool(engine)
        # Rounds two and three load every prompt from the tier: PROMPT and the four others.
        assert tier_loads(engine, "CPU", "loaded") == 10
        wait_until(lambda: engine.metrics()["vllm:kv_cache_usage_perc"] == 0,
                   "the pool's blocks all free (no store still pinning one)")


def test_the_store_threshold_keeps_one_off_prompts_out(expected):
    with EngineServer(*SMALL_POOL, *TIER, "--kv-offloading-store-threshold", "2") as engine:
        assert complete(engine, PROMPT) == expected
        evict_from_pool(engine)
        # Seen once: not stored, so nothing comes back.
        assert tier(engine, "stored_blocks_total") == 0
        assert complete(engine, PROMPT) == expected
        assert tier(engine, "hits_total") == 0
        # Seen twice now: stored when it leaves, and loaded the third time.
        stored_all(engine, 6)
        evict_from_pool(engine)
        assert complete(engine, PROMPT) == expected
        assert tier(engine, "hits_total") == 96


def test_cache_salt_keeps_tenants_apart_in_the_tier(expected):
    with EngineServer(*SMALL_POOL, *TIER) as engine:
        assert complete(engine, PROMPT, cache_salt="tenant-a") == expected
        stored_all(engine, 6)
        evict_from_pool(engine)
        assert complete(engine, PROMPT, cache_salt="tenant-b") == expected
        assert tier(engine, "hits_total") == 0
        assert complete(engine, PROMPT, cache_salt="tenant-a") == expected
        assert tier(engine, "hits_total") == 96


def test_tier_changes_are_published_as_cpu_kv_events():
    with EngineServer(*SMALL_POOL, *TIER, *kv_events_flags(), kv_events=True) as engine:
        context = zmq.Context()
        sub = context.socket(zmq.SUB)
        sub.setsockopt(zmq.SUBSCRIBE, b"")
        sub.connect(engine.kv_endpoint)
        try:
            # PUB drops what it sends before the subscription arrives: probe until it does.
            for probe in range(100):
                engine.complete([900 + probe] * 17)
                if sub.poll(100):
                    break
            events = []
            complete(engine, PROMPT)
            stored_all(engine, probe + 7)  # each probe's block and the prompt's 6
            while sub.poll(500):
                _, _, payload = sub.recv_multipart()
                events += [as_dict(e) for e in msgpack.unpackb(payload)[1]]
        finally:
            sub.close(linger=0)
            context.term()
        cpu = [e for e in events if e.get("medium") == "CPU"]
        assert {e["type"] for e in cpu} == {"BlockStored"}
        # As vLLM's offloading events: hashes only, no tokens, no parent.
        assert all(e["token_ids"] == [] and e["parent_block_hash"] is None for e in cpu)
        gpu_stored = [e for e in events if e["type"] == "BlockStored" and e["medium"] == "GPU"]
        gpu_hashes = {h for e in gpu_stored for h in e["block_hashes"]}
        # The probes' tokens are >= 900, the prompt's below 510.
        prompt_hashes = {h for e in gpu_stored if e["token_ids"][0] < 900 for h in e["block_hashes"]}
        cpu_hashes = {h for e in cpu for h in e["block_hashes"]}
        assert len(prompt_hashes & cpu_hashes) >= 6
        # A CPU store without its GPU event can only be a probe's block whose GPU event went
        # out before the subscription arrived.
        assert len(cpu_hashes - gpu_hashes) <= probe + 1


def test_debug_kv_shows_each_tier():
    with EngineServer(*SMALL_POOL, *TIER) as engine:
        # The tier's size shows from the start, before any request.
        capacity = tier(engine, "capacity_blocks")
        assert capacity > 0
        complete(engine, PROMPT)
        stored_all(engine, 6)
        body = requests.get(f"{engine.url}/debug/kv", timeout=10).json()
        media = {t["medium"]: t for t in body["tiers"]}
        assert media["GPU"]["capacity_blocks"] == 24
        assert media["CPU"]["used_blocks"] >= 6
        assert media["CPU"]["capacity_blocks"] == capacity
        assert 0 <= media["CPU"]["hit_rate"] <= 1


@pytest.mark.parametrize("flags, message", [
    ([*TIER, "--kv-offloading-backend", "lmcache"],
     "--kv-offloading-backend lmcache is not supported"),
    ([*TIER, "--kv-offloading-store-threshold", "0"], "--kv-offloading-store-threshold"),
    ([*TIER, "--no-enable-prefix-caching"], "needs prefix caching"),
    (["--kv-offloading-size", "0.000001"], "hold no KV block"),
])
def test_bad_tier_flags_are_refused_at_startup(switchyard, flags, message):
    engine = EngineServer(*SMALL_POOL, *flags)
    with pytest.raises(AssertionError, match="exited"):
        engine.start()
    assert message in engine.stderr_tail()


# Host tier of 2 blocks (the tiny model's blocks are 8 KiB), so that the prompt's blocks only
# stay on disk.
SMALL_HOST = ["--kv-offloading-size", str(2.5 * 8192 / 2**30)]


def disk_flags(path):
    return ["--kv-offloading-disk-path", str(path), "--kv-offloading-disk-size", "0.01"]


def entry_dir(engine, root):
    [directory] = pathlib.Path(root).glob(f"switchyard-kv-{engine.proc.pid}-*")
    return directory


def test_a_prefix_that_left_the_pool_and_the_host_tier_comes_back_from_disk(expected, tmp_path):
    with EngineServer(*SMALL_POOL, *SMALL_HOST, *disk_flags(tmp_path)) as engine:
        assert complete(engine, PROMPT) == expected
        wait_until(lambda: tier(engine, "stored_blocks_total", "DISK") >= 6, "6 blocks on disk")
        evict_from_pool(engine)
        assert complete(engine, PROMPT) == expected
        from_disk = tier(engine, "hits_total", "DISK")
        assert from_disk > 0
        assert from_disk + tier(engine, "hits_total") == 96
        assert engine.sample("vllm:kv_offload_total_bytes_total", transfer_type="DISK_to_GPU") > 0
        assert len(list(entry_dir(engine, tmp_path).glob("*.kv"))) >= 6
        body = requests.get(f"{engine.url}/debug/kv", timeout=10).json()
        assert [t["medium"] for t in body["tiers"]] == ["GPU", "CPU", "DISK"]
        engine.wait_idle()
        directory = entry_dir(engine, tmp_path)
    # The engine removes its entries when it exits.
    assert not directory.exists()


def test_a_corrupt_disk_entry_falls_back_to_computing(expected, tmp_path):
    with EngineServer(*SMALL_POOL, *SMALL_HOST, *disk_flags(tmp_path)) as engine:
        assert complete(engine, PROMPT) == expected
        wait_until(lambda: tier(engine, "stored_blocks_total", "DISK") >= 6, "6 blocks on disk")
        evict_from_pool(engine)
        # Flip one payload byte of every entry on disk.
        for path in entry_dir(engine, tmp_path).glob("*.kv"):
            data = bytearray(path.read_bytes())
            data[200] ^= 0xFF
            path.write_bytes(bytes(data))
        assert complete(engine, PROMPT) == expected
        assert tier_loads(engine, "DISK", "fell_back") == 1
        assert tier(engine, "hits_total", "DISK") == 0
        engine.wait_idle()


def test_a_killed_engines_disk_entries_are_removed_by_the_next(tmp_path):
    engine = EngineServer(*SMALL_POOL, *SMALL_HOST, *disk_flags(tmp_path)).start()
    try:
        complete(engine, PROMPT)
        wait_until(lambda: tier(engine, "stored_blocks_total", "DISK") >= 6, "6 blocks on disk")
        directory = entry_dir(engine, tmp_path)
        os.kill(engine.proc.pid, signal.SIGKILL)
        engine.proc.wait()
    finally:
        engine.kill()
    assert directory.exists()
    with EngineServer(*SMALL_POOL, *SMALL_HOST, *disk_flags(tmp_path)) as second:
        assert not directory.exists()
        assert entry_dir(second, tmp_path).is_dir()


def test_the_disk_tier_needs_the_host_tier(switchyard, tmp_path):
    engine = EngineServer(*SMALL_POOL, *disk_flags(tmp_path))
    with pytest.raises(AssertionError, match="exited"):
        engine.start()
    assert "need the host tier" in engine.stderr_tail()


@pytest.fixture
def redis():
    server = RedisServer()
    yield server
    server.kill()


def redis_engine(redis):
    # Engines share blocks only when their block hashes agree: the same PYTHONHASHSEED.
    return EngineServer(*SMALL_POOL, *TIER, "--kv-offloading-redis", f"127.0.0.1:{redis.port}",
                        env={"PYTHONHASHSEED": "0"})


def test_a_prefix_one_engine_computed_comes_to_another_through_redis(expected, redis):
    with redis_engine(redis) as first, redis_engine(redis) as second:
        assert complete(first, PROMPT) == expected
        wait_until(lambda: tier(first, "stored_blocks_total", "REDIS") >= 6, "6 blocks in Redis")
        assert complete(second, PROMPT) == expected
        assert tier(second, "hits_total", "REDIS") == 96
        assert second.sample("vllm:prompt_tokens_by_source_total", source="external_kv_transfer") == 96
        # Another tenant's prompt shares no key with it.
        assert complete(second, PROMPT, cache_salt="other-tenant") == expected
        assert tier(second, "hits_total", "REDIS") == 96
        first.wait_idle()
        second.wait_idle()


def test_redis_gone_mid_run_is_a_fallback_to_computing(expected, redis):
    with redis_engine(redis) as engine:
        assert complete(engine, other_prompt(7)) is not None
        redis.kill()
        assert complete(engine, PROMPT) == expected
        assert tier_loads(engine, "REDIS", "fell_back") >= 1
        assert complete(engine, PROMPT) == expected
        engine.wait_idle()


def test_an_unreachable_redis_is_refused_at_startup(switchyard):
    engine = EngineServer(*SMALL_POOL, *TIER, "--kv-offloading-redis",
                          f"127.0.0.1:{free_port()}")
    with pytest.raises(AssertionError, match="exited"):
        engine.start()
    assert "cannot reach" in engine.stderr_tail()


@pytest.fixture
def shared_name():
    name = f"test-{os.getpid()}-{time.monotonic_ns()}"
    yield name
    pathlib.Path(f"/dev/shm/switchyard-kv-{name}").unlink(missing_ok=True)


def shared_engine(name, size=TIER[1], model=None):
    flags = [*SMALL_POOL, "--kv-offloading-size", size, "--kv-offloading-shared", name]
    extra = {} if model is None else {"model": model}
    return EngineServer(*flags, env={"PYTHONHASHSEED": "0"}, **extra)


def test_engines_on_one_host_share_the_host_tier(expected, shared_name):
    with shared_engine(shared_name) as first, shared_engine(shared_name) as second:
        assert complete(first, PROMPT) == expected
        stored_all(first, 6)
        # The second engine never saw the prompt: the blocks come from the first's stores.
        assert complete(second, PROMPT) == expected
        assert tier(second, "hits_total") == 96
        assert tier(second, "stored_blocks_total") == 0
        # One index: both see the same used slots.
        assert tier(first, "used_blocks") == tier(second, "used_blocks") >= 6
        first.wait_idle()
        second.wait_idle()
    # The tier outlives its engines: a later one still finds the prefix.
    with shared_engine(shared_name) as later:
        assert complete(later, PROMPT) == expected
        assert tier(later, "hits_total") == 96


def test_a_shared_tier_refuses_another_geometry_or_model(shared_name):
    with shared_engine(shared_name):
        other_size = shared_engine(shared_name, size="0.02")
        with pytest.raises(AssertionError, match="exited"):
            other_size.start()
        assert "--kv-offloading-size" in other_size.stderr_tail()
        other_model = shared_engine(shared_name, model=MODELS_DIR / "tiny-qwen2")
        with pytest.raises(AssertionError, match="exited"):
            other_model.start()
        assert "holds other KV" in other_model.stderr_tail() or \
            "--kv-offloading-size" in other_model.stderr_tail()


def test_a_request_waits_for_blocks_a_store_holds(tmp_path):
    """Two requests that do not fit the pool together: the second waits while the first runs,
    and when the first ends its blocks are pinned while the tiers copy them. The second must
    wait for them too, not be refused as too big for the cache."""
    with EngineServer(*SMALL_POOL, *TIER, *disk_flags(tmp_path)) as engine:
        c = openai.OpenAI(base_url=engine.base_url, api_key="unused", max_retries=0)

        def long_request(k):
            # 200 tokens: 13 blocks to start, 12 of them stored (and pinned) when it ends.
            prompt = [(13 * i + 7 * k + 2) % 500 + 10 for i in range(200)]
            return c.completions.create(model=engine.name, prompt=prompt, max_tokens=56,
                                        temperature=0, extra_body={"ignore_eos": True})

        for round_ in range(3):
            with concurrent.futures.ThreadPoolExecutor(2) as pool:
                answers = list(pool.map(long_request, [10 + 2 * round_, 11 + 2 * round_]))
            assert [a.usage.completion_tokens for a in answers] == [56, 56]
        engine.wait_idle()


def test_a_prefix_that_finds_no_room_waits_for_it_and_loads(switchyard):
    """A prompt whose prefix is in the host tier arrives while a long request holds most of
    the pool: there is no room to load it, nor to compute it. It waits (as vLLM's scheduler
    holds a request whose external KV it cannot place) and loads once the long request ends,
    instead of recomputing the prefix. Simulated engines with real KV bytes (--sim-kv-memory),
    so that the long request decodes slowly (40 ms a step) and the tier copies real blocks."""
    sim = ["--backend", "sim", "--sim-kv-memory", "--sim-latency", "zero,decode_ms_per_seq=40",
           "--num-gpu-blocks-override", "20", "--max-model-len", "256"]
    with EngineServer(*sim[:5], "--num-gpu-blocks-override", "64", "--max-model-len",
                      "256") as plain:
        expected = complete(plain, PROMPT)
    with EngineServer(*sim, *TIER) as engine:
        assert complete(engine, PROMPT) == expected
        stored_all(engine, 6)
        evict_from_pool(engine)
        c = openai.OpenAI(base_url=engine.base_url, api_key="unused", max_retries=0)
        # 230 + 25 tokens: 16 of the 20 blocks; PROMPT's load needs 6.
        long_prompt = [(13 * i + 2) % 500 + 10 for i in range(230)]
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            long_request = pool.submit(
                c.completions.create, model=engine.name, prompt=long_prompt, max_tokens=25,
                temperature=0, extra_body={"ignore_eos": True})
            wait_until(lambda: engine.metrics()["vllm:num_requests_running"] == 1,
                       "the long request to run")
            assert complete(engine, PROMPT) == expected
            assert long_request.result().usage.completion_tokens == 25
        assert tier_loads(engine, "CPU", "loaded") == 1
        assert engine.sample("vllm:prompt_tokens_by_source_total",
                             source="external_kv_transfer") == 96
        engine.wait_idle()
