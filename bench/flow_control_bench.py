#!/usr/bin/env python3
"""Tenants and flow control in the router (issue 22): four scenarios, flow control on and off
side by side in one invocation, medians of --runs runs.

Engines are simulated (`switchyard engine --backend sim`): the forward pass is the latency
model calibrated on the CPU engine with bench-135m (sim/latency_model.h), every term divided
by --speedup (default 10: a 128-token prefill takes ~36 ms, a decode step of 8 sequences ~10
ms). Engines schedule FCFS (their default policy) with --max-num-seqs slots. The routers are
`switchyard router` (--bin, --router-threads event loops). "Flow control on" and "off" are two
routers over the same engines whose router.yaml differ only in `featureGates: [flowControl]`:
the `flowControl:` section (TTL 60 s) is in both and read by both, and does nothing without
the gate. Both have the same tenants and objectives (`tenants:` with an API key per tenant,
listed as its SHA-256; `objectives:` interactive priority 10, batch -1) and the same profile:
the saturation detector (--detector: concurrency-detector with maxConcurrency = --max-num-seqs
+ --extra-concurrency, or llm-d's default utilization-detector) as the first filter, then
queue-scorer 2, kv-cache-utilization-scorer 2, max-score-picker. Requests are real HTTP
through the router, streamed unless said; TTFT is the client's time from the send to the first
SSE data event with a choice (the first token). Prompts are random token ids (seeded, distinct
per request: no prefix-cache hits) except in the agents scenario. Load comes from asyncio with
aiohttp; open-loop loads have Poisson arrivals. Percentiles are nearest-rank over one run's
requests. Router CPU is the thread CPU of the router process (/proc/PID/task/*/schedstat, ns);
its idle rate (scrapes; with flow control also the pump thread, which wakes every 5 ms) is
measured over --idle-seconds before the load, and the CPU per request is given with and
without it ("net of idle"). Flow control's queue time is the router's
switchyard_router_flow_control_request_queue_duration_seconds (outcome dispatched) over the
window: p99 interpolated inside its bucket as Prometheus's histogram_quantile does.

1. noisy (noisy neighbour): tenant A has requestsPerSecond --noisy-quota and sends at
   --noisy-factor times that (default 100x) from a separate process, without backing off;
   tenant B (quota --b-quota) sends at --b-rate, well within it. Same request shape for both
   (--prompt-tokens, --max-tokens). Phases of --seconds each (A starts --warmup s before B's
   window), in an order that rotates per run: B alone (flow control on), B with A through flow
   control on, B with A through flow control off, and a control: B with A sending at its quota
   (flow control on), which separates what A's admitted requests cost B from what its flood of
   refused ones costs. Quotas are on in every phase: they are the tenants' configuration, not
   flow control, and without them nothing would stop A from filling the fleet in the "off"
   phase; with them the phases differ only in the gate. Reported: B's TTFT p50/p99 per phase,
   A's admitted rate (its 200s per second of its window) against its quota, A's 429s and
   their x-llm-d-request-dropped-reason and Retry-After, B's failures, router CPU per phase.
   Goal: B's p99 with A (on) within 1.2x of B alone.
2. urgent (urgent vs batch): tenant "app" sends objective interactive (priority 10) open loop
   at --interactive-rate (--interactive-prompt-tokens, --interactive-tokens); tenant "jobs"
   sends objective batch (priority -1) from --batch-concurrency closed-loop clients (default
   twice the fleet's slots, engines x --max-num-seqs: alone it more than fills the fleet),
   non-streamed, --batch-prompt-tokens prompts and max_tokens uniform in [--batch-tokens / 2,
   1.5 x --batch-tokens] (so that completions do not come in waves), each client sending its
   next request when the last ends (after Retry-After on a 429). Batch starts --warmup s
   before the window. Phases: interactive alone (on), with batch (on), with batch (off).
   Busy fraction: every --sample-ms, each engine's vllm:num_requests_running (set after each
   engine step, as vLLM's: a slot freed in a step reads idle until the step after the next
   request arrives) summed over the fleet over engines x --max-num-seqs; the mean of the
   samples over the window. The router's switchyard_router_endpoint_inflight_requests over the
   same is shown beside it (it counts requests queued inside engines too, so it passes 1 when
   they queue). Reported: interactive TTFT p50/p99, busy fractions, the interactive and batch
   requests' queue time in flow control, batch completions/s. Goal: interactive p99 with batch
   (on) within 1.2x of alone while busy >= 0.9. (With FCFS engines and no preemption, an
   interactive request that finds the fleet full waits in the router for the next batch
   completion: longer batch requests raise busy and that wait together.)
3. agents: --agents sessions through one router (flow control on; prefix-cache-scorer
   approximate 3 added to the profile; scrapes every --agents-scrape-ms) onto --agents-engines
   simulated engines of --agents-model (default tiny-llama3: a simulated engine holds the
   model's tokenizer, ~20 MiB against bench-135m's ~120 MiB; the bench checks MemAvailable
   first), --agents-max-seqs slots and --agents-kv-blocks blocks of 16 tokens (block
   accounting only: without --sim-kv-memory a simulated engine allocates no KV bytes). A
   fresh router per run. Each session is a loop of --agents-turns streamed chat completions
   (the router renders and tokenizes the messages): one of --agents-systems shared system
   prompts of --agents-system-words pseudo-words, then a user turn of --agents-user-words;
   after each answer (--agents-max-tokens tokens) a think time uniform in [--think-min,
   --think-max] s, then the next turn appends the answer and a new user turn. Sessions start
   uniformly over the first --think-max s and belong to 4 tenants with requestsPerSecond
   --agents-tenant-rps each; a 429 is retried after its Retry-After. Reported: failures other
   than 429 (goal: 0), 429s, router CPU per request answered (200 or 429), router peak RSS
   (VmHWM) and its RSS before the load, flow control's queue time p99 and mean, client TTFT
   p50/p99, the most requests in flight, and the CPU seconds of the router, the engines and the
   client over the load.
4. gate (cost of the gate): both routers, tenants configured in both (two tenants, quotas far
   above the load), for each rate of --gate-rates an open-loop window of --gate-seconds per
   router, on and off interleaved (the order alternates per run), --gate-prompt-tokens
   prompts (--max-tokens): well under saturation, which the "on" router's queue time p99
   (under 1 ms: nothing waited) shows. Router CPU per request, with and without the idle
   rate, and the pump thread's (sy-flow-pump) CPU. Goal: on <= 1.1x off.

Each run records the 1-minute load average before it (--wait-load X first waits, up to
10 min, for it to fall under X). Output: per-run tables, a summary line per goal, and JSON
({"runs", "summary"} per scenario; --json-out keeps it with the arguments). --smoke runs every
scenario for seconds on tiny-llama3 and checks the results' structure.

usage: .venv/bin/python bench/flow_control_bench.py [--scenarios noisy,urgent,agents,gate]
           [--runs 3] [--bin PATH] [--wait-load 1.5] [--json-out FILE] [--smoke]
"""
import argparse
import asyncio
import math
import multiprocessing
import pathlib
import random
import string
import sys
import time

