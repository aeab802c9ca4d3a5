#!/usr/bin/env python3
"""Router replicas: does throughput scale with replicas that share state, and does the
approximate prefix routing stay as good? One router vs two (the same config, sharedState
through one redis-server in both cases, so the sync's own cost is in both; --no-shared
drops it, for the cost of sharing and the hit rate without it), each behind
haproxy (Debian's, one thread, round robin, HTTP keep-alive to the routers), over the same
simulated engines (`--backend sim --sim-latency zero`, tiny-llama3, 64 slots each).

Workload: wrk (Debian's; one thread, --connections, --duration s at saturation) POSTs
/v1/completions (max_tokens 1) whose prompts come from --groups prefix groups: each request
is one group's shared prefix of --prefix-words pseudo-words plus a fresh suffix of
--suffix-words, groups drawn uniformly (a Lua script; the seed differs per window, so no
window finds another's prefixes cached). Each window starts a fresh fleet (engines, redis,
routers, haproxy), so the engines' prefix caches start cold.

Reported per window: requests/s at saturation, non-2xx/errors, the routers' CPU per request,
and the prefix-cache hit rate the engines report (vllm:prefix_cache_hits_total over
vllm:prefix_cache_queries_total, summed over engines, over the window): a request routed to
an engine that already holds its group's prefix hits; one sent elsewhere misses. Windows
alternate one and two routers (the order rotates per run); medians over --runs.
Goals (issue 23): two replicas >= 1.8x one replica's requests/s; hit rate within 2 points.

usage: .venv/bin/python bench/router_replicas_bench.py [--runs 3] [--duration 10]
           [--engines 8] [--threads 1] [--bin PATH] [--json-out FILE] [--out-dir DIR]
           [--smoke]
"""
import argparse
import json
import pathlib
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

from router_fleet import (Proc, Router, SimEngine, TINY_MODEL, cpu_seconds, default_bin,
                          load_average, median, router_yaml, scoring_profile, stop_all)

WRK_SCRIPT = """
local groups = tonumber(os.getenv("GROUPS"))
local prefix_words = tonumber(os.getenv("PREFIX_WORDS"))
local suffix_words = tonumber(os.getenv("SUFFIX_WORDS"))
math.randomseed(tonumber(os.getenv("SEED")))
local function word(r)
  local w = {}
  for i = 1, 6 do w[i] = string.char(97 + r(26) - 1) end
  return table.concat(w)
end
local prefixes = {}
for g = 1, groups do
  local words = {}
  for i = 1, prefix_words do words[i] = word(math.random) end
  prefixes[g] = table.concat(words, " ")
end
local headers = {["Content-Type"] = "application/json"}
request = function()
  local words = {}
  for i = 1, suffix_words do words[i] = word(math.random) end
  local body = '{"model":"tiny","max_tokens":1,"prompt":"' ..
               prefixes[math.random(groups)] .. " " .. table.concat(words, " ") .. '"}'
  return wrk.format("POST", "/v1/completions", headers, body)
end
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'WRK_JSON {"requests":%d,"duration_us":%d,"errors":%d,"status_errors":%d,' ..
    '"p50_us":%d,"p99_us":%d}\\n',
    summary.requests, summary.duration, e.connect + e.read + e.write + e.timeout, e.status,
    latency:percentile(50), latency:percentile(99)))
end
"""

