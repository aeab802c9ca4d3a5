#!/usr/bin/env python3
"""Start-up with compiled steps (issue 24): cold (empty compile cache) vs warm from the host
directory vs warm from Redis (a fresh host directory, the fleet's signed Redis level), and an
eager engine for reference, side by side in one run, alternating run by run.

Each run starts `switchyard engine --compilation-config '{}' --max-num-seqs S` on --model and
measures, from the process's spawn: the ready line, and the first token served (a one-token
completion), and reads /debug/startup: the weights' load time, and the compiled buckets'
total time (record, bind, tune or load) with where each came from. Reports medians over
--runs and warm/cold ratios of the compile time (goal: warm <= 10% of cold) and the start
beyond weight loading (goal: warm under 1 s on bench-135m).

usage: .venv/bin/python bench/compile_startup_bench.py [--model M] [--runs 3] [--max-num-seqs 16]
           [--json-out F] [--smoke (tiny-llama3, one run: the e2e suite's check that it works)]
"""
import argparse
import json
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

import requests

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "e2e"))
from peer_servers import free_port  # noqa: E402
from redis_server import RedisServer  # noqa: E402


def start(binary, model, seqs, flags):
    port = free_port()
    began = time.monotonic()
    proc = subprocess.Popen([str(binary), "engine", "--model", str(model), "--port", str(port),
                             "--served-model-name", "m", "--max-num-seqs", str(seqs),
                             *map(str, flags)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    for line in proc.stdout:
        if "switchyard engine: serving" in line:
            break
    else:
        raise RuntimeError(f"the engine exited {proc.wait()}")
    ready = time.monotonic() - began
    url = f"http://127.0.0.1:{port}"
    r = requests.post(f"{url}/v1/completions", timeout=120,
                      json={"model": "m", "prompt": "Hello", "max_tokens": 1})
    r.raise_for_status()
    first_token = time.monotonic() - began
    report = requests.get(f"{url}/debug/startup", timeout=10).json()
    proc.terminate()
    proc.wait(timeout=60)
    sources = sorted({b["source"] for b in report["compiled"]["buckets"]})
    return {"ready": ready, "first_token": first_token, "weights": report["weights"]["seconds"],
            "compile": report["compiled"]["seconds"], "sources": ",".join(sources) or "-"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=REPO / "build/release/src/cli/switchyard")
    ap.add_argument("--model", default=REPO / "models/bench/bench-135m/model-q8_0.gguf")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--max-num-seqs", type=int, default=16)
    ap.add_argument("--json-out", type=pathlib.Path)
    ap.add_argument("--out-dir", type=pathlib.Path, help="where the caches go (default: a temp dir)")
    ap.add_argument("--smoke", action="store_true")
    a = ap.parse_args()
    if a.smoke:
        a.model, a.runs, a.max_num_seqs = REPO / "models/tiny-llama3", 1, 4
    results = {k: [] for k in ("eager", "cold", "warm-host", "warm-redis")}
    redis = RedisServer()
    try:
        with tempfile.TemporaryDirectory(dir=a.out_dir) as tmp:
            key = pathlib.Path(tmp) / "signing.key"
            key.write_text("compile-startup-bench-signing-key")
            for run in range(a.runs):
                base = ["--compilation-config", "{}"]
                shared = ["--compile-cache-redis", f"127.0.0.1:{redis.port}",
                          "--compile-cache-redis-key-file", key]
                host = pathlib.Path(tmp) / f"host-{run}"
                # Each run has its own Redis prefix's worth of keys: flush between runs.
                subprocess.run(["redis-cli", "-p", str(redis.port), "FLUSHALL"], check=True,
                               stdout=subprocess.DEVNULL)
                results["eager"].append(start(a.bin, a.model, a.max_num_seqs, ["--enforce-eager"]))
                results["cold"].append(start(a.bin, a.model, a.max_num_seqs,
                                             base + ["--compile-cache-dir", host] + shared))
                results["warm-host"].append(start(a.bin, a.model, a.max_num_seqs,
                                                  base + ["--compile-cache-dir", host] + shared))
                results["warm-redis"].append(
                    start(a.bin, a.model, a.max_num_seqs,
                          base + ["--compile-cache-dir", pathlib.Path(tmp) / f"other-{run}"]
                          + shared))
    finally:
        redis.kill()

    def med(kind, field):
        return statistics.median(r[field] for r in results[kind])
    print(f"model {a.model}, --max-num-seqs {a.max_num_seqs}, {a.runs} runs (medians, s)")
    print(f"{'start':<11} {'ready':>7} {'1st token':>9} {'weights':>8} {'compile':>8}  sources")
    for kind in results:
        print(f"{kind:<11} {med(kind, 'ready'):7.3f} {med(kind, 'first_token'):9.3f} "
              f"{med(kind, 'weights'):8.3f} {med(kind, 'compile'):8.3f}  "
              f"{results[kind][-1]['sources']}")
    if a.json_out:
        a.json_out.write_text(json.dumps({"runs": results}))
    cold = med("cold", "compile")
    for kind in ("warm-host", "warm-redis"):
        beyond = med(kind, "first_token") - med(kind, "weights")
        print(f"{kind}: compile {med(kind, 'compile') / cold:.1%} of cold (goal <= 10%); "
              f"first token {beyond:.3f} s beyond weight loading (goal < 1 s)")


if __name__ == "__main__":
    main()
