#!/usr/bin/env python3
"""Peer-to-peer prefix pull: TTFT of a long prompt whose prefix another engine holds.

Two release-build engines A and B (`switchyard engine --model DIR --threads T --block-size 16
--max-model-len L --kv-transfer-config '{"kv_connector": "SwitchyardConnector", "kv_role":
"kv_both"}'`, one SWITCHYARD_KV_SECRET and one PYTHONHASHSEED), started once. Prompts are
random token ids of the model's vocabulary, seeded; every request is a streaming POST
/v1/completions with max_tokens 1, and TTFT is measured at the client, from the send to the
first chunk that carries a choice. The engines run one at a time (the cores are shared).

Each run takes a new cache_salt s, so no run sees another's blocks, and sends prompt P with
salt s three times:
  - recompute: to A, where nothing of P is cached: the whole prompt is prefilled;
  - pool: to A again: every full block but the last comes from A's pool;
  - peer: to B with x-kv-cache-source-host-port naming A's block server (what the router's
    p2p-source-producer sets): B looks the prompt up at A, reads the blocks over loopback TCP
    and computes only the last block.
Every request's source is checked on the engines' counters: recompute hits nothing, pool
hits A's pool for all the hit tokens, peer loads them all from A
(vllm:prompt_tokens_by_source_total{source="external_kv_transfer"} on B, with one
switchyard:kv_peer_pulls_total{outcome="loaded"}); a run where that fails is reported and
makes the exit status 1.

Prints each run, the medians and the ratios recompute / pool and recompute / peer (issue 21's
goal for every tier: >= 10x on bench-1b), as a markdown table and one JSON line.
Build first: cmake --preset release && ninja -C build/release switchyard. Bench models:
.venv/bin/python tools/gen_models.py --out models --seed 0 --only bench-135m (or bench-1b).

usage: .venv/bin/python bench/kv_peer_ttft.py [--bin PATH] [--model DIR] [--runs 5]
           [--prompt-tokens 4096] [--threads 2] [--json-out FILE] [--smoke]
"""
import argparse
import json
import os
import pathlib
import statistics
import sys

from kv_tier_ttft import REPO, WARM_UP_TOKENS, Engine, prompt, sample, stream_ttft, vocabulary

SECRET = "kv-peer-ttft"
HASH_SEED = "kv-peer-ttft-seed"
STEPS = ("recompute", "pool", "peer")


def counters(engine):
    text = engine.metrics()
    return {"pool_hits": sample(text, "vllm:prompt_tokens_by_source_total",
                                source="local_cache_hit"),
            "external": sample(text, "vllm:prompt_tokens_by_source_total",
                               source="external_kv_transfer"),
            "pulls": sample(text, "switchyard:kv_peer_pulls_total", outcome="loaded")}


def timed(engine, tokens, salt, a, what, headers=None):
    before = counters(engine)
    ttft = stream_ttft(engine, tokens, salt, a.request_timeout, what, headers)
    after = counters(engine)
    return {"ttft_ms": 1e3 * ttft, **{k: after[k] - before[k] for k in before}}


def one_run(a_engine, b_engine, a, i, p):
    salt = f"kv-peer-ttft-{a.seed}-{i}"
    run = {"salt": salt,
           "recompute": timed(a_engine, p, salt, a, f"run {i + 1} recompute"),
           "pool": timed(a_engine, p, salt, a, f"run {i + 1} pool"),
           "peer": timed(b_engine, p, salt, a, f"run {i + 1} peer",
                         {"x-kv-cache-source-host-port": a_engine.kv_address})}
    want = {"recompute": (0, 0, 0), "pool": (a.hit_tokens, 0, 0),
            "peer": (0, a.hit_tokens, 1)}
    run["problems"] = [
        f"{step}: pool hits {run[step]['pool_hits']:.0f}, external "
        f"{run[step]['external']:.0f}, pulls {run[step]['pulls']:.0f}; wanted {wanted}"
        for step, wanted in want.items()
        if (run[step]["pool_hits"], run[step]["external"], run[step]["pulls"]) != wanted]
    return run


