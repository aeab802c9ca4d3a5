#!/usr/bin/env python3
"""Routing quality: TTFT and output throughput of four routing strategies over 8 simulated
engines, on a multi-tenant shared-prefix workload at rising request rates.

Fleet, the same for every strategy and restarted (cold caches) for each: N (default 8)
`switchyard engine --backend sim` with a scaled latency model (--sim-latency; the default
calibration is a 135M model on this 2-core CPU, whose 2.7 ms per prefill token would make
each level take minutes; the default here divides every term by 9: prefill 0.3 ms/token,
step overhead 1.94 ms, decode 0.83 ms per sequence, attention 3.9 us per context token),
`--num-gpu-blocks-override B` (B x 16 tokens of KV cache each: less than all tenants'
prefixes, more than an eighth of them), KV events on, a long-context copy of tiny-llama3
(router_fleet.long_context_model). One `switchyard router` (listen.threads 2) in front,
with one of these EndpointPickerConfigs:
  - precise:     prefix-cache-scorer (mode precise, fed by the engines' KV events) 3,
                 queue-scorer 2, kv-cache-utilization-scorer 2, max-score-picker
  - approximate: prefix-cache-scorer (mode approximate: the router's own LRU of what it
                 routed) 3, queue-scorer 2, kv-cache-utilization-scorer 2, max-score-picker
                 (llm-d's Helm default profile)
  - load-only:   queue-scorer 2, kv-cache-utilization-scorer 2, max-score-picker
  - round-robin: round-robin-picker (ours; llm-d has none)

Workload (seeded; identical for every strategy): TENANTS tenants, each with a system prefix
of 1000-2000 random token ids. Conversations start as a Poisson process; each belongs to a
random tenant and has TURNS turns; turn k is sent at the conversation's start + k x GAP
seconds (open loop: it does not wait for turn k-1), and its prompt is the tenant prefix +
all earlier user turns (64-160 tokens each) and assistant turns (MAX_TOKENS tokens each,
fixed ids standing in for the answer) + its own user turn. Prompts are token-id arrays
(exact lengths, no tokenizer); max_tokens MAX_TOKENS with ignore_eos, streamed. The request
rate of a level is conversation rate x TURNS; each level starts conversations for WINDOW
seconds; requests still unanswered LEVEL_TIMEOUT s after the level's last arrival are
cancelled and count as not served (their TTFT as infinite in the percentiles).

Per strategy and level: TTFT p50/p90 (send to first token chunk, all requests of the
level) and output tokens/s (completion tokens of the level's requests / time from its first
send to its last response). Runs interleave strategies (rotating the order).

usage: .venv/bin/python bench/router_quality_bench.py [--bin PATH] [--rates 4,8,16,24]
           [--runs 3] [--window 15]
"""
import argparse
import asyncio
import json
import math
import pathlib
import random
import tempfile
import time

import aiohttp

from router_fleet import (Router, SimEngine, default_bin, load_average, long_context_model,
                          median, router_yaml, scoring_profile, stop_all)

MODEL = "bench"
VOCAB = 1000

PROFILES = {
    "precise": scoring_profile("precise"),
    "approximate": scoring_profile("approximate"),
    "load-only": scoring_profile(),
    "round-robin": "plugins:\n- type: round-robin-picker\n",
}

SCALED_LATENCY = ("overhead_ms=1.944,prefill_us_per_token=300,decode_ms_per_seq=0.833,"
                  "attention_us_per_context_token=3.89")


def ids(rng, n):
    return [rng.randrange(VOCAB) for _ in range(n)]


def make_schedule(a, rate, level_seed, tenants):
    """[(send_time_s, prompt_ids)] for one level, sorted by time."""
    rng = random.Random(level_seed)
    conv_rate = rate / a.turns
    out, t = [], rng.expovariate(conv_rate)
    while t < a.window:
        prefix = tenants[rng.randrange(len(tenants))]
        history = list(prefix)
        for k in range(a.turns):
            history += ids(rng, rng.randint(64, 160))  # the user's turn
            out.append((t + k * a.gap, list(history)))
            history += [7] * a.max_tokens  # the assistant's answer, as fixed ids
        t += rng.expovariate(conv_rate)
    out.sort(key=lambda x: x[0])
    return out


