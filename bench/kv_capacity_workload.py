#!/usr/bin/env python3
"""KV tiers under a capacity workload: multi-turn conversations whose KV is 4x the pools.

Two simulated engines (`switchyard engine --backend sim --sim-kv-memory`: the forward pass
is the latency model, but the KV cache holds real bytes of bench-135m's size, which the
tiers copy for real) behind `switchyard router` with precise prefix-cache scoring fed by
the engines' KV events (llm-d's precise guide: prefix 3, queue 2, KV utilization 2; without the
last with --without-kv-utilization; with --session-affinity W, each turn also carries its
conversation's `x-session-id` and the profile a session-affinity-scorer (session_id strategy)
of weight W, which keeps a conversation on the engine of its last turn as a chat front end
that sends session ids would). The
latency model is the default calibration of the CPU engine on bench-135m scaled 10x faster
(--speedup), so that a run takes minutes: prefill 270 us a token.

The workload: --conversations conversations, each opened by a shared --system-tokens
system prompt, go through --turns turns in rounds (every conversation's turn t, in a
shuffled order, before any turn t+1), --concurrency requests in flight. A turn's prompt is
the conversation so far plus --user-tokens new tokens; the answer is --answer-tokens long
(max_tokens, ignore_eos), and the next turn appends --answer-tokens client-chosen tokens as
the assistant's part (the prompt's own blocks are what the next turn can reuse). Prompts are
random token ids, seeded, the same in every configuration.

Configurations, each on fresh engines and router:
  unbounded: pools that hold every conversation (the hit rate to match);
  off:       pools of a quarter of the workload's KV in all, no tier;
  host:      the same pools, a host tier per engine that holds everything;
  host+disk: the same pools, a host tier of half the pool, a disk tier that holds everything;
  shared:    the same pools, one host tier both engines share (/dev/shm).
Reported per configuration: the prefix hit rate (prompt tokens not computed, from the
engines' vllm:prompt_tokens_by_source_total: cache hits and tier loads over all prompt
tokens), TTFT p50/p90 at the client (streaming, first chunk with a choice), requests per
second, the tier loads, and the share of turns the router sent to another engine than the
conversation's previous turn (whose per-engine tier then misses). Issue 21's goals: hit rate >= 90% of unbounded's, TTFT p50 >= 3x
better than off.

usage: .venv/bin/python bench/kv_capacity_workload.py [--bin PATH] [--model DIR]
           [--conversations 32] [--turns 6] [--configs off,host,...] [--json-out FILE]
           [--without-kv-utilization] [--session-affinity WEIGHT] [--smoke]
"""
import argparse
import concurrent.futures
import json
import math
import os
import pathlib
import random
import statistics
import sys
import time
import urllib.request

import router_fleet
from kv_tier_ttft import sample, vocabulary

REPO = pathlib.Path(__file__).resolve().parents[1]
CONFIGS = ("unbounded", "off", "host", "host+disk", "shared")


def block_bytes(model_dir, block_size):
    c = json.loads((model_dir / "config.json").read_text())
    head_dim = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
    kv_heads = c.get("num_key_value_heads") or c["num_attention_heads"]
    return 2 * c["num_hidden_layers"] * block_size * kv_heads * head_dim * 2  # f16 K and V


class Workload:
    """The conversations' token ids, fixed by the seed."""

    def __init__(self, a, ids):
        rng = random.Random(a.seed)
        system = [rng.choice(ids) for _ in range(a.system_tokens)]
        self.turns = []  # [conversation][turn] -> prompt tokens
        for _ in range(a.conversations):
            history, prompts = list(system), []
            for _ in range(a.turns):
                history += [rng.choice(ids) for _ in range(a.user_tokens)]
                prompts.append(list(history))
                history += [rng.choice(ids) for _ in range(a.answer_tokens)]
            self.turns.append(prompts)
        self.order = []  # per round, the conversations in the order they are sent
        for _ in range(a.turns):
            round_order = list(range(a.conversations))
            rng.shuffle(round_order)
            self.order.append(round_order)

    def total_tokens(self):
        return sum(len(prompts[-1]) for prompts in self.turns)


