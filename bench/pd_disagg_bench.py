#!/usr/bin/env python3
"""Prefill/decode disaggregation: decode streams' inter-token latency while long prompts
arrive, 1 prefill + 1 decode engine against 2 aggregated engines.

Engines are simulated (`switchyard engine --backend sim --sim-kv-memory`): the forward pass is
the latency model calibrated on the CPU engine with bench-135m (sim/latency_model.h),
divided by --speedup (default 10, so that a run takes a minute), and the KV cache holds real
bytes of bench-135m's size, so a disaggregated prompt's KV (4096 tokens: 256 blocks, 90 MiB)
really moves from the prefill engine to the decode engine through kvx's peer protocol over
loopback TCP. Both fleets run behind `switchyard router`:
  aggregated: 2 engines, llm-d's default profile with precise prefix scoring;
  pd:         1 kv_producer (llm-d.ai/role=prefill) + 1 kv_consumer (role=decode), the
              disagg-profile-handler with prefix-based-pd-decider (nonCachedTokens 256: the
              short decode prompts stay on the decode engine, the long ones are prefilled on
              the prefill engine).
The load, the same for both: --streams decode streams (--stream-prompt-tokens prompts,
--stream-tokens output tokens, ignore_eos), each sending its next request when the last one
ended, for --seconds; and --long-prompts prompts of --long-tokens tokens (max_tokens
--long-output) sent one every --long-interval seconds from the start. Every prompt is random
token ids, seeded, distinct.

Reported per fleet: the decode streams' inter-token latency p50/p99/max (gaps between token
chunks, over every stream request), their output tokens per second, the long prompts' TTFT
p50, and for pd the prompts whose KV the decode engine loaded
(vllm:prompt_tokens_by_source_total{source="external_kv_transfer"}). Issue 21's goal: decode
ITL p99 >= 3x lower with P/D at equal throughput, TTFT p50 within 1.2x.

usage: .venv/bin/python bench/pd_disagg_bench.py [--bin PATH] [--model DIR] [--seconds 40]
           [--streams 16] [--long-prompts 24] [--long-interval 1.5] [--json-out FILE] [--smoke]
"""
import argparse
import concurrent.futures
import json
import os
import pathlib
import random
import statistics
import sys
import threading
import time
import urllib.request

import router_fleet
from kv_tier_ttft import sample, vocabulary

REPO = pathlib.Path(__file__).resolve().parents[1]
SCORERS = """  - {pluginRef: prefix-cache-scorer, weight: 3}
  - {pluginRef: queue-scorer, weight: 2}
  - {pluginRef: kv-cache-utilization-scorer, weight: 2}
  - {pluginRef: max-score-picker}
"""
PD_PROFILE = """plugins:
- type: prefix-cache-scorer
  parameters: {mode: precise, blockSizeTokens: 16}
- type: queue-scorer
- type: kv-cache-utilization-scorer
- type: max-score-picker
- type: decode-filter
- type: prefill-filter
- type: prefix-based-pd-decider
  parameters: {nonCachedTokens: 256}
- type: disagg-profile-handler
  parameters: {deciders: {prefill: prefix-based-pd-decider}}
schedulingProfiles:
- name: decode
  plugins:
  - {pluginRef: decode-filter}
""" + SCORERS + """- name: prefill
  plugins:
  - {pluginRef: prefill-filter}
""" + SCORERS


