#!/usr/bin/env python3
"""Pick latency and picker CPU per request: the router's ext_proc (gRPC) front, its HTTP proxy
front, and (--peer lwepp) the Gateway API Inference Extension's lightweight endpoint picker,
side by side on the same workload, in interleaved runs (the median of --runs is reported).

Three sim engines (zero latency). Each of N requests is a shared-prefix completion prompt.
ext_proc (ours and lwepp's): the same load client, bench/ext_proc_client.cc (C++, from the
same protocol definitions; --client python uses grpcio instead, to show what that client
costs), one shared channel, one Process stream per request: headers, the body in one message,
timed until the headers response and every re-sent body chunk are back; then the stream is
half-closed and finished. HTTP: the whole proxied completion over a keep-alive session
(Python requests), which includes the engine's work: an upper bound on its pick. CPU per
request: the picker process's user+system CPU (/proc/PID/stat) over the phase, divided by N;
the client's own CPU is reported too, and requests/s (N over the phase's wall time: the
throughput with --concurrency C).

lwepp needs scripts/setup_kube.sh and scripts/build_lwepp.sh (a real kube-apiserver holds its
InferencePool and pods: tests/e2e/lwepp_server.py); it picks round-robin without reading the
body, ours tokenizes and scores the prompt (prefix, load).

    ninja -C build/release switchyard bench/sy_ext_proc_client
    SWITCHYARD_BIN=build/release/src/cli/switchyard .venv/bin/python bench/ext_proc_bench.py \\
        -n 1000 --runs 3 --peer lwepp
"""
import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "e2e"))

import grpc  # noqa: E402
import requests  # noqa: E402

from conftest import switchyard_bin  # noqa: E402
from engine_server import MODEL_NAME, EngineServer  # noqa: E402
from router_server import Router  # noqa: E402
from test_router_ext_proc import completion_body, destination, grpc_ports, pick  # noqa: E402


def client_bin():
    """$SY_EXT_PROC_CLIENT, else sy_ext_proc_client in the build tree of $SWITCHYARD_BIN, else
    in build/release."""
    if os.environ.get("SY_EXT_PROC_CLIENT"):
        return pathlib.Path(os.environ["SY_EXT_PROC_CLIENT"])
    near = pathlib.Path(switchyard_bin()).parents[2] / "bench" / "sy_ext_proc_client"
    repo = pathlib.Path(__file__).resolve().parents[1]
    return near if near.exists() else repo / "build" / "release" / "bench" / "sy_ext_proc_client"


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def routed(port):
    """True once a pick on `port` names an endpoint."""
    s, first, _ = pick(port, completion_body("ready?"), pieces=1)
    s.cancel()
    return first.HasField("request_headers")


def run_cpp_client(port, bodies_file, n, concurrency, cancel):
    """Latencies (s) and the client's CPU (s) of n picks by sy_ext_proc_client."""
    out = subprocess.run([str(client_bin()), "--target", f"127.0.0.1:{port}", "--bodies",
                          bodies_file, "--requests", str(n), "--concurrency", str(concurrency),
                          *(["--cancel"] if cancel else [])],
                         check=True, capture_output=True, text=True).stdout.splitlines()
    latencies, outcomes = [], set()
    for line in out[:-1]:
        us, outcome = line.split(" ", 1)
        latencies.append(int(us) / 1e6)
        outcomes.add(outcome.split(" ")[0])
    assert outcomes == {"routed"}, outcomes
    return latencies, int(out[-1].split()[1]) / 1e6


def run_python_client(port, bodies, n):
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    latencies = []
    c0 = time.process_time()
    for i in range(n):
        t0 = time.perf_counter()
        s, first, _ = pick(port, bodies[i % len(bodies)], pieces=1, channel=channel)
        latencies.append(time.perf_counter() - t0)
        destination(first)
        s.cancel()
    cpu = time.process_time() - c0
    channel.close()
    return latencies, cpu