def engine_flags(a, config, shared_name):
    total_blocks = math.ceil(a.workload_tokens / a.block_size)
    # KV = 4x both pools, but a pool must hold one whole conversation.
    pool = max(math.ceil(a.max_model_len / a.block_size) + 4, math.ceil(total_blocks / 4 / 2))
    all_gib = 1.25 * total_blocks * a.block_bytes / 2**30
    if config == "unbounded":
        pool = total_blocks + 64
    flags = ["--block-size", str(a.block_size), "--max-model-len", str(a.max_model_len),
             "--sim-kv-memory", "--num-gpu-blocks-override", str(pool)]
    if config == "host":
        flags += ["--kv-offloading-size", repr(all_gib)]
    elif config == "host+disk":
        flags += ["--kv-offloading-size", repr(pool / 2 * a.block_bytes / 2**30),
                  "--kv-offloading-disk-path", str(a.out_dir / "disk"),
                  "--kv-offloading-disk-size", repr(all_gib)]
    elif config == "shared":
        flags += ["--kv-offloading-size", repr(all_gib), "--kv-offloading-shared", shared_name]
    return flags, pool


def engine_counters(engines):
    totals = {"computed": 0.0, "hit": 0.0, "loaded": 0.0, "tier_loads": 0.0}
    for e in engines:
        text = urllib.request.urlopen(e.url + "/metrics", timeout=10).read().decode()
        totals["computed"] += sample(text, "vllm:prompt_tokens_by_source_total",
                                     source="local_compute")
        totals["hit"] += sample(text, "vllm:prompt_tokens_by_source_total",
                                source="local_cache_hit")
        totals["loaded"] += sample(text, "vllm:prompt_tokens_by_source_total",
                                   source="external_kv_transfer")
        totals["tier_loads"] += sample(text, "switchyard:kv_tier_loads_total", outcome="loaded")
    return totals


def run_config(a, config, workload, shared_name):
    flags, pool = engine_flags(a, config, shared_name)
    log_dir = a.out_dir / config.replace("+", "-")
    log_dir.mkdir(parents=True, exist_ok=True)
    env_seed = {"PYTHONHASHSEED": "kv-capacity"}  # the shared tier needs equal block hashes
    os.environ.update(env_seed)
    procs = []
    try:
        engines = [router_fleet.SimEngine(a.bin, f"engine-{i}", log_dir, model=a.model,
                                          served="bench", latency=a.latency, kv_events=True,
                                          extra=flags) for i in range(2)]
        procs += engines
        for e in engines:
            e.wait_ready()
        affinity = [("session-affinity-scorer", "{strategy: session_id}", a.session_affinity)]
        scheduling = router_fleet.scoring_profile(
            "precise", scorers=affinity if a.session_affinity else (),
            kv_utilization=not a.without_kv_utilization)
        router = router_fleet.Router(a.bin, "router", log_dir, router_fleet.router_yaml(
            engines, "bench", scheduling, threads=2, tokenizer=a.model))
        procs.append(router)
        router.wait_ready(len(engines))
        before = engine_counters(engines)
        ttfts = []
        where = [None] * a.conversations  # the engine of each conversation's last turn
        moved = 0
        start = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(a.concurrency) as pool_exec:
            for t, order in enumerate(workload.order):
                futures = [pool_exec.submit(router_fleet.stream_completion, router.url, "bench",
                                            workload.turns[c][t], a.answer_tokens,
                                            a.request_timeout,
                                            {"x-session-id": f"conversation-{c}"})
                           for c in order]
                for c, f in zip(order, futures):
                    done = f.result()
                    ttfts.append(done["ttft"])
                    moved += t > 0 and done["endpoint"] != where[c]
                    where[c] = done["endpoint"]
        elapsed = time.perf_counter() - start
        after = engine_counters(engines)
    finally:
        router_fleet.stop_all(procs)
    d = {k: after[k] - before[k] for k in after}
    prompt = d["computed"] + d["hit"] + d["loaded"]
    ttfts.sort()
    return {"config": config, "pool_blocks_per_engine": pool, "requests": len(ttfts),
            "hit_rate": (d["hit"] + d["loaded"]) / prompt if prompt else 0.0,
            "ttft_p50_ms": 1e3 * statistics.median(ttfts),
            "ttft_p90_ms": 1e3 * ttfts[min(len(ttfts) - 1, int(0.9 * len(ttfts)))],
            "requests_per_s": len(ttfts) / elapsed, "loaded_tokens": d["loaded"],
            # Turns the router sent to another engine than the conversation's last turn.
            "moved_turns": moved / (a.conversations * (a.turns - 1)),
            "tier_loads": d["tier_loads"], "seconds": elapsed}