def start_fleet(a, fleet, log_dir):
    common = ["--block-size", "16", "--max-model-len", str(a.long_tokens + 512),
              "--max-num-batched-tokens", str(a.max_num_batched_tokens), "--sim-kv-memory",
              "--num-gpu-blocks-override", str(a.pool_blocks)]
    engines = []
    if fleet == "aggregated":
        for i in range(2):
            engines.append(router_fleet.SimEngine(
                a.bin, f"engine-{i}", log_dir, model=a.model, served="bench",
                latency=a.latency, kv_events=True, extra=common))
    else:
        for role, kv_role in (("prefill", "kv_producer"), ("decode", "kv_consumer")):
            kv = {"kv_connector": "SwitchyardConnector", "kv_role": kv_role,
                  "kv_connector_extra_config": {"io_timeout_ms": 60000}}
            e = router_fleet.SimEngine(
                a.bin, role, log_dir, model=a.model, served="bench", latency=a.latency,
                kv_events=True, extra=[*common, "--kv-transfer-config", json.dumps(kv)])
            e.labels = {"llm-d.ai/role": role}
            engines.append(e)
    for e in engines:
        e.wait_ready()
    scheduling = router_fleet.scoring_profile("precise") if fleet == "aggregated" else PD_PROFILE
    router = router_fleet.Router(a.bin, "router", log_dir, router_fleet.router_yaml(
        engines, "bench", scheduling, threads=2, tokenizer=a.model))
    router.wait_ready(len(engines))
    return engines, router


def run_fleet(a, fleet, ids):
    log_dir = a.out_dir / fleet
    log_dir.mkdir(parents=True, exist_ok=True)
    os.environ["SWITCHYARD_KV_SECRET"] = "pd-disagg-bench"
    procs = []
    try:
        engines, router = start_fleet(a, fleet, log_dir)
        procs += [*engines, router]
        before = sum(sample(urllib.request.urlopen(e.url + "/metrics").read()
                            .decode(), "vllm:prompt_tokens_by_source_total",
                            source="external_kv_transfer") for e in engines)
        rng = random.Random(a.seed)
        stop_at = time.perf_counter() + a.seconds
        gaps, tokens, long_ttfts, errors = [], [0], [], []
        lock = threading.Lock()

        def decode_stream(k):
            n = 0
            while time.perf_counter() < stop_at:
                prompt = [rng.choice(ids) for _ in range(a.stream_prompt_tokens)]
                try:
                    done = router_fleet.stream_completion(router.url, "bench", prompt,
                                                          a.stream_tokens, a.request_timeout)
                except Exception as e:  # a failed request is reported, not hidden
                    with lock:
                        errors.append(f"stream {k}: {e!r}")
                    return
                with lock:
                    gaps.extend(done["gaps"])
                    tokens[0] += done["chunks"]
                n += 1

        def long_prompt(k):
            time.sleep(k * a.long_interval)
            prompt = [rng.choice(ids) for _ in range(a.long_tokens)]
            try:
                ttft = router_fleet.stream_completion(router.url, "bench", prompt, a.long_output,
                                                      a.request_timeout)["ttft"]
            except Exception as e:
                with lock:
                    errors.append(f"long prompt {k}: {e!r}")
                return
            with lock:
                long_ttfts.append(ttft)

        start = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(a.streams + a.long_prompts) as pool:
            futures = [pool.submit(decode_stream, k) for k in range(a.streams)]
            futures += [pool.submit(long_prompt, k) for k in range(a.long_prompts)]
            for f in futures:
                f.result()
        elapsed = time.perf_counter() - start
        loaded = sum(sample(urllib.request.urlopen(e.url + "/metrics").read()
                            .decode(), "vllm:prompt_tokens_by_source_total",
                            source="external_kv_transfer") for e in engines) - before
    finally:
        router_fleet.stop_all(procs)
    gaps.sort()
    return {"fleet": fleet, "itl_p50_ms": 1e3 * statistics.median(gaps),
            "itl_p99_ms": 1e3 * gaps[min(len(gaps) - 1, int(0.99 * len(gaps)))],
            "itl_max_ms": 1e3 * gaps[-1],
            "decode_tokens_per_s": tokens[0] / elapsed,
            "long_ttft_p50_ms": 1e3 * statistics.median(long_ttfts) if long_ttfts else None,
            "long_prompts": len(long_ttfts), "loaded_tokens": loaded, "errors": errors,
            "seconds": elapsed}