def run_http(router, bodies, n):
    session = requests.Session()
    latencies = []
    c0 = time.process_time()
    for i in range(n):
        t0 = time.perf_counter()
        r = session.post(f"{router.url}/v1/completions", data=bodies[i % len(bodies)],
                         headers={"content-type": "application/json"}, timeout=30)
        latencies.append(time.perf_counter() - t0)
        assert r.status_code == 200, r.text
    return latencies, time.process_time() - c0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("-n", type=int, default=1000, help="requests per front per run")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--peer", choices=["lwepp"], action="append", default=[])
    parser.add_argument("--client", choices=["cpp", "python"], default="cpp")
    parser.add_argument("--concurrency", type=int, default=1, help="C++ client threads")
    parser.add_argument("--cancel", action="store_true",
                        help="the C++ client cancels each stream after its pick")
    parser.add_argument("--no-http", action="store_true")
    parser.add_argument("--ext-proc-threads", type=int, default=0,
                        help="the router's extProc.threads (0: its default)")
    args = parser.parse_args()
    engines = [EngineServer("--backend", "sim", "--sim-latency", "zero") for _ in range(3)]
    for e in engines:
        e.spawn()
    for e in engines:
        e.wait_ready()
    if args.ext_proc_threads:
        router = Router(engines, extra=f"extProc: {{port: 0, threads: {args.ext_proc_threads}}}\n")
    else:
        router = Router(engines, args=("--ext-proc-port", 0))
    lwepp = None
    tmp = tempfile.TemporaryDirectory(prefix="sy-ext-proc-bench-")
    try:
        port, _ = grpc_ports(router)
        pickers = {"ext_proc": (port, router.proc.pid)}
        if "lwepp" in args.peer:
            from lwepp_server import Lwepp, lwepp_missing
            missing = lwepp_missing()
            if missing:
                sys.exit(f"--peer lwepp needs {missing} (scripts/setup_kube.sh, "
                         "scripts/build_lwepp.sh)")
            lwepp = Lwepp([e.port for e in engines], routed)
            pickers["lwepp"] = (lwepp.port, lwepp.proc.pid)
        bodies = [completion_body(f"Shared system prompt {i % 10}. " * 40 + f"question {i}")
                  for i in range(args.n)]
        bodies_file = os.path.join(tmp.name, "bodies.jsonl")
        with open(bodies_file, "wb") as f:
            f.write(b"\n".join(bodies) + b"\n")
        fronts = list(pickers) + ([] if args.no_http else ["http"])
        results = {front: [] for front in fronts}
        for run in range(args.runs):
            for front in fronts:
                pid = router.proc.pid if front == "http" else pickers[front][1]
                cpu0, wall0 = cpu_seconds(pid), time.perf_counter()
                if front == "http":
                    latencies, client_cpu = run_http(router, bodies, args.n)
                elif args.client == "cpp":
                    latencies, client_cpu = run_cpp_client(pickers[front][0], bodies_file,
                                                           args.n, args.concurrency, args.cancel)
                else:
                    latencies, client_cpu = run_python_client(pickers[front][0], bodies, args.n)
                cpu = (cpu_seconds(pid) - cpu0) / args.n
                row = (statistics.median(latencies), percentile(latencies, 0.99), cpu,
                       client_cpu / args.n, args.n / (time.perf_counter() - wall0))
                results[front].append(row)
                print(f"run {run} {front:9s} p50 {row[0] * 1e3:7.3f} ms  p99 {row[1] * 1e3:7.3f} "
                      f"ms  picker CPU {row[2] * 1e6:7.1f} us/req  client CPU "
                      f"{row[3] * 1e6:7.1f} us/req  {row[4]:7.0f} req/s", flush=True)
        print(f"median of {args.runs} runs, {args.n} requests each, "
              f"{args.client} client x{args.concurrency}:")
        summary = {}
        for front, rows in results.items():
            summary[front] = [statistics.median(r[i] for r in rows) for i in range(5)]
            p50, p99, cpu, client, rps = summary[front]
            print(f"{front:9s} p50 {p50 * 1e3:7.3f} ms  p99 {p99 * 1e3:7.3f} ms  "
                  f"picker CPU {cpu * 1e6:7.1f} us/req  client CPU {client * 1e6:7.1f} us/req  "
                  f"{rps:7.0f} req/s")
        print(json.dumps({front: {"p50_ms": v[0] * 1e3, "p99_ms": v[1] * 1e3,
                                  "cpu_us_per_request": v[2] * 1e6,
                                  "client_cpu_us_per_request": v[3] * 1e6,
                                  "requests_per_s": v[4]}
                          for front, v in summary.items()}))
    finally:
        if lwepp is not None:
            lwepp.stop()
        router.stop()
        for e in engines:
            e.stop()
        tmp.cleanup()


if __name__ == "__main__":
    main()
