#!/usr/bin/env python3
"""KV tiers: TTFT of a long prompt whose prefix is in the pool, in a tier, or nowhere.

One release-build engine (`switchyard engine --model DIR --threads T --block-size 16
--max-model-len L --num-gpu-blocks-override B --kv-offloading-size G`), started once: a pool
of B blocks that holds one prompt of --prompt-tokens (4096) tokens but not two, and a host
tier under it of G GiB (by default room for every prompt the run sends, so the tier evicts
nothing). Prompts are random token ids of the model's vocabulary (its added/special tokens
left out), seeded; every request is a streaming POST /v1/completions with max_tokens 1, and
TTFT is measured at the client, from the send to the first chunk that carries a choice.

Each run takes a new cache_salt s, so no run sees another's blocks, and sends prompt P with
salt s three times:
  - recompute: nothing of P is cached anywhere, the whole prompt is prefilled;
  - pool: P again once the tier's copy of its blocks is done (the copy runs on threads
    that share the cores): every full block but the last comes from the pool (the last
    block, 16 tokens, is always computed: a hit leaves at least one token to compute);
  - host tier: other prompts of the same length (--evict-prompts, by default just enough to
    cycle the pool once) take the whole pool, each sent once the tier has stored what came
    before it (switchyard:kv_tier_stored_blocks_total); then P loads its blocks from the
    tier instead of computing them.
The eviction prompts are the same every run, with their own salt: the first run computes
them, later runs load them from the tier too, which keeps a bench-1b run at one prefill.
Every request's source is checked on the engine's counters (vllm:prompt_tokens_by_source_total
{source="local_cache_hit"} for the pool, switchyard:kv_tier_hits_total{medium="CPU"} for the
tier): recompute must hit nothing, pool must hit the pool for all its hit tokens, host must
load them all from the tier; a run where that fails is reported and makes the exit status 1.
The engine's own time for the load (vllm:kv_offload_total_time_total{transfer_type=
"CPU_to_GPU"}) is reported beside the host tier's TTFT.

--tier disk or --tier redis measures that tier instead: the host tier shrinks to 2 blocks
(so P's blocks are only on disk, or in Redis, when P comes back) and the tier takes the host
tier's size; for redis the script runs Debian's redis-server on a free loopback port. The
"host" step then loads from that tier, and its counters are read under its medium.

Prints each run, the medians and the ratios recompute / pool and recompute / host (issue 21's
goal: >= 10x on bench-1b), as a markdown table and one JSON line; --json-out keeps every run.
Build first: cmake --preset release && ninja -C build/release switchyard. Bench models:
.venv/bin/python tools/gen_models.py --out models --seed 0 --only bench-135m (or bench-1b).

usage: .venv/bin/python bench/kv_tier_ttft.py [--bin PATH] [--model DIR] [--runs 5]
           [--prompt-tokens 4096] [--threads 2] [--pool-blocks B] [--evict-prompts N]
           [--tier-gib G] [--tier host|disk|redis] [--json-out FILE] [--smoke]
"""
import argparse
import http.client
import json
import math
import pathlib
import random
import re
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request

REPO = pathlib.Path(__file__).resolve().parents[1]
READY_RE = re.compile(r"serving (\S+) on (http://\S+)")
LENDING_RE = re.compile(r"KV blocks lent on (\S+)")
EVICT_SALT = "kv-tier-ttft-evict"
WARM_UP_TOKENS = 64


# ---------------------------------------------------------------- prompts

def vocabulary(model_dir):
    """The model's token ids that are not added (special) tokens."""
    config = json.loads((model_dir / "config.json").read_text())
    tokenizer = json.loads((model_dir / "tokenizer.json").read_text())
    added = {t["id"] for t in tokenizer.get("added_tokens", [])}
    return [i for i in range(config["vocab_size"]) if i not in added]


def kv_bytes_per_token(model_dir):
    """K and V of every layer; the engine keeps f32 KV for f32 weights, else f16."""
    c = json.loads((model_dir / "config.json").read_text())
    head_dim = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
    elem = 4 if c.get("torch_dtype") == "float32" else 2
    return 2 * c["num_hidden_layers"] * c["num_key_value_heads"] * head_dim * elem


def prompt(ids, seed, key, n_tokens):
    rng = random.Random(f"{seed}/{key}")
    return [rng.choice(ids) for _ in range(n_tokens)]


# ---------------------------------------------------------------- engine