async def one(http, url, prompt, max_tokens, t_send, origin):
    body = {"model": MODEL, "prompt": prompt, "max_tokens": max_tokens, "ignore_eos": True,
            "stream": True, "stream_options": {"include_usage": True}}
    delay = origin + t_send - time.monotonic()
    if delay > 0:
        await asyncio.sleep(delay)
    r = {"ttft": None, "tokens": 0, "end": None, "error": None, "endpoint": None}
    t0 = time.monotonic()
    try:
        async with http.post(url, json=body) as resp:
            r["endpoint"] = resp.headers.get("x-switchyard-endpoint")
            if resp.status != 200:
                r["error"] = f"{resp.status}: {(await resp.text())[:200]}"
                return r
            async for raw in resp.content:
                line = raw.strip()
                if not line.startswith(b"data:") or line == b"data: [DONE]":
                    continue
                chunk = json.loads(line[5:])
                if chunk.get("usage"):
                    r["tokens"] = chunk["usage"]["completion_tokens"]
                # A token chunk: a choice with text, or without a finish_reason (a token
                # whose text is held back until its UTF-8 sequence completes).
                if r["ttft"] is None and any(c.get("text") or not c.get("finish_reason")
                                             for c in chunk.get("choices") or []):
                    r["ttft"] = time.monotonic() - t0
        r["end"] = time.monotonic()
    except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as e:
        r["error"] = repr(e)
    return r


async def run_level(url, schedule, a):
    conn = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=None, sock_read=a.level_timeout)
    async with aiohttp.ClientSession(connector=conn, timeout=timeout) as http:
        origin = time.monotonic() + 0.5
        tasks = [asyncio.ensure_future(one(http, url, p, a.max_tokens, t, origin))
                 for t, p in schedule]
        last_arrival = origin + schedule[-1][0]
        done, pending = await asyncio.wait(
            tasks, timeout=last_arrival + a.level_timeout - time.monotonic())
        for p in pending:
            p.cancel()
        results = [t.result() if t in done and not t.cancelled() else
                   {"ttft": None, "tokens": 0, "end": None, "error": "timeout"} for t in tasks]
    ends = [r["end"] for r in results if r["end"]]
    ttfts = sorted(r["ttft"] if r["ttft"] is not None else math.inf for r in results)
    pct = lambda q: ttfts[min(len(ttfts) - 1, int(q * len(ttfts)))]
    span = (max(ends) - origin) if ends else None
    tokens = sum(r["tokens"] for r in results)
    return {"requests": len(results), "served": sum(1 for r in results if r["end"]),
            "errors": sum(1 for r in results if r["error"]),
            "first_error": next((r["error"] for r in results if r["error"]), None),
            "ttft_p50_s": pct(0.5), "ttft_p90_s": pct(0.9),
            "output_tok_s": tokens / span if span else 0.0, "span_s": span}


def start_fleet(a, out, model, tag):
    engines = [SimEngine(a.bin, f"{tag}-engine-{i}", out, model=model, served=MODEL,
                         latency=a.sim_latency, kv_events=True,
                         extra=["--max-model-len", "16384", "--num-gpu-blocks-override",
                                str(a.blocks_per_engine)])
               for i in range(a.engines)]
    for e in engines:
        e.wait_ready()
    return engines


