#!/usr/bin/env python3
"""Picker cost: requests per router core with precise prefix scoring over 100 sim endpoints
and ~100k-token prompts.

Fleet: N (default 100) `switchyard engine --backend sim --sim-latency zero` processes for a
long-context copy of tiny-llama3 (router_fleet.long_context_model: max_position_embeddings
131072; the sim never reads weights), each with `--max-model-len 131072`,
`--num-gpu-blocks-override B` (the sim's cache holds no memory, only block metadata), one
HTTP thread, and KV events on (ZeroMQ PUB + replay on loopback, random ports). One
`switchyard router` (listen.threads 1) subscribes to all N event streams and scrapes all N
/metrics every SCRAPE_INTERVAL ms (llm-d's default is 50 ms), with the profile of
`switchyard up` and llm-d's precise guide: prefix-cache-scorer (mode precise,
blockSizeTokens 16) weight 3, queue-scorer 2, kv-cache-utilization-scorer 2,
max-score-picker.

Workload: S sessions; each has a fixed random prefix of (P - T) token ids, and every request
of a session is that prefix plus T fresh random ids: P tokens exactly, sent as a token-id
array to POST /v1/completions (max_tokens 1, non-streaming), so the router does not
tokenize and the count is exact. Requests cycle over the sessions, C in flight
(asyncio + aiohttp, keep-alive). A warm-up pass sends each session once first, so the run
measures the steady state: the router keys 100k tokens (6,250 blocks) per request, looks
them up in the precise index over N endpoints, and ingests the engines' BlockStored events
(T/16 new blocks per request once a session is placed).

Metric: requests / router CPU seconds (utime+stime of the router process from /proc, all
threads: HTTP, upstream client, scraper, KV event subscriber) over a timed window; robust to
the machine's other load because it counts only the router's own CPU. Also reported: the
router's idle CPU (scraping N endpoints, no requests) measured before the runs, the same
figure net of it, wall req/s, the router's own decision time per request (wall time from
its metrics: parse/tokenize + keys + index lookup + scorers + picker), and how well
sessions stick (share of a session's requests on its most used endpoint; engine-reported
cached prompt tokens).

usage: .venv/bin/python bench/router_picker_bench.py [--bin PATH] [--endpoints 100]
           [--prompt-tokens 100000] [--runs 3] [--duration 20]
"""
import argparse
import asyncio
import collections
import json
import pathlib
import random
import tempfile
import time

import aiohttp

from router_fleet import (Router, SimEngine, cpu_seconds, default_bin, load_average,
                          long_context_model, median, router_yaml, scoring_profile, stop_all)

MODEL = "bench"
VOCAB = 1000  # tiny-llama3's ids 1000+ are special tokens


class Workload:
    def __init__(self, sessions, prompt_tokens, tail_tokens, seed):
        self.rng = random.Random(seed)
        self.tail = tail_tokens
        self.heads = []
        for _ in range(sessions):
            ids = [self.rng.randrange(VOCAB) for _ in range(prompt_tokens - tail_tokens)]
            self.heads.append('{"model":"%s","max_tokens":1,"prompt":[%s' %
                              (MODEL, ",".join(map(str, ids))))

    def body(self, session):
        tail = ",".join(str(self.rng.randrange(VOCAB)) for _ in range(self.tail))
        return (self.heads[session] + "," + tail + "]}").encode()


async def send(http, url, body, stats, session):
    try:
        async with http.post(url, data=body,
                             headers={"content-type": "application/json"}) as resp:
            text = await resp.read()
            if resp.status != 200:
                stats["errors"] += 1
                stats["last_error"] = f"{resp.status} {text[:200]!r}"
                return
            usage = json.loads(text).get("usage") or {}
            cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
            stats["cached"].append((cached or 0) / max(1, usage.get("prompt_tokens", 1)))
            stats["endpoints"][session][resp.headers.get("x-switchyard-endpoint")] += 1
            stats["ok"] += 1
    except (aiohttp.ClientError, asyncio.TimeoutError) as e:
        stats["errors"] += 1
        stats["last_error"] = repr(e)


def new_stats():
    return {"ok": 0, "errors": 0, "cached": [], "last_error": None,
            "endpoints": collections.defaultdict(collections.Counter)}


async def drive(url, workload, concurrency, duration_s, sessions, start_index):
    """Closed loop: `concurrency` workers, each sending the next request when one ends."""
    stats = new_stats()
    counter = [start_index]
    deadline = time.monotonic() + duration_s
    conn = aiohttp.TCPConnector(limit=concurrency)
    timeout = aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(connector=conn, timeout=timeout) as http:
        async def worker():
            while time.monotonic() < deadline:
                i = counter[0]
                counter[0] += 1
                s = i % sessions
                await send(http, url, workload.body(s), stats, s)
        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return stats, counter[0]


async def warm(url, workload, sessions):
    stats = new_stats()
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as http:
        for s in range(sessions):
            await send(http, url, workload.body(s), stats, s)
    return stats