class Engine:
    """The engine process, its URL and served name, and its log; with `lends`, also where it
    lends KV blocks to peers (kv_address)."""

    def __init__(self, argv, log_path, start_timeout, env=None, lends=False):
        self.log = open(log_path, "w")
        self.log_path = log_path
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self.log, text=True,
                                     env=env)
        self.url, self.kv_address, self.lends = None, None, lends
        self.ready = threading.Event()
        threading.Thread(target=self._read_stdout, daemon=True).start()
        if not self.ready.wait(start_timeout) or not self.url or (lends and not self.kv_address):
            self.stop()
            raise SystemExit(f"the engine did not get ready (waited up to {start_timeout} s); "
                             f"see {log_path}")

    def _read_stdout(self):
        for line in self.proc.stdout:  # the ready lines come once the ports are bound
            m = READY_RE.search(line)
            if m:
                self.name, self.url = m.group(1), m.group(2)
            m = LENDING_RE.search(line)
            if m:
                self.kv_address = m.group(1)
            if self.url and (self.kv_address or not self.lends):
                break
        self.ready.set()  # also when the engine exited without them
        self.proc.stdout.read()  # keep draining, so the engine never blocks on a full pipe

    def metrics(self):
        with urllib.request.urlopen(self.url + "/metrics", timeout=30) as r:
            return r.read().decode()

    def stop(self):
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def sample(text, name, **labels):
    """The sum of `name`'s series whose labels include `labels` (0 when there is none)."""
    total = 0.0
    for m in re.finditer(rf"^{re.escape(name)}(?:\{{([^}}]*)\}})? (\S+)$", text, re.M):
        have = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1) or ""))
        if all(have.get(k) == v for k, v in labels.items()):
            total += float(m.group(2))
    return total


def counters(engine, medium):
    text = engine.metrics()
    # Blocks loaded from the tier land in the pool before the prompt's lookup, so
    # vllm:prefix_cache_hits_total counts them too; the by-source split does not.
    return {"pool_hits": sample(text, "vllm:prompt_tokens_by_source_total",
                                source="local_cache_hit"),
            "tier_hits": sample(text, "switchyard:kv_tier_hits_total", medium=medium),
            "stored_blocks": sample(text, "switchyard:kv_tier_stored_blocks_total",
                                    medium=medium),
            "loaded_bytes": sample(text, "vllm:kv_offload_total_bytes_total",
                                   transfer_type=f"{medium}_to_GPU"),
            "load_ms": 1e3 * sample(text, "vllm:kv_offload_total_time_total",
                                    transfer_type=f"{medium}_to_GPU")}


def wait_stored(engine, medium, blocks, timeout_s):
    """Waits until the tier has stored `blocks` blocks in all (stores run on copy threads)."""
    deadline = time.monotonic() + timeout_s
    while counters(engine, medium)["stored_blocks"] < blocks:
        if time.monotonic() > deadline:
            raise SystemExit(f"the tier stored {counters(engine, medium)['stored_blocks']:.0f} "
                             f"blocks, not {blocks}, in {timeout_s} s")
        time.sleep(0.05)


