"""Precise prefix routing end to end: sim engines publish KV events over ZeroMQ, and one
router, whose profile is llm-d's default with the prefix-cache-scorer in precise mode (what
`switchyard up` runs), subscribes to them.

Each engine is warmed directly, bypassing the router, with a long token prompt of its own;
requests through the router whose prompts extend a warmed prompt must then go to the engine
that holds it. Nothing else can explain those picks: the router never saw the warm prompts,
in precise mode it adds nothing to its index for its own picks, and the engines are idle
whenever it picks (the load scorers score every engine the same).

The router shows no index, so it is watched through probes: a request the engine refuses
(temperature -1: a 400 before any KV block is touched) is routed like any other, answers
with x-switchyard-endpoint, and adds the tokens the router predicted cached there to
switchyard_router_prefix_predicted_cached_tokens_total, yet caches nothing anywhere.

A router forgets what an engine cached in two ways, both driven here: a warmed prompt is
evicted (its blocks' BlockRemoved events), and an engine's prefix cache is reset (vLLM's
development route POST /reset_prefix_cache, served with VLLM_SERVER_DEV_MODE=1; one
AllBlocksCleared event); after either, the router no longer prefers that engine."""
import random

import openai
import pytest
import requests

from conftest import wait_until
from engine_server import MODEL_NAME, EngineServer, kv_events_flags
from router_server import Router, member_name, metric_sum

BLOCK_SIZE = 16
PROMPT_BLOCKS = 10
NUM_GPU_BLOCKS = 48  # small enough for test_evicted_prompt_loses_its_engine to evict

PRECISE_PROFILE = """scheduling:
  plugins:
  - type: prefix-cache-scorer
    parameters: {mode: precise, blockSizeTokens: 16}
  - type: queue-scorer
  - type: kv-cache-utilization-scorer
  - type: max-score-picker
  schedulingProfiles:
  - name: default
    plugins:
    - {pluginRef: prefix-cache-scorer, weight: 3}
    - {pluginRef: queue-scorer, weight: 2}
    - {pluginRef: kv-cache-utilization-scorer, weight: 2}
    - {pluginRef: max-score-picker}
"""
PREDICTED = "switchyard_router_prefix_predicted_cached_tokens_total"


def token_prompt(seed, blocks=PROMPT_BLOCKS):
    """`blocks` full blocks of token ids below the tiny vocabulary's special tokens (1000+)."""
    return random.Random(seed).choices(range(1000), k=blocks * BLOCK_SIZE)


@pytest.fixture
def fleet():
    engines = [EngineServer("--backend", "sim", "--sim-latency", "zero", "--max-model-len", 256,
                            "--max-num-batched-tokens", 256, "--num-gpu-blocks-override",
                            NUM_GPU_BLOCKS, *kv_events_flags(), kv_events=True,
                            env={"VLLM_SERVER_DEV_MODE": "1"})
               for _ in range(3)]
    for e in engines:
        e.spawn()
    try:
        for e in engines:
            e.wait_ready()
        router = Router(engines, scheduling=PRECISE_PROFILE)
    except BaseException:
        for e in engines:
            e.kill()
        raise
    yield router, engines
    router.stop()
    for e in engines:
        e.stop()


def probe(router, prompt):
    """Routes `prompt` as a request its engine refuses; returns (the picked endpoint, the
    tokens the router predicted cached there)."""
    before = metric_sum(router.metrics(), PREDICTED)
    r = requests.post(f"{router.url}/v1/completions", timeout=30,
                      json={"model": MODEL_NAME, "prompt": prompt, "max_tokens": 1,
                            "temperature": -1})
    assert r.status_code == 400, r.text
    return r.headers["x-switchyard-endpoint"], metric_sum(router.metrics(), PREDICTED) - before


def wait_routed(router, prompt, endpoint, cached_tokens):
    """Waits until the router's index (fed by KV events) sends `prompt` to `endpoint`,
    predicting `cached_tokens` cached there."""
    wait_until(lambda: probe(router, prompt) == (endpoint, cached_tokens),
               f"{endpoint} to be picked with {cached_tokens} cached tokens")