def fmt_s(v):
    return "inf" if v is None or v == math.inf else f"{v:.3f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", type=pathlib.Path, default=default_bin())
    ap.add_argument("--engines", type=int, default=8)
    ap.add_argument("--strategies", default="precise,approximate,load-only,round-robin")
    ap.add_argument("--rates", default="4,8,16,24", help="requests/s per level")
    ap.add_argument("--tenants", type=int, default=32)
    ap.add_argument("--turns", type=int, default=4)
    ap.add_argument("--gap", type=float, default=2.0, help="seconds between a conversation's turns")
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--window", type=float, default=15, help="seconds of arrivals per level")
    ap.add_argument("--level-timeout", type=float, default=30)
    ap.add_argument("--blocks-per-engine", type=int, default=2048)
    ap.add_argument("--sim-latency", default=SCALED_LATENCY)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=pathlib.Path, default=None)
    ap.add_argument("--json-out", type=pathlib.Path, default=None)
    a = ap.parse_args()
    out = a.out or pathlib.Path(tempfile.mkdtemp(prefix="router-quality-bench-"))
    out.mkdir(parents=True, exist_ok=True)
    print(f"logs in {out}; load average at start {load_average()}", flush=True)
    model = long_context_model(out)
    strategies = a.strategies.split(",")
    rates = [float(r) for r in a.rates.split(",")]
    trng = random.Random(a.seed)
    tenants = [ids(trng, trng.randint(1000, 2000)) for _ in range(a.tenants)]

    results = {s: {r: [] for r in rates} for s in strategies}
    for run in range(a.runs):
        order = strategies[run % len(strategies):] + strategies[:run % len(strategies)]
        for s in order:
            procs = []
            try:
                engines = start_fleet(a, out, model, f"r{run}-{s}")
                procs += engines
                router = Router(a.bin, f"r{run}-{s}-router", out,
                                router_yaml(engines, MODEL, PROFILES[s], threads=2))
                procs.append(router)
                router.wait_ready(len(engines))
                for li, rate in enumerate(rates):
                    schedule = make_schedule(a, rate, a.seed * 1000 + li, tenants)
                    load0 = load_average()
                    r = asyncio.run(run_level(router.url + "/v1/completions", schedule, a))
                    r["load"] = [load0, load_average()]
                    results[s][rate].append(r)
                    print(f"run {run + 1} {s} {rate:g} req/s: {json.dumps(r)}", flush=True)
            finally:
                stop_all(procs)

    print(f"\nmedians of {a.runs} runs; {a.engines} sim engines ({a.sim_latency}), "
          f"{a.blocks_per_engine} KV blocks each; {a.tenants} tenants, {a.turns} turns, "
          f"gap {a.gap:g} s, max_tokens {a.max_tokens}, {a.window:g} s of arrivals per level")
    print("\n| rate req/s | strategy | TTFT p50 s | TTFT p90 s | output tok/s | served / sent |")
    print("| ---: | --- | ---: | ---: | ---: | ---: |")
    table = {}
    for rate in rates:
        for s in strategies:
            rs = results[s][rate]
            row = {"p50": median([r["ttft_p50_s"] for r in rs]),
                   "p90": median([r["ttft_p90_s"] for r in rs]),
                   "tok_s": median([r["output_tok_s"] for r in rs]),
                   "served": sum(r["served"] for r in rs), "sent": sum(r["requests"] for r in rs)}
            table[(s, rate)] = row
            print(f"| {rate:g} | {s} | {fmt_s(row['p50'])} | {fmt_s(row['p90'])} | "
                  f"{row['tok_s']:.0f} | {row['served']} / {row['sent']} |")
    if "precise" in strategies and "round-robin" in strategies:
        print("\n| rate req/s | precise vs round-robin: TTFT p90 ratio | throughput ratio |")
        print("| ---: | ---: | ---: |")
        for rate in rates:
            p, rr = table[("precise", rate)], table[("round-robin", rate)]
            ratio = (rr["p90"] / p["p90"]) if p["p90"] not in (None, 0, math.inf) else None
            tput = p["tok_s"] / rr["tok_s"] if rr["tok_s"] else None
            print(f"| {rate:g} | {'-' if ratio is None else f'{ratio:.1f}x'} | "
                  f"{'-' if tput is None else f'{tput:.2f}x'} |")
    if a.json_out:
        a.json_out.write_text(json.dumps(
            {"args": {k: str(v) for k, v in vars(a).items()},
             "results": {s: {str(r): v for r, v in d.items()} for s, d in results.items()}},
            indent=1, default=str))


if __name__ == "__main__":
    main()