HAPROXY = """global
    nbthread 1
    maxconn 8192
defaults
    mode http
    timeout connect 2s
    timeout client 60s
    timeout server 60s
    option http-keep-alive
frontend fleet
    bind 127.0.0.1:{port}
    default_backend routers
backend routers
    balance roundrobin
{servers}
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def metric_total(text, name):
    return sum(float(m.group(1)) for m in re.finditer(
        rf"^{re.escape(name)}(?:{{[^}}]*}})? (\S+)$", text, re.M))


def engine_prefix_counts(engines):
    hits = queries = 0.0
    for e in engines:
        text = subprocess.run(["curl", "-s", e.url + "/metrics"], capture_output=True,
                              text=True, timeout=10).stdout
        hits += metric_total(text, "vllm:prefix_cache_hits_total")
        queries += metric_total(text, "vllm:prefix_cache_queries_total")
    return hits, queries


def window(a, replicas, seed, log_dir):
    """One fresh fleet with `replicas` routers; one saturation window of wrk."""
    procs = []
    try:
        redis_port = free_port()
        procs.append(Proc("redis", ["redis-server", "--port", redis_port, "--bind", "127.0.0.1",
                                    "--save", "", "--appendonly", "no"], log_dir))
        engines = [SimEngine(a.bin, f"engine-{i}", log_dir,
                             extra=["--max-num-seqs", "64",
                                    "--num-gpu-blocks-override", a.engine_blocks])
                   for i in range(a.engines)]
        procs += engines
        for e in engines:
            e.wait_ready()
        routers = []
        for r in range(replicas):
            extra = (f"sharedState: {{redis: '127.0.0.1:{redis_port}', key: bench, "
                     f"replicaId: r{r}}}") if a.shared else ""
            text = router_yaml(engines, "tiny", scoring_profile("approximate"),
                               threads=a.threads, tokenizer=TINY_MODEL, extra=extra)
            routers.append(Router(a.bin, f"router-{r}", log_dir, text))
        procs += routers
        for r in routers:
            r.wait_ready(len(engines))
        port = free_port()
        servers = "\n".join(f"    server r{i} 127.0.0.1:{r.port}" for i, r in enumerate(routers))
        cfg = pathlib.Path(log_dir) / "haproxy.cfg"
        cfg.write_text(HAPROXY.format(port=port, servers=servers))
        procs.append(Proc("haproxy", ["haproxy", "-f", cfg, "-db"], log_dir))
        time.sleep(0.3)
        script = pathlib.Path(log_dir) / "replicas.lua"
        script.write_text(WRK_SCRIPT)
        env = {"PATH": "/usr/bin:/bin", "GROUPS": str(a.groups),
               "PREFIX_WORDS": str(a.prefix_words), "SUFFIX_WORDS": str(a.suffix_words),
               "SEED": str(seed)}
        hits0, queries0 = engine_prefix_counts(engines)
        cpu0 = sum(cpu_seconds(r.pid) for r in routers)
        out = subprocess.run(["wrk", "-t1", f"-c{a.connections}", f"-d{a.duration:g}s",
                              "--timeout", "10s", "-s", str(script),
                              f"http://127.0.0.1:{port}/v1/completions"],
                             capture_output=True, text=True, env=env, timeout=a.duration + 60)
        cpu = sum(cpu_seconds(r.pid) for r in routers) - cpu0
        hits, queries = engine_prefix_counts(engines)
        line = next((l for l in out.stdout.splitlines() if l.startswith("WRK_JSON ")), None)
        if line is None:
            raise RuntimeError(f"wrk printed no result: {out.stdout[-800:]} {out.stderr[-800:]}")
        r = json.loads(line[len("WRK_JSON "):])
        r["rps"] = r["requests"] / (r["duration_us"] / 1e6)
        r["router_cpu_us_per_request"] = cpu / max(1, r["requests"]) * 1e6
        r["hit_rate"] = (hits - hits0) / max(1.0, queries - queries0)
        r["load"] = load_average()[0]
        return r
    finally:
        stop_all(procs)  # in reverse order


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", type=pathlib.Path, default=default_bin())
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--duration", type=float, default=10)
    ap.add_argument("--engines", type=int, default=8)
    ap.add_argument("--threads", type=int, default=1, help="each router's listen.threads")
    ap.add_argument("--connections", type=int, default=64)
    ap.add_argument("--groups", type=int, default=32)
    ap.add_argument("--prefix-words", type=int, default=96)
    ap.add_argument("--suffix-words", type=int, default=8)
    ap.add_argument("--engine-blocks", type=int, default=0,
                    help="each engine's KV blocks (0: its default, far more than the groups "
                         "need); small enough that the fleet holds each group's prefix once "
                         "but not twice, routing that sends a group to two engines misses")
    ap.add_argument("--no-shared", dest="shared", action="store_false",
                    help="routers without sharedState (each on its own view): the cost of "
                         "sharing, and the hit rate without it")
    ap.add_argument("--json-out", type=pathlib.Path)
    ap.add_argument("--out-dir", type=pathlib.Path, help="logs (default: a new temp dir)")
    ap.add_argument("--smoke", action="store_true", help="one short run, 2 engines")
    a = ap.parse_args()
    if a.smoke:
        a.runs, a.duration, a.engines, a.connections = 1, 2, 2, 8
    for tool in ("wrk", "haproxy", "redis-server", "curl"):
        if shutil.which(tool) is None:
            sys.exit(f"router_replicas_bench: {tool} is missing (scripts/setup_test.sh)")
    log_dir = a.out_dir or pathlib.Path(tempfile.mkdtemp(prefix="sy-replicas-"))
    log_dir.mkdir(parents=True, exist_ok=True)
    runs = []
    for run in range(a.runs):
        order = (1, 2) if run % 2 == 0 else (2, 1)
        result = {}
        for replicas in order:
            result[replicas] = window(a, replicas, seed=1000 * run + replicas, log_dir=log_dir)
            print(f"run {run + 1}, {replicas} router(s): {json.dumps(result[replicas])}",
                  flush=True)
        runs.append(result)
    one = median([r[1]["rps"] for r in runs])
    two = median([r[2]["rps"] for r in runs])
    hit1 = median([r[1]["hit_rate"] for r in runs])
    hit2 = median([r[2]["hit_rate"] for r in runs])
    print("| run | load | 1 router req/s | 2 routers req/s | ratio | hit rate 1 / 2 | "
          "router CPU us/req 1 / 2 | errors 1 / 2 |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for i, r in enumerate(runs):
        print(f"| {i + 1} | {r[1]['load']:.2f} | {r[1]['rps']:,.1f} | {r[2]['rps']:,.1f} | "
              f"{r[2]['rps'] / r[1]['rps']:.2f} | {r[1]['hit_rate']:.3f} / {r[2]['hit_rate']:.3f}"
              f" | {r[1]['router_cpu_us_per_request']:.0f} / "
              f"{r[2]['router_cpu_us_per_request']:.0f} | "
              f"{r[1]['errors'] + r[1]['status_errors']} / {r[2]['errors'] + r[2]['status_errors']} |")
    print(f"median: 1 router {one:,.1f} req/s, 2 routers {two:,.1f} req/s ({two / one:.2f}x, "
          f"goal >= 1.8); hit rate {hit1:.3f} vs {hit2:.3f} "
          f"({abs(hit1 - hit2) * 100:.1f} points, goal <= 2)")
    if a.json_out:
        a.json_out.write_text(json.dumps({"args": {k: str(v) for k, v in vars(a).items()},
                                          "runs": runs}, indent=1))
    bad = [r for run in runs for r in run.values() if r["errors"] or r["status_errors"]]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