import aiohttp

import router_fleet
from kv_tier_ttft import sample, vocabulary

SCENARIOS = ("noisy", "urgent", "agents", "gate")
QUEUE_HISTOGRAM = "switchyard_router_flow_control_request_queue_duration_seconds"


def key_of(tenant):
    return f"sk-flowbench-{tenant}"


def tenants_yaml(limits):
    """`tenants:` (keys required) with one tenant per entry of `limits` (id -> YAML flow
    mapping) that may use both objectives, and `objectives:`."""
    lines = ["tenants:", "  requireApiKey: true", "  list:"]
    for tenant, lim in limits.items():
        digest = router_fleet.api_key_digest(key_of(tenant))
        lines += [f"  - id: {tenant}", f"    apiKeys: ['{digest}']",
                  f"    limits: {lim}", "    objectives: [interactive, batch]",
                  "    defaultObjective: interactive"]
    lines += ["objectives:", "- {name: interactive, priority: 10}",
              "- {name: batch, priority: -1}"]
    return "\n".join(lines) + "\n"


def scheduling(a, flow_on, slots, prefix_mode=None):
    """The EndpointPickerConfig: the detector (for engines of `slots` slots) as a filter and
    the load scorers; the gate only when `flow_on`."""
    if a.detector == "concurrency":
        detector = ("concurrency-detector",
                    f"{{maxConcurrency: {slots + a.extra_concurrency}}}")
    else:
        detector = ("utilization-detector", None)
    text = router_fleet.scoring_profile(prefix_mode, [detector])
    if flow_on:
        text += "featureGates: [flowControl]\n"
    return text + (f"flowControl: {{defaultRequestTTL: 60s, "
                   f"saturationDetector: {{pluginRef: {detector[0]}}}}}\n")


class Fleet:
    """`n` simulated engines of `slots` slots each, and routers over them (`routers`: name ->
    (router.yaml extra text, flow control on)); add_router adds more."""

    def __init__(self, a, tag, n, model, slots, routers, prefix_mode=None, scrape_ms=50,
                 listen_extra="", engine_flags=()):
        self.a, self.model, self.slots, self.prefix_mode = a, model, slots, prefix_mode
        self.scrape_ms, self.listen_extra = scrape_ms, listen_extra
        self.procs, self.routers = [], {}
        self.log_dir = a.out_dir / tag
        self.log_dir.mkdir(parents=True, exist_ok=True)
        try:
            self.engines = [router_fleet.SimEngine(
                a.bin, f"engine-{i}", self.log_dir, model=model, served="bench",
                latency=a.latency, extra=["--max-num-seqs", str(slots), *engine_flags])
                for i in range(n)]
            self.procs += self.engines
            for e in self.engines:
                e.wait_ready()
            for name, (extra, flow_on) in routers.items():
                self.add_router(name, extra, flow_on)
        except BaseException:
            self.stop()
            raise

    def add_router(self, name, extra, flow_on):
        a = self.a
        config = router_fleet.router_yaml(
            self.engines, "bench", scheduling(a, flow_on, self.slots, self.prefix_mode),
            threads=a.router_threads, tokenizer=self.model, scrape_interval_ms=self.scrape_ms,
            listen_extra=self.listen_extra, extra=extra)
        r = router_fleet.Router(a.bin, name, self.log_dir, config)
        self.procs.append(r)
        self.routers[name] = r.wait_ready(len(self.engines))
        return r

    def engine_cpu(self):
        return sum(router_fleet.cpu_seconds(e.pid) for e in self.engines)

    def stop(self):
        router_fleet.stop_all(self.procs)


# ------------------------------------------------------------------ load generation


def session():
    """An aiohttp session without a connection limit (aiohttp's default is 100)."""
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0),
                                 timeout=aiohttp.ClientTimeout(total=600))


def completion_body(ids, rng, prompt_tokens, max_tokens, stream=True):
    return {"model": "bench", "prompt": rng.choices(ids, k=prompt_tokens),
            "max_tokens": max_tokens, "ignore_eos": True, "temperature": 0, "stream": stream}


def headers(tenant, objective="interactive"):
    return {"Authorization": f"Bearer {key_of(tenant)}", "x-llm-d-inference-objective": objective}


async def guarded(coro):
    """The coroutine's result, or {"status": None, "error": repr} when it raised."""
    try:
        return await coro
    except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as e:
        return {"status": None, "error": repr(e)}


async def open_loop(rate, seconds, fire, rng):
    """Calls fire() at Poisson arrivals of `rate` per second for `seconds`; returns the
    results (guarded) once all have ended."""
    loop = asyncio.get_running_loop()
    start = t = loop.time()
    tasks = []
    while True:
        t += rng.expovariate(rate)
        if t >= start + seconds:
            break
        await asyncio.sleep(t - loop.time())
        tasks.append(asyncio.create_task(guarded(fire())))
    return await asyncio.gather(*tasks)


def streamed(http, url, tenant, objective, ids, rng, prompt_tokens, max_tokens):
    return lambda: router_fleet.stream_request_async(
        http, url + "/v1/completions", completion_body(ids, rng, prompt_tokens, max_tokens),
        headers(tenant, objective))


def idle_cpu(pid, seconds):
    """The process's thread CPU per second over `seconds` with no requests."""
    cpu0 = router_fleet.thread_cpu_seconds(pid)
    time.sleep(seconds)
    return (router_fleet.thread_cpu_seconds(pid) - cpu0) / seconds


def pct(values, q):
    """Nearest-rank percentile; None for no values."""
    values = sorted(v for v in values if v is not None)
    return values[max(0, math.ceil(q * len(values)) - 1)] if values else None