def markdown(results):
    r = {x["fleet"]: x for x in results}
    lines = ["| fleet | decode ITL p50 ms | decode ITL p99 ms | decode ITL max ms "
             "| decode tok/s | long-prompt TTFT p50 ms | KV tokens moved |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for x in results:
        ttft = "-" if x["long_ttft_p50_ms"] is None else f"{x['long_ttft_p50_ms']:.0f}"
        lines.append(f"| {x['fleet']} | {x['itl_p50_ms']:.1f} | {x['itl_p99_ms']:.1f} "
                     f"| {x['itl_max_ms']:.1f} | {x['decode_tokens_per_s']:.0f} | {ttft} "
                     f"| {x['loaded_tokens']:.0f} |")
    if "aggregated" in r and "pd" in r:
        agg, pd = r["aggregated"], r["pd"]
        ttft = ("-" if not (pd["long_ttft_p50_ms"] and agg["long_ttft_p50_ms"]) else
                f"{pd['long_ttft_p50_ms'] / agg['long_ttft_p50_ms']:.2f}")
        lines.append(f"\nITL p99 aggregated / pd: {agg['itl_p99_ms'] / pd['itl_p99_ms']:.2f}x "
                     f"(goal >= 3); decode throughput pd / aggregated: "
                     f"{pd['decode_tokens_per_s'] / agg['decode_tokens_per_s']:.2f}; long TTFT "
                     f"p50 pd / aggregated: {ttft} (goal <= 1.2)")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    router_fleet.add_sim_bench_args(ap, "pd-disagg")
    ap.add_argument("--seconds", type=float, default=40)
    ap.add_argument("--streams", type=int, default=16)
    ap.add_argument("--stream-prompt-tokens", type=int, default=64)
    ap.add_argument("--stream-tokens", type=int, default=128)
    ap.add_argument("--long-prompts", type=int, default=24)
    ap.add_argument("--long-tokens", type=int, default=4096)
    ap.add_argument("--long-output", type=int, default=16)
    ap.add_argument("--long-interval", type=float, default=1.5)
    ap.add_argument("--max-num-batched-tokens", type=int, default=2048)
    ap.add_argument("--pool-blocks", type=int, default=1024)
    ap.add_argument("--fleets", default="aggregated,pd")
    ap.add_argument("--smoke", action="store_true",
                    help="seconds-long check on models/tiny-llama3 with zero latency; exits "
                         "non-zero unless the pd fleet moved every long prompt's KV")
    a = ap.parse_args()
    if a.smoke:
        a.model, a.seconds, a.streams, a.stream_tokens = REPO / "models/tiny-llama3", 2, 2, 8
        a.long_prompts, a.long_tokens, a.long_interval, a.pool_blocks = 2, 512, 0.5, 128
        a.latency = "zero"
    else:
        a.latency = router_fleet.calibrated_latency(a.speedup)
    a.out_dir.mkdir(parents=True, exist_ok=True)
    ids = vocabulary(a.model)
    print(f"{a.streams} decode streams ({a.stream_prompt_tokens} + {a.stream_tokens} tokens), "
          f"{a.long_prompts} prompts of {a.long_tokens} tokens every {a.long_interval} s, "
          f"{a.seconds} s; latency {a.latency}", flush=True)
    results = []
    for fleet in a.fleets.split(","):
        r = run_fleet(a, fleet, ids)
        results.append(r)
        print(f"{fleet}: ITL p50 {r['itl_p50_ms']:.1f} ms p99 {r['itl_p99_ms']:.1f} ms, "
              f"{r['decode_tokens_per_s']:.0f} decode tok/s, long TTFT p50 "
              f"{r['long_ttft_p50_ms']} ms, {r['loaded_tokens']:.0f} KV tokens moved"
              + (f", ERRORS {r['errors']}" if r["errors"] else ""), flush=True)
    print()
    print(markdown(results))
    router_fleet.write_results(a, results)
    if any(r["errors"] for r in results):
        return 1
    pd = next((r for r in results if r["fleet"] == "pd"), None)
    hit_tokens = (a.long_tokens - 1) // 16 * 16
    if a.smoke and pd is not None and pd["loaded_tokens"] < a.long_prompts * hit_tokens:
        print(f"SMOKE FAILED: the pd fleet moved {pd['loaded_tokens']:.0f} KV tokens, not "
              f"{a.long_prompts * hit_tokens}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