def wait_engines_idle(router):
    """Waits until the router sees every engine idle: no queue, nothing running, no KV block
    in use, nothing in flight from the router; the load scorers then score all alike."""
    def idle():
        return all(e["metrics"]["fresh"] and e["metrics"]["waiting_requests"] == 0
                   and e["metrics"]["running_requests"] == 0
                   and e["metrics"]["kv_cache_usage"] == 0 and e["active_requests"] == 0
                   for e in router.endpoints())
    wait_until(idle, "the router to see every engine idle")


def test_kv_events_steer_requests_to_the_engine_that_cached_the_prefix(fleet):
    router, engines = fleet
    names = [member_name(e) for e in engines]
    prompts = [token_prompt(f"warm-{i}") for i in range(len(engines))]
    assert len({tuple(p[:BLOCK_SIZE]) for p in prompts}) == len(prompts)  # no shared block
    # Cold: the router knows none of these prompts anywhere.
    for prompt in prompts:
        assert probe(router, prompt + [7, 8, 9])[1] == 0
    for engine, prompt in zip(engines, prompts):
        engine.complete(prompt)
    for name, prompt in zip(names, prompts):
        wait_routed(router, prompt + [7, 8, 9], name, len(prompt))

    client = openai.OpenAI(base_url=f"{router.url}/v1", api_key="x", timeout=30, max_retries=0)
    before = router.metrics()
    for turn in range(2):
        for name, prompt in zip(names, prompts):
            wait_engines_idle(router)
            raw = client.completions.with_raw_response.create(
                model=MODEL_NAME, prompt=prompt + [turn + 1] * 5, max_tokens=2, temperature=0)
            assert raw.headers["x-switchyard-endpoint"] == name
            completion = raw.parse()
            assert completion.choices[0].finish_reason == "length"
            # The engine agrees with the router: the whole warmed prompt was a cache hit.
            assert completion.usage.prompt_tokens_details.cached_tokens == len(prompt)
    after = router.metrics()
    for name, prompt in zip(names, prompts):
        assert (metric_sum(after, PREDICTED, endpoint=name) -
                metric_sum(before, PREDICTED, endpoint=name)) == 2 * len(prompt)


def assert_picks_spread(router, prompt):
    """The router predicts nothing cached for `prompt` anywhere and, the engines being idle,
    breaks the ties at random."""
    picked = set()
    for _ in range(12):
        endpoint, cached = probe(router, prompt)
        assert cached == 0
        picked.add(endpoint)
    assert len(picked) > 1


def test_evicted_prompt_loses_its_engine(fleet):
    router, engines = fleet
    warm = token_prompt("evict-me")
    engines[0].complete(warm)
    wait_routed(router, warm + [7, 8, 9], member_name(engines[0]), len(warm))
    # Fill engine 0's cache with other prompts: every block of `warm` is evicted (LRU), and
    # its BlockRemoved events take `warm` out of the router's index.
    for i in range(NUM_GPU_BLOCKS // PROMPT_BLOCKS + 1):
        engines[0].complete(token_prompt(f"filler-{i}"))
    wait_until(lambda: probe(router, warm + [7, 8, 9])[1] == 0,
               "the router to forget the evicted prompt")
    assert_picks_spread(router, warm + [7, 8, 9])


def test_reset_prefix_cache_clears_the_engine_in_the_router(fleet):
    router, engines = fleet
    prompts = [token_prompt(f"reset-{i}") for i in range(2)]
    for engine, prompt in zip(engines, prompts):
        engine.complete(prompt)
    for engine, prompt in zip(engines, prompts):
        wait_routed(router, prompt + [7, 8, 9], member_name(engine), len(prompt))
    r = requests.post(f"{engines[0].url}/reset_prefix_cache", timeout=30)
    assert r.status_code == 200, r.text
    # One AllBlocksCleared event: the router forgets engine 0's blocks and keeps engine 1's.
    wait_until(lambda: probe(router, prompts[0] + [7, 8, 9])[1] == 0,
               "the router to forget engine 0's cache")
    assert_picks_spread(router, prompts[0] + [7, 8, 9])
    assert probe(router, prompts[1] + [7, 8, 9]) == (member_name(engines[1]), len(prompts[1]))
    # The engine's own cache is empty too: the same prompt is a miss there now.
    direct = openai.OpenAI(base_url=engines[0].base_url, api_key="x", timeout=30, max_retries=0)
    usage = direct.completions.create(model=MODEL_NAME, prompt=prompts[0], max_tokens=1,
                                      temperature=0).usage
    assert usage.prompt_tokens_details.cached_tokens == 0
