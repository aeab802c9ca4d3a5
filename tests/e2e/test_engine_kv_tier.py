"""The host KV tier under the engine's pool (vLLM's `--kv-offloading-size`,
`--kv-offloading-backend native`): a prompt's blocks that leave a small pool are written to
host memory, and the same prompt later loads them back instead of computing them. The answer
must be the one an engine without the tier gives (the KV loaded is the KV computed), the
tier's traffic shows in vLLM's offload series and Switchyard's tier series, and the KV pool
goes back to its baseline."""
import json
import re

import msgpack
import openai
import pytest
import requests
import zmq

from conftest import wait_until
from engine_server import EngineServer, kv_events_flags
from kv_wire import as_dict

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


def series(engine, name, label, value):
    """The sample of `name` whose `label` is `value` (other labels ignored)."""
    text = requests.get(f"{engine.url}/metrics", timeout=10).text
    match = re.search(rf'^{re.escape(name)}\{{[^}}]*{label}="{value}"[^}}]*\}} (\S+)$', text,
                      re.M)
    assert match, f"no {name}{{{label}={value}}} series"
    return float(match.group(1))


def tier(engine, name):
    return series(engine, f"switchyard:kv_tier_{name}", "medium", "CPU")


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
        assert series(engine, "switchyard:kv_tier_loads_total", "outcome", "loaded") == 1
        assert series(engine, "switchyard:kv_tier_loads_total", "outcome", "fell_back") == 0
        assert series(engine, "vllm:prompt_tokens_by_source_total", "source",
                      "external_kv_transfer") == 96
        stored_bytes = series(engine, "vllm:kv_offload_total_bytes_total", "transfer_type",
                              "GPU_to_CPU")
        block_bytes = stored_bytes / tier(engine, "stored_blocks_total")
        assert series(engine, "vllm:kv_offload_total_bytes_total", "transfer_type",
                      "CPU_to_GPU") == 6 * block_bytes
        assert tier(engine, "used_blocks") >= 6
        assert tier(engine, "capacity_blocks") >= tier(engine, "used_blocks")
        engine.wait_idle()


def test_the_tier_serves_many_requests_and_the_pool_goes_back_to_empty(expected):
    with EngineServer(*SMALL_POOL, *TIER) as engine:
        for _ in range(3):
            assert complete(engine, PROMPT) == expected
            evict_from_pool(engine)
        # Rounds two and three load every prompt from the tier: PROMPT and the four others.
        assert series(engine, "switchyard:kv_tier_loads_total", "outcome", "loaded") == 10
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
            stored_all(engine, 7)  # the probe's block and the prompt's 6
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
        gpu_hashes = {h for e in events if e["type"] == "BlockStored" and e["medium"] == "GPU"
                      for h in e["block_hashes"]}
        cpu_hashes = [h for e in cpu for h in e["block_hashes"]]
        assert len(cpu_hashes) >= 6 and set(cpu_hashes) <= gpu_hashes


def test_debug_kv_shows_each_tier():
    with EngineServer(*SMALL_POOL, *TIER) as engine:
        complete(engine, PROMPT)
        stored_all(engine, 6)
        body = requests.get(f"{engine.url}/debug/kv", timeout=10).json()
        media = {t["medium"]: t for t in body["tiers"]}
        assert media["GPU"]["capacity_blocks"] == 24
        assert media["CPU"]["used_blocks"] >= 6
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