def markdown(results):
    base = {r["config"]: r for r in results}
    lines = ["| config | pool blocks / engine | hit rate | vs unbounded | TTFT p50 ms "
             "| TTFT p90 ms | off p50 / this p50 | req/s | tier loads | turns moved |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in results:
        unbounded = base.get("unbounded", {}).get("hit_rate")
        off = base.get("off", {}).get("ttft_p50_ms")
        lines.append(
            f"| {r['config']} | {r['pool_blocks_per_engine']} | {100 * r['hit_rate']:.1f}% "
            f"| {'%.2f' % (r['hit_rate'] / unbounded) if unbounded else '-'} "
            f"| {r['ttft_p50_ms']:.0f} | {r['ttft_p90_ms']:.0f} "
            f"| {'%.2fx' % (off / r['ttft_p50_ms']) if off else '-'} "
            f"| {r['requests_per_s']:.2f} | {r['tier_loads']:.0f} "
            f"| {100 * r['moved_turns']:.0f}% |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    router_fleet.add_sim_bench_args(ap, "kv-capacity")
    ap.add_argument("--conversations", type=int, default=32)
    ap.add_argument("--turns", type=int, default=6)
    ap.add_argument("--system-tokens", type=int, default=256)
    ap.add_argument("--user-tokens", type=int, default=160)
    ap.add_argument("--answer-tokens", type=int, default=16)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--block-size", type=int, default=16)
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--without-kv-utilization", action="store_true",
                    help="leave the kv-cache-utilization-scorer out of the router's profile "
                         "(with tiers a full pool is no sign of load)")
    ap.add_argument("--session-affinity", type=int, default=0, metavar="WEIGHT",
                    help="add a session-affinity-scorer of this weight to the router's profile "
                         "(turns carry their conversation's x-session-id either way; 0: none)")
    ap.add_argument("--smoke", action="store_true",
                    help="seconds-long check on models/tiny-llama3: 4 conversations of 3 turns, "
                         "zero latency; exits non-zero unless every tier configuration hits "
                         "more than tiers off")
    a = ap.parse_args()
    if a.smoke:
        a.model, a.conversations, a.turns, a.concurrency = REPO / "models/tiny-llama3", 12, 3, 2
        a.system_tokens, a.user_tokens, a.request_timeout = 64, 48, 60
        a.latency = "zero"
    else:
        a.latency = router_fleet.calibrated_latency(a.speedup)
    configs = a.configs.split(",")
    for c in configs:
        if c not in CONFIGS:
            ap.error(f"unknown config {c}; known: {', '.join(CONFIGS)}")
    a.block_bytes = block_bytes(a.model, a.block_size)
    workload = Workload(a, vocabulary(a.model))
    a.workload_tokens = workload.total_tokens()
    a.max_model_len = max(len(p[-1]) for p in workload.turns) + a.answer_tokens + 64
    a.out_dir.mkdir(parents=True, exist_ok=True)
    print(f"{a.conversations} conversations x {a.turns} turns, {a.workload_tokens} tokens of "
          f"KV in all ({a.workload_tokens / a.block_size * a.block_bytes / 2**20:.0f} MiB); "
          f"latency {a.latency}", flush=True)
    results = []
    for config in configs:
        r = run_config(a, config, workload, f"kv-capacity-{os.getpid()}")
        results.append(r)
        print(f"{config}: hit rate {100 * r['hit_rate']:.1f}%, TTFT p50 {r['ttft_p50_ms']:.0f} ms "
              f"p90 {r['ttft_p90_ms']:.0f} ms, {r['requests_per_s']:.2f} req/s, "
              f"{r['tier_loads']:.0f} tier loads, {r['seconds']:.1f} s", flush=True)
    print()
    print(markdown(results))
    router_fleet.write_results(a, results)
    if a.smoke:
        off = next((r["hit_rate"] for r in results if r["config"] == "off"), None)
        tiers = [r for r in results if r["config"] not in ("off", "unbounded")]
        if off is not None and any(r["hit_rate"] <= off for r in tiers):
            print("SMOKE FAILED: a tier configuration hit no more than tiers off")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
