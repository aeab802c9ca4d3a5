#!/usr/bin/env python3
"""Pick latency and router CPU per request: the ext_proc (gRPC) front vs the HTTP proxy
front of one router, on the same workload, side by side in one run.

Three sim engines (zero latency) behind `switchyard router --ext-proc-port 0`. Each of N
requests (a shared-prefix completion prompt) goes once over ext_proc (headers + body in one
stream; the time until the pick's headers response, then every body chunk, has come back) and
once over HTTP (the whole proxied completion, which includes the engine's work: the HTTP
number is an upper bound on its pick). CPU per request: the router's user+system CPU
(/proc/PID/stat) over each phase, divided by N.

    SWITCHYARD_BIN=build/release/src/cli/switchyard .venv/bin/python bench/ext_proc_bench.py -n 500
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "e2e"))

import grpc  # noqa: E402
import requests  # noqa: E402

from engine_server import MODEL_NAME, EngineServer  # noqa: E402
from router_server import Router  # noqa: E402
from test_router_ext_proc import completion_body, grpc_ports, pick  # noqa: E402


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("-n", type=int, default=300)
    args = parser.parse_args()
    engines = [EngineServer("--backend", "sim", "--sim-latency", "zero") for _ in range(3)]
    for e in engines:
        e.spawn()
    for e in engines:
        e.wait_ready()
    router = Router(engines, args=("--ext-proc-port", 0))
    try:
        port, _ = grpc_ports(router)
        # One channel (as a gateway keeps one), and one HTTP keep-alive session.
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        session = requests.Session()
        prompts = [f"Shared system prompt {i % 10}. " * 40 + f"question {i}" for i in range(args.n)]
        results = {}
        for front in ("ext_proc", "http"):
            latencies = []
            cpu0 = cpu_seconds(router.proc.pid)
            for p in prompts:
                t0 = time.perf_counter()
                if front == "ext_proc":
                    s, first, _ = pick(port, completion_body(p), pieces=1, channel=channel)
                    latencies.append(time.perf_counter() - t0)
                    s.cancel()
                else:
                    r = session.post(f"{router.url}/v1/completions", timeout=30,
                                      json={"model": MODEL_NAME, "prompt": p, "max_tokens": 1})
                    latencies.append(time.perf_counter() - t0)
                    assert r.status_code == 200, r.text
            cpu = (cpu_seconds(router.proc.pid) - cpu0) / args.n
            results[front] = (statistics.median(latencies), percentile(latencies, 0.99), cpu)
        for front, (p50, p99, cpu) in results.items():
            print(f"{front:9s} p50 {p50 * 1e3:7.3f} ms  p99 {p99 * 1e3:7.3f} ms  "
                  f"router CPU {cpu * 1e6:8.1f} us/request")
        print(f"ratio ext_proc/http p99 {results['ext_proc'][1] / results['http'][1]:.2f}, "
              f"CPU {results['ext_proc'][2] / results['http'][2]:.2f}")
    finally:
        router.stop()
        for e in engines:
            e.stop()


if __name__ == "__main__":
    main()