def start_redis():
    """Debian's redis-server on a free loopback port, without persistence: (process, port)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                             "--save", "", "--appendonly", "no"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, port
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("redis-server did not start (scripts/setup_test.sh installs it)")
            time.sleep(0.02)


def stop_redis(redis):
    if redis is not None:
        redis[0].kill()
        redis[0].wait()


# ---------------------------------------------------------------- requests

def stream_ttft(engine, tokens, salt, timeout_s, what, headers=None):
    """Streams one completion of max_tokens 1; returns its TTFT in s. `what` names the
    request in errors."""
    body = json.dumps({"model": engine.name, "prompt": tokens, "max_tokens": 1,
                       "temperature": 0, "stream": True, "cache_salt": salt}).encode()
    url = urllib.parse.urlsplit(engine.url)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=timeout_s)
    try:
        t0 = time.perf_counter()
        conn.request("POST", "/v1/completions", body,
                     {"Content-Type": "application/json", **(headers or {})})
        resp = conn.getresponse()
        if resp.status != 200:
            raise SystemExit(f"{what}: HTTP {resp.status}: {resp.read()[:300]!r}")
        ttft, lines = None, []
        for raw in resp:
            line = raw.strip()
            lines.append(line)
            if ttft is None and line.startswith(b"data:") and line != b"data: [DONE]":
                if json.loads(line[5:]).get("choices"):
                    ttft = time.perf_counter() - t0
    finally:
        conn.close()
    if ttft is None:
        raise SystemExit(f"{what}: the stream ended without a token: {b' '.join(lines)[:500]!r}")
    return ttft


def timed_request(engine, medium, tokens, salt, timeout_s, what):
    """stream_ttft's request; returns (TTFT in s, the tier counters' deltas)."""
    before = counters(engine, medium)
    ttft = stream_ttft(engine, tokens, salt, timeout_s, what)
    after = counters(engine, medium)
    return ttft, {k: after[k] - before[k]
                  for k in ("pool_hits", "tier_hits", "loaded_bytes", "load_ms")}


def one_run(engine, a, i, state):
    """recompute, pool, evict, host tier for P under a new salt; returns the run's record."""
    salt = f"kv-tier-ttft-{a.seed}-{i}"
    p = state["prompt"]
    run = {"salt": salt}
    for step in ("recompute", "pool"):
        ttft, delta = timed_request(engine, a.medium, p, salt, a.request_timeout,
                                    f"run {i + 1} {step}")
        run[step] = {"ttft_ms": 1e3 * ttft, **delta}
        if step == "recompute":
            # The tier copies P's blocks after its prefill, on transfer threads that share
            # the cores: the pool step waits for that, as the host step does for its stores.
            state["stored_blocks"] += a.full_blocks
            wait_stored(engine, a.medium, state["stored_blocks"], a.request_timeout)
    run["evict"] = []
    for k, e in enumerate(state["evictors"]):
        ttft, delta = timed_request(engine, a.medium, e, EVICT_SALT, a.request_timeout,
                                    f"run {i + 1} eviction {k + 1}")
        run["evict"].append({"ttft_ms": 1e3 * ttft, **delta})
        if delta["tier_hits"] + delta["pool_hits"] < a.hit_tokens:  # computed: stored next
            state["stored_blocks"] += a.full_blocks
        # Blocks being stored are pinned in the pool (the next prompt would wait for them),
        # and P must not load during a copy.
        wait_stored(engine, a.medium, state["stored_blocks"], a.request_timeout)
    ttft, delta = timed_request(engine, a.medium, p, salt, a.request_timeout,
                                f"run {i + 1} host")
    run["host"] = {"ttft_ms": 1e3 * ttft, **delta}
    want = {"recompute": (0, 0), "pool": (a.hit_tokens, 0), "host": (0, a.hit_tokens)}
    run["problems"] = [f"{step}: {run[step]['pool_hits']:.0f} pool / "
                       f"{run[step]['tier_hits']:.0f} tier hit tokens, wanted {pool} / {tier}"
                       for step, (pool, tier) in want.items()
                       if (run[step]["pool_hits"], run[step]["tier_hits"]) != (pool, tier)]
    return run


# ---------------------------------------------------------------- report

STEPS = ("recompute", "pool", "host")


def summary(runs, a):
    med = {s: statistics.median(r[s]["ttft_ms"] for r in runs) for s in STEPS}
    return {"model": a.model.name, "tier": a.tier, "prompt_tokens": a.prompt_tokens,
            "runs": len(runs),
            "recompute_ms": med["recompute"], "pool_ms": med["pool"], "host_ms": med["host"],
            "host_load_ms": statistics.median(r["host"]["load_ms"] for r in runs),
            "recompute_over_pool": med["recompute"] / med["pool"],
            "recompute_over_host": med["recompute"] / med["host"]}


