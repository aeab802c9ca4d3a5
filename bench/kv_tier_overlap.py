#!/usr/bin/env python3
"""KV tier overlap: decode inter-token latency of S streams while the host tier absorbs the
blocks a stream of long prompts leaves in the pool, vs the same traffic without a tier.

Issue 21's "overlap" benchmark (goal: ITL within 5%). Per run, for each mode in turn
(`off`, then `on`; the order alternates run by run) one release-build engine is started:
`switchyard engine --model DIR --threads T --max-model-len L --num-gpu-blocks-override B`,
plus `--kv-offloading-size G` when on. Then S streaming completions (prompts of 32 seeded
random tokens, max_tokens N, ignore_eos) decode side by side while one background client
sends distinct prompts of P tokens (max_tokens 1) back to back. Each background prompt's
blocks are released when it ends: with the tier on every one of them is copied to host
memory (write-behind, on the tier's transfer thread) and the pool evicts older ones, so the
tier stores at the full rate the prefills produce. Without the tier the same prefills run
and the blocks are simply dropped, so the difference between the modes is the copies' cost.
ITL is every gap between two token chunks of one stream at the client; p50 and p99 over all
gaps of a mode, medians over runs, and the ratio on / off.

Build first: cmake --preset release && ninja -C build/release switchyard. Bench models:
.venv/bin/python tools/gen_models.py --out models --seed 0 --only bench-135m.

usage: .venv/bin/python bench/kv_tier_overlap.py [--bin PATH] [--model DIR] [--runs 3]
           [--streams 8] [--decode-tokens 128] [--prompt-tokens 1024] [--threads 2]
           [--json-out FILE] [--smoke]
"""
import argparse
import http.client
import json
import math
import pathlib
import statistics
import sys
import threading
import time
import urllib.parse

from kv_tier_ttft import REPO, Engine, kv_bytes_per_token, prompt, sample, vocabulary


def stream(engine, tokens, max_tokens, timeout_s):
    """One streaming completion; returns the arrival times of its token chunks."""
    body = json.dumps({"model": engine.name, "prompt": tokens, "max_tokens": max_tokens,
                       "temperature": 0, "stream": True, "ignore_eos": True}).encode()
    url = urllib.parse.urlsplit(engine.url)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=timeout_s)
    times = []
    try:
        conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        if resp.status != 200:
            raise SystemExit(f"HTTP {resp.status}: {resp.read()[:300]!r}")
        for raw in resp:
            line = raw.strip()
            if line.startswith(b"data:") and line != b"data: [DONE]":
                if json.loads(line[5:]).get("choices"):
                    times.append(time.perf_counter())
    finally:
        conn.close()
    return times


def pct(values, q):
    s = sorted(values)
    return s[min(len(s) - 1, int(math.ceil(q * len(s))) - 1)]