def stickiness(stats):
    """Share of each session's requests on its most used endpoint (median over sessions)."""
    return median([c.most_common(1)[0][1] / sum(c.values())
                   for c in stats["endpoints"].values() if c])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", type=pathlib.Path, default=default_bin())
    ap.add_argument("--endpoints", type=int, default=100)
    ap.add_argument("--prompt-tokens", type=int, default=100_000)
    ap.add_argument("--tail-tokens", type=int, default=512,
                    help="fresh tokens at the end of each request")
    ap.add_argument("--sessions", type=int, default=32)
    ap.add_argument("--blocks-per-engine", type=int, default=16384)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--duration", type=float, default=20)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--idle-seconds", type=float, default=10)
    ap.add_argument("--scrape-interval-ms", type=int, default=50)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=pathlib.Path, default=None)
    ap.add_argument("--json-out", type=pathlib.Path, default=None)
    a = ap.parse_args()
    out = a.out or pathlib.Path(tempfile.mkdtemp(prefix="router-picker-bench-"))
    out.mkdir(parents=True, exist_ok=True)
    print(f"logs in {out}; load average at start {load_average()}", flush=True)
    model = long_context_model(out)
    workload = Workload(a.sessions, a.prompt_tokens, a.tail_tokens, a.seed)

    procs = []
    try:
        engines = []
        for i in range(a.endpoints):
            engines.append(SimEngine(
                a.bin, f"engine-{i}", out, model=model, served=MODEL, kv_events=True,
                extra=["--max-model-len", "131072", "--num-gpu-blocks-override",
                       str(a.blocks_per_engine), "--http-threads", "1"]))
            procs.append(engines[-1])
        for e in engines:
            e.wait_ready(timeout=300)
        rss_mb = sum(int(l.split()[1]) for e in engines
                     for l in pathlib.Path(f"/proc/{e.pid}/status").read_text().splitlines()
                     if l.startswith("VmRSS:")) / 1024
        print(f"{a.endpoints} engines up, {rss_mb:.0f} MB RSS in all", flush=True)
        router = Router(a.bin, "router", out,
                        router_yaml(engines, MODEL, scoring_profile("precise"), threads=1,
                                    scrape_interval_ms=a.scrape_interval_ms))
        procs.append(router)
        router.wait_ready(a.endpoints, timeout=300)
        url = router.url + "/v1/completions"

        c0, t0 = cpu_seconds(router.pid), time.monotonic()
        time.sleep(a.idle_seconds)
        idle_cores = (cpu_seconds(router.pid) - c0) / (time.monotonic() - t0)
        print(f"router idle (scraping {a.endpoints} endpoints every "
              f"{a.scrape_interval_ms} ms): {idle_cores:.3f} cores", flush=True)

        w = asyncio.run(warm(url, workload, a.sessions))
        print(f"warm-up: {w['ok']} ok, {w['errors']} errors {w['last_error'] or ''}", flush=True)
        time.sleep(1)  # let the last events land
        runs, index = [], a.sessions
        for run in range(a.runs):
            load0 = load_average()
            s0, c0, t0 = router.scheduling_seconds(), cpu_seconds(router.pid), time.monotonic()
            stats, index = asyncio.run(
                drive(url, workload, a.concurrency, a.duration, a.sessions, index))
            t1, c1, s1 = time.monotonic(), cpu_seconds(router.pid), router.scheduling_seconds()
            wall, cpu, n = t1 - t0, c1 - c0, stats["ok"]
            net_cpu = cpu - idle_cores * wall
            r = {"requests": n, "errors": stats["errors"], "wall_s": wall, "cpu_s": cpu,
                 "rps": n / wall, "req_per_cpu_s": n / cpu if cpu > 0 else None,
                 "req_per_cpu_s_net_of_idle": n / net_cpu if net_cpu > 0 else None,
                 "scheduling_ms_per_req": (s1 - s0) * 1000 / n if n and s0 is not None else None,
                 "stickiness": stickiness(stats), "cached_fraction": median(stats["cached"]),
                 "load": [load0, load_average()], "last_error": stats["last_error"]}
            runs.append(r)
            print(f"run {run + 1}: {json.dumps(r)}", flush=True)
    finally:
        stop_all(procs)

    med = lambda k: median([r[k] for r in runs])
    num = lambda v, d=1: "-" if v is None else f"{v:.{d}f}"
    print(f"\nmedians of {a.runs} runs x {a.duration:.0f} s; {a.endpoints} sim endpoints, "
          f"{a.prompt_tokens}-token prompts ({a.sessions} sessions, {a.tail_tokens} fresh "
          f"tokens each), concurrency {a.concurrency}; router idle {idle_cores:.3f} cores")
    print("\n| req/s (wall) | router CPU ms per req | req per router CPU-s | net of idle | "
          "decision ms/req | session stickiness | cached prompt share | errors |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    cpu_ms = median([1000 * r["cpu_s"] / r["requests"] for r in runs if r["requests"]])
    print(f"| {num(med('rps'))} | {num(cpu_ms, 2)} | {num(med('req_per_cpu_s'))} | "
          f"{num(med('req_per_cpu_s_net_of_idle'))} | {num(med('scheduling_ms_per_req'), 2)} | "
          f"{num(med('stickiness'), 2)} | {num(med('cached_fraction'), 3)} | "
          f"{sum(r['errors'] for r in runs)} |")
    if a.json_out:
        a.json_out.write_text(json.dumps({"args": {k: str(v) for k, v in vars(a).items()},
                                          "idle_cores": idle_cores, "runs": runs}, indent=1))


if __name__ == "__main__":
    main()