def markdown(s):
    return "\n".join([
        "| model | tier | prompt tokens | recompute ms | pool ms | tier ms | recompute / pool "
        "| recompute / tier | tier load ms |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        f"| {s['model']} | {s['tier']} | {s['prompt_tokens']} | {s['recompute_ms']:.1f} "
        f"| {s['pool_ms']:.1f} "
        f"| {s['host_ms']:.1f} | {s['recompute_over_pool']:.1f}x "
        f"| {s['recompute_over_host']:.1f}x | {s['host_load_ms']:.1f} |"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", type=pathlib.Path, default=REPO / "build/release/src/cli/switchyard")
    ap.add_argument("--model", type=pathlib.Path, default=REPO / "models/bench/bench-135m")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--prompt-tokens", type=int, default=4096)
    ap.add_argument("--max-model-len", type=int, help="default: --prompt-tokens + 512")
    ap.add_argument("--block-size", type=int, default=16)
    ap.add_argument("--pool-blocks", type=int,
                    help="--num-gpu-blocks-override; default: --max-model-len's blocks + 16")
    ap.add_argument("--evict-prompts", type=int,
                    help="prompts sent to push P out of the pool; default: enough to fill it")
    ap.add_argument("--tier-gib", type=float,
                    help="--kv-offloading-size; default: room for every prompt sent, x1.5")
    ap.add_argument("--tier", choices=("host", "disk", "redis"), default="host",
                    help="the tier P comes back from")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--start-timeout", type=float, default=300)
    ap.add_argument("--request-timeout", type=float, default=1800)
    ap.add_argument("--out-dir", type=pathlib.Path, default=REPO / "build/kv-tier-ttft")
    ap.add_argument("--json-out", type=pathlib.Path)
    ap.add_argument("--smoke", action="store_true",
                    help="seconds-long check on models/tiny-llama3: a 256-token prompt, 1 run, "
                         "1 thread; exits non-zero unless every request hit where it should")
    a = ap.parse_args()
    if a.smoke:
        a.model, a.prompt_tokens, a.runs, a.threads = REPO / "models/tiny-llama3", 256, 1, 1
        a.request_timeout = 60
    a.max_model_len = a.max_model_len or a.prompt_tokens + 512
    a.pool_blocks = a.pool_blocks or math.ceil(a.max_model_len / a.block_size) + 16
    # A hit leaves at least one token to compute: the full blocks before the last token are
    # what a hit may cover, and what the tier stores of a prompt.
    a.hit_tokens = (a.prompt_tokens - 1) // a.block_size * a.block_size
    a.full_blocks = a.hit_tokens // a.block_size
    a.evict_prompts = a.evict_prompts or math.ceil(a.pool_blocks / a.full_blocks)
    prompt_bytes = a.full_blocks * a.block_size * kv_bytes_per_token(a.model)
    a.tier_gib = a.tier_gib or 1.5 * (a.runs + a.evict_prompts) * prompt_bytes / 2**30
    a.out_dir.mkdir(parents=True, exist_ok=True)

    ids = vocabulary(a.model)
    state = {"prompt": prompt(ids, a.seed, "P", a.prompt_tokens),
             "evictors": [prompt(ids, a.seed, f"evict/{k}", a.prompt_tokens)
                          for k in range(a.evict_prompts)],
             "stored_blocks": 0}  # blocks the tier must have stored by now
    a.medium = {"host": "CPU", "disk": "DISK", "redis": "REDIS"}[a.tier]
    argv = [str(a.bin), "engine", "--model", str(a.model), "--host", "127.0.0.1", "--port", "0",
            "--threads", str(a.threads), "--block-size", str(a.block_size), "--max-model-len",
            str(a.max_model_len), "--num-gpu-blocks-override", str(a.pool_blocks)]
    redis = None
    if a.tier == "host":
        argv += ["--kv-offloading-size", repr(a.tier_gib)]
    else:
        block_gib = a.block_size * kv_bytes_per_token(a.model) / 2**30
        argv += ["--kv-offloading-size", repr(2.5 * block_gib)]
    if a.tier == "disk":
        argv += ["--kv-offloading-disk-path", str(a.out_dir / "disk"),
                 "--kv-offloading-disk-size", repr(a.tier_gib)]
    if a.tier == "redis":
        redis = start_redis()
        argv += ["--kv-offloading-redis", f"127.0.0.1:{redis[1]}"]
    print(" ".join(argv), flush=True)
    try:
        engine = Engine(argv, a.out_dir / "engine.log", a.start_timeout)
    except BaseException:
        stop_redis(redis)
        raise
    runs = []
    try:
        # Warm-up (first-request costs: threads, page faults in the weights), cached nowhere
        # that P or the evictors could hit.
        timed_request(engine, a.medium, prompt(ids, a.seed, "warm-up", WARM_UP_TOKENS),
                      "warm-up", a.request_timeout, "warm-up")
        state["stored_blocks"] = (WARM_UP_TOKENS - 1) // a.block_size
        for i in range(a.runs):
            runs.append(one_run(engine, a, i, state))
            r = runs[-1]
            print(f"run {i + 1}/{a.runs}: recompute {r['recompute']['ttft_ms']:.1f} ms, pool "
                  f"{r['pool']['ttft_ms']:.1f} ms, {a.tier} tier {r['host']['ttft_ms']:.1f} ms "
                  f"({r['host']['tier_hits']:.0f} tokens, {r['host']['loaded_bytes'] / 2**20:.1f}"
                  f" MiB loaded in {r['host']['load_ms']:.1f} ms); evictions "
                  f"{', '.join('%.0f' % e['ttft_ms'] for e in r['evict'])} ms"
                  + (f"  PROBLEMS {r['problems']}" if r["problems"] else ""), flush=True)
    finally:
        engine.stop()
        stop_redis(redis)
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