def one_mode(a, ids, mode, run):
    argv = [str(a.bin), "engine", "--model", str(a.model), "--host", "127.0.0.1", "--port", "0",
            "--threads", str(a.threads), "--max-model-len", str(a.max_model_len),
            "--num-gpu-blocks-override", str(a.pool_blocks)]
    if mode == "on":
        argv += ["--kv-offloading-size", repr(a.tier_gib)]
    engine = Engine(argv, a.out_dir / f"engine-{mode}-{run}.log", a.start_timeout)
    try:
        stream(engine, prompt(ids, a.seed, "warm-up", 32), 4, a.request_timeout)
        done = threading.Event()
        background = {"prompts": 0}

        def feed():
            k = 0
            while True:  # at least one, however fast the streams are
                stream(engine, prompt(ids, a.seed, f"bg/{run}/{k}", a.prompt_tokens), 1,
                       a.request_timeout)
                k += 1
                if done.is_set():
                    break
            background["prompts"] = k

        feeder = threading.Thread(target=feed)
        feeder.start()
        results = [None] * a.streams

        def decode(i):
            results[i] = stream(engine, prompt(ids, a.seed, f"s/{run}/{i}", 32), a.decode_tokens,
                                a.request_timeout)

        decoders = [threading.Thread(target=decode, args=(i,)) for i in range(a.streams)]
        for t in decoders:
            t.start()
        for t in decoders:
            t.join()
        done.set()
        feeder.join()
        metrics = engine.metrics()
    finally:
        engine.stop()
    gaps = [1e3 * (b - a_) for times in results for a_, b in zip(times, times[1:])]
    return {"mode": mode, "itl_p50_ms": pct(gaps, 0.5), "itl_p99_ms": pct(gaps, 0.99),
            "gaps": len(gaps), "background_prompts": background["prompts"],
            "stored_blocks": sample(metrics, "switchyard:kv_tier_stored_blocks_total",
                                    medium="CPU"),
            "evicted_blocks": sample(metrics, "switchyard:kv_tier_evicted_blocks_total",
                                     medium="CPU")}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", type=pathlib.Path, default=REPO / "build/release/src/cli/switchyard")
    ap.add_argument("--model", type=pathlib.Path, default=REPO / "models/bench/bench-135m")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--streams", type=int, default=8)
    ap.add_argument("--decode-tokens", type=int, default=128)
    ap.add_argument("--prompt-tokens", type=int, default=1024)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--start-timeout", type=float, default=300)
    ap.add_argument("--request-timeout", type=float, default=1800)
    ap.add_argument("--out-dir", type=pathlib.Path, default=REPO / "build/kv-tier-overlap")
    ap.add_argument("--json-out", type=pathlib.Path)
    ap.add_argument("--smoke", action="store_true",
                    help="seconds-long check on models/tiny-llama3 (1 run, 2 streams)")
    a = ap.parse_args()
    if a.smoke:
        a.model, a.runs, a.streams, a.decode_tokens, a.prompt_tokens = (
            REPO / "models/tiny-llama3", 1, 2, 32, 128)
    a.max_model_len = a.prompt_tokens + 64
    # The streams' blocks and two background prompts': the pool turns over every few prompts.
    per_stream = math.ceil((32 + a.decode_tokens) / 16)
    a.pool_blocks = a.streams * per_stream + 2 * math.ceil(a.max_model_len / 16) + 8
    a.tier_gib = 4 * a.pool_blocks * 16 * kv_bytes_per_token(a.model) / 2**30
    a.out_dir.mkdir(parents=True, exist_ok=True)
    ids = vocabulary(a.model)
    runs = []
    for run in range(a.runs):
        modes = ("off", "on") if run % 2 == 0 else ("on", "off")
        record = {m: one_mode(a, ids, m, run) for m in modes}
        runs.append(record)
        print(f"run {run + 1}/{a.runs}: " + "; ".join(
            f"{m}: ITL p50 {r['itl_p50_ms']:.2f} ms p99 {r['itl_p99_ms']:.2f} ms "
            f"({r['background_prompts']} background prompts, {r['stored_blocks']:.0f} blocks "
            f"stored)" for m, r in record.items()), flush=True)
    med = {m: {k: statistics.median(r[m][k] for r in runs) for k in ("itl_p50_ms", "itl_p99_ms")}
           for m in ("off", "on")}
    summary = {"model": a.model.name, "streams": a.streams, "runs": a.runs,
               "off": med["off"], "on": med["on"],
               "p50_on_over_off": med["on"]["itl_p50_ms"] / med["off"]["itl_p50_ms"],
               "p99_on_over_off": med["on"]["itl_p99_ms"] / med["off"]["itl_p99_ms"]}
    print()
    print("| model | streams | ITL p50 off / on (ms) | ITL p99 off / on (ms) | on / off p50 "
          "| on / off p99 |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    print(f"| {a.model.name} | {a.streams} | {med['off']['itl_p50_ms']:.2f} / "
          f"{med['on']['itl_p50_ms']:.2f} | {med['off']['itl_p99_ms']:.2f} / "
          f"{med['on']['itl_p99_ms']:.2f} | {summary['p50_on_over_off']:.3f} "
          f"| {summary['p99_on_over_off']:.3f} |")
    print(json.dumps(summary))
    if a.json_out:
        a.json_out.write_text(json.dumps({"summary": summary, "runs": runs}, indent=1))
    # The tier must have stored what the background left, or the run measured nothing.
    return 0 if all(r["on"]["stored_blocks"] > 0 for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