def ttft_stats(results, prefix):
    """TTFT p50/p99 of the results that streamed to the end, and the count of the others."""
    ttfts = [r["ttft"] for r in results if r.get("status") == 200 and r.get("done")]
    failed = [r for r in results if not (r.get("status") == 200 and r.get("done"))]
    return {f"{prefix}_requests": len(results), f"{prefix}_failed": len(failed),
            f"{prefix}_first_failure": (failed[0].get("error") or failed[0].get("status"))
            if failed else None,
            f"{prefix}_ttft_p50_ms": ms(pct(ttfts, 0.5)),
            f"{prefix}_ttft_p99_ms": ms(pct(ttfts, 0.99))}


def ms(seconds):
    return None if seconds is None else 1e3 * seconds


def queue_time(before, after, **labels):
    """Flow control's queue time between two /metrics texts of one router, from
    QUEUE_HISTOGRAM's series with `labels` (outcome="dispatched", priority="10"): count,
    p99 (interpolated in its bucket) and mean, in ms."""
    b0 = router_fleet.histogram_buckets(before, QUEUE_HISTOGRAM, **labels)
    b1 = router_fleet.histogram_buckets(after, QUEUE_HISTOGRAM, **labels)
    count = (sample(after, QUEUE_HISTOGRAM + "_count", **labels)
             - sample(before, QUEUE_HISTOGRAM + "_count", **labels))
    total = (sample(after, QUEUE_HISTOGRAM + "_sum", **labels)
             - sample(before, QUEUE_HISTOGRAM + "_sum", **labels))
    return {"count": count,
            "p99_ms": ms(router_fleet.bucket_quantile({le: n - b0.get(le, 0) for le, n in
                                                       b1.items()}, 0.99)),
            "mean_ms": ms(total / count) if count else None}


def tally(results):
    """Counts of statuses and dropped reasons of refused requests."""
    out = {"ok": 0, "refused": 0, "failed": 0, "reasons": {}, "retry_after": set()}
    for r in results:
        if r.get("status") == 200 and r.get("done"):
            out["ok"] += 1
        elif r.get("status") == 429:
            out["refused"] += 1
            out["reasons"][r["dropped"]] = out["reasons"].get(r["dropped"], 0) + 1
            out["retry_after"].add(r["retry_after"])
        else:
            out["failed"] += 1
    out["retry_after"] = sorted(x for x in out["retry_after"] if x is not None)
    return out


# ------------------------------------------------------------------ 1. noisy neighbour


def noisy_process(url, rate, seconds, model, prompt_tokens, max_tokens, seed, conn):
    """Tenant A's load, in its own process so that B's client loop is not A's."""
    async def run():
        async with session() as http:
            rng = random.Random(seed)
            t0 = time.perf_counter()
            results = await open_loop(rate, seconds, streamed(
                http, url, "tenant-a", "interactive", vocabulary(model), rng, prompt_tokens,
                max_tokens), rng)
            return results, time.perf_counter() - t0

    results, elapsed = asyncio.run(run())
    t = tally(results)
    t.update(seconds=elapsed, sent=len(results), cpu_s=time.process_time(),
             first_failure=next((r.get("error") or r.get("status") for r in results
                                 if r.get("status") not in (200, 429)), None))
    conn.send(t)


async def noisy_phase(a, fleet, router, a_factor, ids, rng, seed):
    """B's window, with A sending at `a_factor` times its quota (None: without A)."""
    url = fleet.routers[router].url
    worker = None
    if a_factor:
        ctx = multiprocessing.get_context("spawn")
        parent, child = ctx.Pipe()
        worker = ctx.Process(target=noisy_process, args=(
            url, a.noisy_quota * a_factor, a.seconds + a.warmup, a.model, a.prompt_tokens,
            a.max_tokens, seed, child))
        worker.start()
        await asyncio.sleep(a.warmup)
    cpu0, eng0 = router_fleet.thread_cpu_seconds(fleet.routers[router].pid), fleet.engine_cpu()
    async with session() as http:
        b = await open_loop(a.b_rate, a.seconds, streamed(
            http, url, "tenant-b", "interactive", ids, rng, a.prompt_tokens, a.max_tokens), rng)
    r = ttft_stats(b, "b")
    r["router_cpu_s"] = router_fleet.thread_cpu_seconds(fleet.routers[router].pid) - cpu0
    r["engine_cpu_s"] = fleet.engine_cpu() - eng0
    if worker is not None:
        t = await asyncio.get_running_loop().run_in_executor(None, parent.recv)
        worker.join()
        r.update(a_sent=t["sent"], a_admitted=t["ok"], a_429=t["refused"],
                 a_reasons=t["reasons"], a_retry_after=t["retry_after"], a_failed=t["failed"],
                 a_first_failure=t["first_failure"], a_admitted_per_s=t["ok"] / t["seconds"],
                 a_sent_per_s=t["sent"] / t["seconds"], a_client_cpu_s=t["cpu_s"])
    return r


def run_noisy(a):
    limits = {"tenant-a": f"{{requestsPerSecond: {a.noisy_quota}}}",
              "tenant-b": f"{{requestsPerSecond: {a.b_quota}}}"}
    extra = tenants_yaml(limits)
    fleet = Fleet(a, "noisy", a.engines, a.model, a.slots,
                  {"router-on": (extra, True), "router-off": (extra, False)})
    phases = [("alone", "router-on", None), ("with_a_on", "router-on", a.noisy_factor),
              ("with_a_off", "router-off", a.noisy_factor), ("a_at_quota_on", "router-on", 1)]
    ids = vocabulary(a.model)
    runs = []
    try:
        for run in range(a.runs):
            load = wait_load(a)
            row = {"load": load}
            for k in range(len(phases)):
                name, router, a_factor = phases[(run + k) % len(phases)]
                rng = random.Random(f"{a.seed}/noisy/{run}/{name}")
                r = asyncio.run(noisy_phase(a, fleet, router, a_factor, ids, rng,
                                            f"{a.seed}/a/{run}/{name}"))
                row[name] = r
                print(f"noisy run {run + 1} {name}: {r}", flush=True)
            runs.append(row)
    finally:
        fleet.stop()
    return runs


# ------------------------------------------------------------------ 2. urgent vs batch