def summary(runs, a):
    med = {s: statistics.median(r[s]["ttft_ms"] for r in runs) for s in STEPS}
    return {"model": a.model.name, "prompt_tokens": a.prompt_tokens, "runs": len(runs),
            "recompute_ms": med["recompute"], "pool_ms": med["pool"], "peer_ms": med["peer"],
            "recompute_over_pool": med["recompute"] / med["pool"],
            "recompute_over_peer": med["recompute"] / med["peer"]}


def markdown(s):
    return "\n".join([
        "| model | prompt tokens | recompute ms | pool ms | peer ms | recompute / pool "
        "| recompute / peer |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        f"| {s['model']} | {s['prompt_tokens']} | {s['recompute_ms']:.1f} | {s['pool_ms']:.1f} "
        f"| {s['peer_ms']:.1f} | {s['recompute_over_pool']:.1f}x "
        f"| {s['recompute_over_peer']:.1f}x |"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", type=pathlib.Path, default=REPO / "build/release/src/cli/switchyard")
    ap.add_argument("--model", type=pathlib.Path, default=REPO / "models/bench/bench-135m")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--prompt-tokens", type=int, default=4096)
    ap.add_argument("--block-size", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--start-timeout", type=float, default=300)
    ap.add_argument("--request-timeout", type=float, default=1800)
    ap.add_argument("--out-dir", type=pathlib.Path, default=REPO / "build/kv-peer-ttft")
    ap.add_argument("--json-out", type=pathlib.Path)
    ap.add_argument("--smoke", action="store_true",
                    help="seconds-long check on models/tiny-llama3: a 256-token prompt, 1 run, "
                         "1 thread; exits non-zero unless every request hit where it should")
    a = ap.parse_args()
    if a.smoke:
        a.model, a.prompt_tokens, a.runs, a.threads = REPO / "models/tiny-llama3", 256, 1, 1
        a.request_timeout = 60
    # A hit leaves at least one token to compute: the full blocks before the last token.
    a.hit_tokens = (a.prompt_tokens - 1) // a.block_size * a.block_size
    a.out_dir.mkdir(parents=True, exist_ok=True)
    ids = vocabulary(a.model)
    p = prompt(ids, a.seed, "P", a.prompt_tokens)
    kv = {"kv_connector": "SwitchyardConnector", "kv_role": "kv_both",
          "kv_connector_extra_config": {"io_timeout_ms": 60000}}
    argv = [str(a.bin), "engine", "--model", str(a.model), "--host", "127.0.0.1", "--port", "0",
            "--threads", str(a.threads), "--block-size", str(a.block_size), "--max-model-len",
            str(a.prompt_tokens + 512), "--kv-transfer-config", json.dumps(kv)]
    env = {**os.environ, "SWITCHYARD_KV_SECRET": SECRET, "PYTHONHASHSEED": HASH_SEED}
    print(" ".join(argv), flush=True)
    engines = []
    runs = []
    try:
        for name in ("a", "b"):
            engines.append(Engine(argv, a.out_dir / f"engine-{name}.log", a.start_timeout, env,
                                  lends=True))
        for engine in engines:  # first-request costs, cached nowhere P could hit
            stream_ttft(engine, prompt(ids, a.seed, "warm-up", WARM_UP_TOKENS), "warm-up",
                        a.request_timeout, "warm-up")
        for i in range(a.runs):
            runs.append(one_run(engines[0], engines[1], a, i, p))
            r = runs[-1]
            print(f"run {i + 1}/{a.runs}: recompute {r['recompute']['ttft_ms']:.1f} ms, pool "
                  f"{r['pool']['ttft_ms']:.1f} ms, peer {r['peer']['ttft_ms']:.1f} ms"
                  + (f"  PROBLEMS {r['problems']}" if r["problems"] else ""), flush=True)
    finally:
        for engine in engines:
            engine.stop()
    s = summary(runs, a)
    print()
    print(markdown(s))
    print(json.dumps(s))
    if a.json_out:
        a.json_out.write_text(json.dumps({"args": {k: str(v) for k, v in vars(a).items()},
                                          "summary": s, "runs": runs}, indent=1))
    return 1 if any(r["problems"] for r in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