async def batch_client(http, url, ids, rng, a, counts):
    """One batch client: non-streamed requests back to back until cancelled."""
    while True:
        body = completion_body(ids, rng, a.batch_prompt_tokens,
                               rng.randint((a.batch_tokens + 1) // 2, a.batch_tokens * 3 // 2),
                               stream=False)
        try:
            async with http.post(url + "/v1/completions", json=body,
                                 headers=headers("jobs", "batch")) as resp:
                await resp.read()
                status, retry = resp.status, resp.headers.get("retry-after")
        except (aiohttp.ClientError, asyncio.TimeoutError) as e:
            counts["failed"].append(repr(e))
            await asyncio.sleep(1)
            continue
        if status == 200:
            counts["done"] += 1
        elif status == 429:
            counts["refused"] += 1
            await asyncio.sleep(float(retry or 1))
        else:
            counts["failed"].append(status)
            await asyncio.sleep(1)


async def metric(http, url, name):
    async with http.get(url + "/metrics") as resp:
        return sample(await resp.text(), name)


async def busy_sampler(http, engines, router_url, slots, interval_s, out):
    """Every interval until cancelled, appends to out["engines"] the fleet's running requests
    (each engine's vllm:num_requests_running) over its slots, and to out["router"] the
    router's requests in flight to the engines (switchyard_router_endpoint_inflight_requests)
    over the same."""
    while True:
        values = await asyncio.gather(
            metric(http, router_url, "switchyard_router_endpoint_inflight_requests"),
            *(metric(http, e.url, "vllm:num_requests_running") for e in engines))
        out["router"].append(values[0] / (len(engines) * slots))
        out["engines"].append(sum(values[1:]) / (len(engines) * slots))
        await asyncio.sleep(interval_s)


async def wait_idle(http, engines, timeout_s=120):
    """Until no engine runs or queues a request (cancelled batch work drained)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        busy = await asyncio.gather(*(metric(http, e.url, name) for e in engines for name in
                                      ("vllm:num_requests_running", "vllm:num_requests_waiting")))
        if sum(busy) == 0:
            return
        await asyncio.sleep(0.1)
    raise RuntimeError("the engines did not drain")


async def urgent_phase(a, fleet, router, with_batch, ids, rng):
    url = fleet.routers[router].url
    counts = {"done": 0, "refused": 0, "failed": []}
    async with session() as http:
        batch = []
        if with_batch:
            batch = [asyncio.create_task(batch_client(http, url, ids, rng, a, counts))
                     for _ in range(a.batch_concurrency)]
            await asyncio.sleep(a.warmup)
        before, done0, busy = fleet.routers[router].metrics_text(), counts["done"], \
            {"engines": [], "router": []}
        sampler = asyncio.create_task(busy_sampler(http, fleet.engines, url, a.slots,
                                                   a.sample_ms / 1e3, busy))
        t0 = time.perf_counter()
        results = await open_loop(a.interactive_rate, a.seconds, streamed(
            http, url, "app", "interactive", ids, rng, a.interactive_prompt_tokens,
            a.interactive_tokens), rng)
        elapsed, done = time.perf_counter() - t0, counts["done"] - done0
        after = fleet.routers[router].metrics_text()
        for t in [sampler, *batch]:
            t.cancel()
        await asyncio.gather(sampler, *batch, return_exceptions=True)
        await wait_idle(http, fleet.engines)
    r = ttft_stats(results, "interactive")
    mean = lambda xs: sum(xs) / len(xs) if xs else None  # noqa: E731
    r.update(busy=mean(busy["engines"]), busy_router=mean(busy["router"]),
             busy_samples=len(busy["engines"]), batch_done_per_s=done / elapsed,
             batch_429=counts["refused"], batch_failed=len(counts["failed"]),
             batch_first_failure=counts["failed"][0] if counts["failed"] else None,
             interactive_queue=queue_time(before, after, outcome="dispatched", priority="10"),
             batch_queue=queue_time(before, after, outcome="dispatched", priority="-1"))
    return r


def run_urgent(a):
    extra = tenants_yaml({"app": "{}", "jobs": "{}"})
    fleet = Fleet(a, "urgent", a.engines, a.model, a.slots,
                  {"router-on": (extra, True), "router-off": (extra, False)})
    phases = [("alone", "router-on", False), ("with_batch_on", "router-on", True),
              ("with_batch_off", "router-off", True)]
    ids = vocabulary(a.model)
    runs = []
    try:
        for run in range(a.runs):
            row = {"load": wait_load(a)}
            for k in range(len(phases)):
                name, router, with_batch = phases[(run + k) % len(phases)]
                rng = random.Random(f"{a.seed}/urgent/{run}/{name}")
                row[name] = asyncio.run(urgent_phase(a, fleet, router, with_batch, ids, rng))
                print(f"urgent run {run + 1} {name}: {row[name]}", flush=True)
            runs.append(row)
    finally:
        fleet.stop()
    return runs


# ------------------------------------------------------------------ 3. agents


def words(rng, n):
    return " ".join("".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 9)))
                    for _ in range(n))


async def agent(k, http, url, a, systems, stats):
    rng = random.Random(f"{a.seed}/agent/{k}")
    tenant = f"agents-{k % 4}"
    messages = [{"role": "system", "content": systems[k % len(systems)]},
                {"role": "user", "content": words(rng, a.agents_user_words)}]
    await asyncio.sleep(rng.uniform(0, a.think_max))
    turn = 0
    while turn < a.agents_turns:
        body = {"model": "bench", "messages": messages, "max_tokens": a.agents_max_tokens,
                "ignore_eos": True, "temperature": 0, "stream": True}
        stats["in_flight"] += 1
        stats["max_in_flight"] = max(stats["max_in_flight"], stats["in_flight"])
        try:
            r = await router_fleet.stream_request_async(
                http, url + "/v1/chat/completions", body, headers(tenant))
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as e:
            stats["failures"].append(repr(e))
            return
        finally:
            stats["in_flight"] -= 1
        if r["status"] == 429:
            stats["refused"] += 1
            stats["reasons"][r["dropped"]] = stats["reasons"].get(r["dropped"], 0) + 1
            await asyncio.sleep(float(r["retry_after"] or 1))
            continue
        if r["status"] != 200 or not r["done"]:
            stats["failures"].append(f"{r['status']}: {r['error']}")
            return
        stats["ttfts"].append(r["ttft"])
        turn += 1
        messages += [{"role": "assistant", "content": r["text"]},
                     {"role": "user", "content": words(rng, a.agents_user_words)}]
        if turn < a.agents_turns:
            await asyncio.sleep(rng.uniform(a.think_min, a.think_max))


async def agents_load(a, url):
    rng = random.Random(f"{a.seed}/systems")
    systems = [words(rng, a.agents_system_words) for _ in range(a.agents_systems)]
    stats = {"ttfts": [], "refused": 0, "reasons": {}, "failures": [], "in_flight": 0,
             "max_in_flight": 0}
    async with session() as http:
        await asyncio.gather(*(agent(k, http, url, a, systems, stats) for k in range(a.agents)))
    return stats


def check_memory(a):
    """Refuses to start the agents' fleet unless MemAvailable holds it with 1 GiB to spare."""
    avail = int(next(line.split()[1] for line in pathlib.Path("/proc/meminfo").read_text()
                     .splitlines() if line.startswith("MemAvailable:"))) * 1024
    need = a.agents_engines * a.agents_engine_mib * 2**20 + 2**30
    if avail < need:
        raise RuntimeError(f"{avail / 2**30:.1f} GiB available, the agents' fleet needs "
                           f"{need / 2**30:.1f} GiB (--agents-engines, --agents-engine-mib)")
    return avail


def run_agents(a):
    avail = check_memory(a)
    flags = ["--num-gpu-blocks-override", str(a.agents_kv_blocks), "--block-size", "16",
             "--max-model-len", str(a.agents_max_model_len), "--http-threads", "1"]
    limits = {f"agents-{t}": f"{{requestsPerSecond: {a.agents_tenant_rps}}}" for t in range(4)}
    fleet = Fleet(a, "agents", a.agents_engines, a.agents_model, a.agents_max_seqs, {},
                  prefix_mode="approximate", scrape_ms=a.agents_scrape_ms,
                  listen_extra=", maxConnectionsPerClient: 0", engine_flags=flags)
    engine_rss = sum(router_fleet.peak_rss_kib(e.pid) for e in fleet.engines) / 1024
    runs = []
    try:
        for run in range(a.runs):
            load = wait_load(a)
            router = fleet.add_router(f"router-{run}", tenants_yaml(limits), True)
            idle_rss = router_fleet.peak_rss_kib(router.pid)
            idle = idle_cpu(router.pid, a.idle_seconds)
            before = router.metrics_text()
            cpu0, eng0, client0 = (router_fleet.thread_cpu_seconds(router.pid),
                                   fleet.engine_cpu(), time.process_time())
            t0 = time.perf_counter()
            stats = asyncio.run(agents_load(a, router.url))
            elapsed = time.perf_counter() - t0
            router_cpu = router_fleet.thread_cpu_seconds(router.pid) - cpu0
            answered = len(stats["ttfts"]) + stats["refused"]
            queue = queue_time(before, router.metrics_text(), outcome="dispatched")
            row = {"load": load, "requests": len(stats["ttfts"]), "failed": len(stats["failures"]),
                   "first_failure": stats["failures"][0] if stats["failures"] else None,
                   "refused_429": stats["refused"], "reasons": stats["reasons"],
                   "seconds": elapsed, "requests_per_s": len(stats["ttfts"]) / elapsed,
                   "max_in_flight": stats["max_in_flight"],
                   "router_cpu_us_per_request": 1e6 * router_cpu / max(answered, 1),
                   "router_net_cpu_us_per_request":
                       1e6 * (router_cpu - idle * elapsed) / max(answered, 1),
                   "router_idle_cpu_ms_per_s": 1e3 * idle, "router_cpu_s": router_cpu,
                   "router_peak_rss_mib": router_fleet.peak_rss_kib(router.pid) / 1024,
                   "router_idle_rss_mib": idle_rss / 1024,
                   "queue_p99_ms": queue["p99_ms"], "queue_mean_ms": queue["mean_ms"],
                   "queued_requests": queue["count"],
                   "ttft_p50_ms": ms(pct(stats["ttfts"], 0.5)),
                   "ttft_p99_ms": ms(pct(stats["ttfts"], 0.99)),
                   "engines_cpu_s": fleet.engine_cpu() - eng0,
                   "client_cpu_s": time.process_time() - client0,
                   "engines_peak_rss_mib": engine_rss, "mem_available_gib": avail / 2**30}
            router.stop()
            fleet.procs.remove(router)
            print(f"agents run {run + 1}: {row}", flush=True)
            runs.append(row)
    finally:
        fleet.stop()
    return runs


# ------------------------------------------------------------------ 4. cost of the gate


async def gate_window(a, router, rate, ids, rng):
    pid = router.pid
    idle = idle_cpu(pid, a.idle_seconds)
    async with session() as http:
        def fire():  # each request from one of the two tenants
            return router_fleet.stream_request_async(
                http, router.url + "/v1/completions",
                completion_body(ids, rng, a.gate_prompt_tokens, a.max_tokens),
                headers(rng.choice(("team-a", "team-b"))))

        before, threads0 = router.metrics_text(), router_fleet.thread_cpu(pid)
        t0 = time.perf_counter()
        results = await open_loop(rate, a.gate_seconds, fire, rng)
        elapsed = time.perf_counter() - t0
        threads = router_fleet.thread_cpu(pid)
    cpu = sum(threads.values()) - sum(threads0.values())
    pump = threads.get("sy-flow-pump", 0) - threads0.get("sy-flow-pump", 0)
    t = tally(results)
    n = max(len(results), 1)
    return {"requests": len(results), "ok": t["ok"], "refused": t["refused"],
            "failed": t["failed"], "cpu_us_per_request": 1e6 * cpu / n,
            "idle_cpu_ms_per_s": 1e3 * idle,
            "net_cpu_us_per_request": 1e6 * (cpu - idle * elapsed) / n,
            "pump_thread_ms_per_s": 1e3 * pump / elapsed,
            "queue": queue_time(before, router.metrics_text(), outcome="dispatched")}


def run_gate(a):
    limits = "{requestsPerSecond: 1000, tokensPerMinute: 100000000}"
    extra = tenants_yaml({"team-a": limits, "team-b": limits})
    fleet = Fleet(a, "gate", a.engines, a.model, a.slots,
                  {"router-on": (extra, True), "router-off": (extra, False)})
    ids = vocabulary(a.model)
    runs = []
    try:
        for run in range(a.runs):
            row = {"load": wait_load(a)}
            for rate in a.gate_rates:
                r = row[f"{rate:g}"] = {}
                for name in (("on", "off") if run % 2 == 0 else ("off", "on")):
                    rng = random.Random(f"{a.seed}/gate/{run}/{rate}/{name}")
                    r[name] = asyncio.run(gate_window(a, fleet.routers[f"router-{name}"], rate,
                                                      ids, rng))
                    print(f"gate run {run + 1} {rate:g}/s {name}: {r[name]}", flush=True)
                r["ratio"] = r["on"]["cpu_us_per_request"] / r["off"]["cpu_us_per_request"]
            runs.append(row)
    finally:
        fleet.stop()
    return runs


# ------------------------------------------------------------------ reporting


def wait_load(a):
    """The 1-minute load average, after waiting (at most 10 min) for it to fall under
    --wait-load when that is set."""
    deadline = time.monotonic() + 600
    while a.wait_load and router_fleet.load_average()[0] >= a.wait_load \
            and time.monotonic() < deadline:
        time.sleep(5)
    return router_fleet.load_average()[0]


def med(runs, *path):
    """The median over runs of the value at `path` (keys) in each run's dict."""
    values = []
    for r in runs:
        for p in path:
            r = r.get(p) if isinstance(r, dict) else None
        values.append(r)
    return router_fleet.median(values)


def f(v, digits=1):
    return "-" if v is None else f"{v:,.{digits}f}"


def ratio(x, y):
    return None if x is None or not y else x / y


def pair(r, prefix, digits=1):
    """"p50 / p99" of one phase's TTFTs."""
    return f"{f(r[prefix + '_ttft_p50_ms'], digits)} / {f(r[prefix + '_ttft_p99_ms'], digits)}"


def noisy_report(a, runs):
    s = {"b_alone_p99_ms": med(runs, "alone", "b_ttft_p99_ms"),
         "b_with_a_on_p99_ms": med(runs, "with_a_on", "b_ttft_p99_ms"),
         "b_with_a_off_p99_ms": med(runs, "with_a_off", "b_ttft_p99_ms"),
         "b_a_at_quota_p99_ms": med(runs, "a_at_quota_on", "b_ttft_p99_ms"),
         "a_admitted_per_s": med(runs, "with_a_on", "a_admitted_per_s"),
         "a_sent_per_s": med(runs, "with_a_on", "a_sent_per_s"), "a_quota_per_s": a.noisy_quota}
    s["ratio_on"] = ratio(s["b_with_a_on_p99_ms"], s["b_alone_p99_ms"])
    s["ratio_off"] = ratio(s["b_with_a_off_p99_ms"], s["b_alone_p99_ms"])
    s["goal_met"] = s["ratio_on"] is not None and s["ratio_on"] <= 1.2
    lines = ["", f"noisy neighbour: A sends {a.noisy_factor:g}x its quota of {a.noisy_quota:g} "
             f"req/s, B {a.b_rate:g} req/s (quota {a.b_quota:g}); B's TTFT p50 / p99 ms",
             "| run | load | B alone | B with A, on | B with A, off | B with A at its quota, on "
             "| A sent / s | A admitted / s on, off | A 429s on, off | B failed | router CPU s "
             "alone, on, off |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for i, r in enumerate(runs):
        al, on, off, quota = r["alone"], r["with_a_on"], r["with_a_off"], r["a_at_quota_on"]
        failed = sum(r[p]["b_failed"] for p in ("alone", "with_a_on", "with_a_off",
                                                  "a_at_quota_on"))
        lines.append(
            f"| {i + 1} | {r['load']:.2f} | {pair(al, 'b')} | {pair(on, 'b')} | {pair(off, 'b')} "
            f"| {pair(quota, 'b')} | {f(on['a_sent_per_s'])} | {f(on['a_admitted_per_s'], 2)}, "
            f"{f(off['a_admitted_per_s'], 2)} | {on['a_429']}, {off['a_429']} | {failed} | "
            f"{f(al['router_cpu_s'], 2)}, {f(on['router_cpu_s'], 2)}, "
            f"{f(off['router_cpu_s'], 2)} |")
    lines.append(f"median B p99: alone {f(s['b_alone_p99_ms'])} ms, with A on "
                 f"{f(s['b_with_a_on_p99_ms'])} ms ({f(s['ratio_on'], 2)}x, goal <= 1.2: "
                 f"{'met' if s['goal_met'] else 'missed'}), with A off "
                 f"{f(s['b_with_a_off_p99_ms'])} ms ({f(s['ratio_off'], 2)}x), with A at its "
                 f"quota {f(s['b_a_at_quota_p99_ms'])} ms; A admitted "
                 f"{f(s['a_admitted_per_s'], 2)} req/s of a {a.noisy_quota:g} req/s quota")
    return s, lines


def urgent_report(a, runs):
    s = {"alone_p99_ms": med(runs, "alone", "interactive_ttft_p99_ms"),
         "with_batch_on_p99_ms": med(runs, "with_batch_on", "interactive_ttft_p99_ms"),
         "with_batch_off_p99_ms": med(runs, "with_batch_off", "interactive_ttft_p99_ms"),
         "busy_on": med(runs, "with_batch_on", "busy"),
         "busy_off": med(runs, "with_batch_off", "busy"),
         "busy_router_on": med(runs, "with_batch_on", "busy_router"),
         "interactive_queue_p99_ms_on": med(runs, "with_batch_on", "interactive_queue",
                                            "p99_ms")}
    s["ratio_on"] = ratio(s["with_batch_on_p99_ms"], s["alone_p99_ms"])
    s["ratio_off"] = ratio(s["with_batch_off_p99_ms"], s["alone_p99_ms"])
    s["goal_met"] = (s["ratio_on"] is not None and s["ratio_on"] <= 1.2
                     and (s["busy_on"] or 0) >= 0.9)
    lines = ["", f"urgent vs batch: interactive {a.interactive_rate:g} req/s, batch from "
             f"{a.batch_concurrency} clients, {a.engines} engines x {a.slots} slots; interactive "
             "TTFT p50 / p99 ms; busy: engines' running / slots (router's in flight / slots)",
             "| run | load | alone | with batch, on | busy on | interactive queue p99 / mean "
             "ms on | with batch, off | busy off | batch done / s on, off |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for i, r in enumerate(runs):
        al, on, off = r["alone"], r["with_batch_on"], r["with_batch_off"]
        lines.append(
            f"| {i + 1} | {r['load']:.2f} | {pair(al, 'interactive')} | "
            f"{pair(on, 'interactive')} | {f(on['busy'], 3)} ({f(on['busy_router'], 3)}) | "
            f"{f(on['interactive_queue']['p99_ms'])} / {f(on['interactive_queue']['mean_ms'])} "
            f"| {pair(off, 'interactive')} | {f(off['busy'], 3)} ({f(off['busy_router'], 3)}) | "
            f"{f(on['batch_done_per_s'])}, {f(off['batch_done_per_s'])} |")
    lines.append(f"median interactive p99: alone {f(s['alone_p99_ms'])} ms, with batch on "
                 f"{f(s['with_batch_on_p99_ms'])} ms ({f(s['ratio_on'], 2)}x, goal <= 1.2) at "
                 f"busy {f(s['busy_on'], 3)} (goal >= 0.9; off: {f(s['busy_off'], 3)}): "
                 f"{'met' if s['goal_met'] else 'missed'}; with batch off "
                 f"{f(s['with_batch_off_p99_ms'])} ms ({f(s['ratio_off'], 2)}x)")
    return s, lines


def agents_report(a, runs):
    keys = ("router_cpu_us_per_request", "router_net_cpu_us_per_request",
            "router_idle_cpu_ms_per_s", "router_peak_rss_mib", "queue_p99_ms", "queue_mean_ms",
            "ttft_p50_ms", "ttft_p99_ms", "requests_per_s")
    s = {k: med(runs, k) for k in keys}
    s["failed"] = sum(r["failed"] for r in runs)
    s["goal_met"] = s["failed"] == 0
    lines = ["", f"agents: {a.agents} sessions x {a.agents_turns} turns onto "
             f"{a.agents_engines} engines x {a.agents_max_seqs} slots, flow control on",
             "| run | load | requests | req/s | failed | 429s | router CPU us / req (net of idle) "
             "| router idle ms/s | router peak RSS MiB | FC queue p99 / mean ms | TTFT p50 / p99 "
             "ms | CPU s router / engines / client | max in flight |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
             "| ---: |"]
    for i, r in enumerate(runs):
        lines.append(
            f"| {i + 1} | {r['load']:.2f} | {r['requests']} | {f(r['requests_per_s'])} | "
            f"{r['failed']} | {r['refused_429']} | {f(r['router_cpu_us_per_request'])} "
            f"({f(r['router_net_cpu_us_per_request'])}) | {f(r['router_idle_cpu_ms_per_s'])} | "
            f"{f(r['router_peak_rss_mib'])} | {f(r['queue_p99_ms'], 2)} / "
            f"{f(r['queue_mean_ms'], 2)} | {f(r['ttft_p50_ms'])} / {f(r['ttft_p99_ms'])} | "
            f"{f(r['router_cpu_s'])} / {f(r['engines_cpu_s'])} / {f(r['client_cpu_s'])} | "
            f"{r['max_in_flight']} |")
    lines.append(f"median router CPU {f(s['router_cpu_us_per_request'])} us/request "
                 f"({f(s['router_net_cpu_us_per_request'])} net of idle), peak RSS "
                 f"{f(s['router_peak_rss_mib'])} MiB, queue p99 {f(s['queue_p99_ms'], 2)} ms; "
                 f"failures other than 429: {s['failed']} (goal 0: "
                 f"{'met' if s['goal_met'] else 'missed'})")
    return s, lines


def gate_report(a, runs):
    s, lines = {}, []
    for rate in a.gate_rates:
        key = f"{rate:g}"
        on, off = med(runs, key, "on", "cpu_us_per_request"), med(runs, key, "off",
                                                                   "cpu_us_per_request")
        s[key] = {"on_us": on, "off_us": off, "ratio": ratio(on, off),
                  "ratio_of_runs": med(runs, key, "ratio"),
                  "net_on_us": med(runs, key, "on", "net_cpu_us_per_request"),
                  "net_off_us": med(runs, key, "off", "net_cpu_us_per_request"),
                  "pump_ms_per_s": med(runs, key, "on", "pump_thread_ms_per_s"),
                  "on_queue_p99_ms": max(run[key]["on"]["queue"]["p99_ms"] or 0 for run in runs)}
        s[key]["goal_met"] = s[key]["ratio"] is not None and s[key]["ratio"] <= 1.1
        lines += ["", f"cost of the gate at {key} req/s ({a.gate_prompt_tokens}-token prompts), "
                  f"{a.gate_seconds:g} s windows, on and off interleaved; router CPU per request",
                  "| run | load | on us | off us | on / off | idle ms/s on, off | net of idle us "
                  "on, off | pump thread ms/s | on queue p99 ms | not 200 |",
                  "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for i, run in enumerate(runs):
            r = run[key]
            lines.append(
                f"| {i + 1} | {run['load']:.2f} | {f(r['on']['cpu_us_per_request'])} | "
                f"{f(r['off']['cpu_us_per_request'])} | {f(r['ratio'], 3)} | "
                f"{f(r['on']['idle_cpu_ms_per_s'], 2)}, {f(r['off']['idle_cpu_ms_per_s'], 2)} | "
                f"{f(r['on']['net_cpu_us_per_request'])}, {f(r['off']['net_cpu_us_per_request'])} "
                f"| {f(r['on']['pump_thread_ms_per_s'], 2)} | {f(r['on']['queue']['p99_ms'], 2)} | "
                f"{r['on']['requests'] - r['on']['ok'] + r['off']['requests'] - r['off']['ok']} |")
        lines.append(f"median at {key} req/s: on {f(on)} us, off {f(off)} us "
                     f"({f(s[key]['ratio'], 3)}x, goal <= 1.1: "
                     f"{'met' if s[key]['goal_met'] else 'missed'}); net of idle "
                     f"{f(s[key]['net_on_us'])} vs {f(s[key]['net_off_us'])} us"
                     + ("" if s[key]["on_queue_p99_ms"] < 1 else
                        f"; NOT under saturation: requests waited in flow control (p99 "
                        f"{f(s[key]['on_queue_p99_ms'])} ms)"))
    return s, lines


def smoke_check(results):
    """The structure a --smoke run must have; returns the problems."""
    bad = []
    for r in results.get("noisy", {}).get("runs", []):
        with_a = r["with_a_on"]
        if with_a["a_429"] == 0 or set(with_a["a_reasons"]) != {"rate-limited-requests"} \
                or not with_a["a_retry_after"]:
            bad.append(f"noisy: A was not refused for its rate with a Retry-After: {with_a}")
        if any(r[p]["b_failed"] or r[p]["b_ttft_p99_ms"] is None for p in
               ("alone", "with_a_on", "with_a_off", "a_at_quota_on")):
            bad.append(f"noisy: B failed: {r}")
    for r in results.get("urgent", {}).get("runs", []):
        on = r["with_batch_on"]
        if not on["busy"] or on["batch_done_per_s"] <= 0 or not on["batch_queue"]["count"]:
            bad.append(f"urgent: no batch work through flow control: {on}")
        if any(r[p]["interactive_failed"] for p in ("alone", "with_batch_on", "with_batch_off")):
            bad.append(f"urgent: interactive failed: {r}")
    for r in results.get("agents", {}).get("runs", []):
        if r["failed"] or r["router_cpu_us_per_request"] <= 0 or not r["queued_requests"]:
            bad.append(f"agents: {r}")
    for r in results.get("gate", {}).get("runs", []):
        for rate in r.values():
            if isinstance(rate, dict) and any(rate[x]["ok"] != rate[x]["requests"] or
                                              not rate[x]["ok"] for x in ("on", "off")):
                bad.append(f"gate: {rate}")
    return bad


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    router_fleet.add_sim_bench_args(ap, "flow-control")
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--wait-load", type=float, default=0,
                    help="before each run, wait (10 min at most) for the 1-min load to fall "
                         "under this; 0: do not wait")
    ap.add_argument("--engines", type=int, default=4)
    ap.add_argument("--max-num-seqs", dest="slots", type=int, default=8)
    ap.add_argument("--router-threads", type=int, default=2)
    ap.add_argument("--detector", choices=("concurrency", "utilization"), default="concurrency")
    ap.add_argument("--extra-concurrency", type=int, default=0,
                    help="concurrency-detector's maxConcurrency over the engines' slots")
    ap.add_argument("--seconds", type=float, default=60, help="measured window per phase")
    ap.add_argument("--warmup", type=float, default=3)
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--noisy-quota", type=float, default=2)
    ap.add_argument("--noisy-factor", type=float, default=100)
    ap.add_argument("--b-rate", type=float, default=10)
    ap.add_argument("--b-quota", type=float, default=20)
    ap.add_argument("--interactive-rate", type=float, default=8)
    ap.add_argument("--interactive-prompt-tokens", type=int, default=256)
    ap.add_argument("--interactive-tokens", type=int, default=16)
    ap.add_argument("--batch-concurrency", type=int, default=0,
                    help="0: twice the fleet's slots")
    ap.add_argument("--batch-prompt-tokens", type=int, default=64)
    ap.add_argument("--batch-tokens", type=int, default=16)
    ap.add_argument("--sample-ms", type=float, default=100)
    ap.add_argument("--agents", type=int, default=1000)
    ap.add_argument("--agents-engines", type=int, default=64)
    ap.add_argument("--agents-model", type=pathlib.Path, default=router_fleet.TINY_MODEL)
    ap.add_argument("--agents-engine-mib", type=int, default=40,
                    help="memory to expect per engine in the MemAvailable check")
    ap.add_argument("--agents-max-seqs", type=int, default=8)
    ap.add_argument("--agents-kv-blocks", type=int, default=1024)
    ap.add_argument("--agents-max-model-len", type=int, default=2048)
    ap.add_argument("--agents-scrape-ms", type=int, default=500)
    ap.add_argument("--agents-turns", type=int, default=5)
    ap.add_argument("--agents-systems", type=int, default=4)
    ap.add_argument("--agents-system-words", type=int, default=120)
    ap.add_argument("--agents-user-words", type=int, default=20)
    ap.add_argument("--agents-max-tokens", type=int, default=16)
    ap.add_argument("--agents-tenant-rps", type=float, default=100)
    ap.add_argument("--think-min", type=float, default=2)
    ap.add_argument("--think-max", type=float, default=8)
    ap.add_argument("--gate-rates", default="25,50",
                    help="requests/s, comma-separated: a pair of windows each")
    ap.add_argument("--gate-prompt-tokens", type=int, default=32,
                    help="short, so that the rates stay well under the fleet's capacity "
                         "(128-token prompts queue from ~90 req/s on 4 engines, 32-token ones "
                         "at times from 100 req/s on a loaded machine)")
    ap.add_argument("--gate-seconds", type=float, default=20)
    ap.add_argument("--idle-seconds", type=float, default=3)
    ap.add_argument("--smoke", action="store_true",
                    help="every scenario for seconds on tiny-llama3; exits non-zero unless "
                         "the results have the expected structure")
    a = ap.parse_args()
    if a.smoke:
        a.model, a.runs, a.engines, a.seconds, a.warmup = router_fleet.TINY_MODEL, 1, 2, 2, 1
        a.noisy_quota, a.noisy_factor, a.b_rate, a.interactive_rate = 1, 20, 5, 5
        a.agents, a.agents_engines, a.agents_turns, a.think_min, a.think_max = 40, 4, 2, 0.1, 0.5
        a.agents_system_words, a.gate_rates, a.gate_seconds, a.idle_seconds = 40, "20", 2, 0.5
    a.batch_concurrency = a.batch_concurrency or 2 * a.engines * a.slots
    a.gate_rates = [float(r) for r in a.gate_rates.split(",")]
    a.latency = router_fleet.calibrated_latency(a.speedup)
    return a


def main():
    a = parse_args()
    a.out_dir.mkdir(parents=True, exist_ok=True)
    scenarios = a.scenarios.split(",")
    unknown = set(scenarios) - set(SCENARIOS)
    if unknown:
        sys.exit(f"unknown scenarios {sorted(unknown)}; known: {', '.join(SCENARIOS)}")
    print(f"logs in {a.out_dir}; latency {a.latency}; load average {router_fleet.load_average()}",
          flush=True)
    run = {"noisy": (run_noisy, noisy_report), "urgent": (run_urgent, urgent_report),
           "agents": (run_agents, agents_report), "gate": (run_gate, gate_report)}
    results, lines = {}, []
    for s in scenarios:
        runs = run[s][0](a)
        summary, table = run[s][1](a, runs)
        results[s] = {"runs": runs, "summary": summary}
        lines += table
    print("\n".join(lines))
    router_fleet.write_results(a, results)
    if a.smoke:
        bad = smoke_check(results)
        for b in bad:
            print("SMOKE FAILED:", b)
        return 1 if bad else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
