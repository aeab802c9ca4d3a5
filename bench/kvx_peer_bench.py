#!/usr/bin/env python3
"""KV peer transfer over loopback TCP: switchyard's PeerBlockClient/Server vs iperf3 and Mooncake.

Side by side in one run, each repeated --runs times, medians reported:
  - ours: build/release/bench/sy_bench_kvx_peer's BM_PeerReadBlocks/64 (64 blocks of a
    Llama-3.2-1B-shaped pool, 512 KiB each, pulled from a server in the same process into
    a host store; the handshake is done once, every iteration is one ReadBlocks);
  - iperf3 (Debian's), one TCP stream on loopback for --seconds, the receiver's rate;
  - mooncake: Mooncake's TransferEngine over its TCP transport, the same 64 blocks of
    512 KiB read from a target process per batch_transfer_sync_read
    (bench/mooncake_tcp_read.py, run by --mooncake-python; skipped, with the reason, when
    that is not given or cannot import mooncake.engine).
All move bytes through the kernel's loopback on the same 2 cores; the ratios are issue 21's
">= 90% of iperf3" and ">= 1.0x Mooncake TCP" goals. Prints a markdown table of the runs
and one JSON line. Build first: cmake --preset release && cmake --build --preset release
--target sy_bench_kvx_peer. Mooncake stays out of .venv and CI: install it apart, e.g.
V=.cache/venv-mooncake-non-cuda-0.3.13.post1; python3 -m venv $V && $V/bin/pip install
mooncake-transfer-engine-non-cuda==0.3.13.post1 (the CUDA wheel needs libcuda), plus
apt-get install libibverbs1, which its engine links; then --mooncake-python $V/bin/python.

usage: bench/kvx_peer_bench.py [--bin PATH] [--runs 5] [--seconds 3]
                               [--peers iperf3,mooncake] [--mooncake-python PATH]
"""
import argparse
import json
import pathlib
import shutil
import socket
import statistics
import subprocess
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
PEERS = ("iperf3", "mooncake")
# Ours and Mooncake repeat whole 64-block reads for at least this long.
READ_SECONDS = 2


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ours_gbps(binary):
    out = subprocess.run(
        [binary, "--benchmark_filter=BM_PeerReadBlocks/64", "--benchmark_format=json",
         f"--benchmark_min_time={READ_SECONDS}"],
        check=True, capture_output=True, text=True).stdout
    bench = json.loads(out)["benchmarks"][0]
    return bench["bytes_per_second"] * 8 / 1e9


def iperf3_gbps(seconds):
    port = free_port()
    server = subprocess.Popen(["iperf3", "-s", "-1", "-B", "127.0.0.1", "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(50):  # the client fails fast until the server listens
            client = subprocess.run(["iperf3", "-c", "127.0.0.1", "-p", str(port), "-t",
                                     str(seconds), "-J"], capture_output=True, text=True)
            result = json.loads(client.stdout or "{}")
            if client.returncode == 0 and "error" not in result:
                return result["end"]["sum_received"]["bits_per_second"] / 1e9
            time.sleep(0.1)
        sys.exit("iperf3 client never connected: " + client.stdout[-500:])
    finally:
        server.kill()
        server.wait()


def mooncake_missing(python):
    """Why `python` cannot run Mooncake, or None when it can."""
    if python is None:
        return "no --mooncake-python given"
    try:
        probe = subprocess.run([python, "-c", "import mooncake.engine"], capture_output=True,
                               text=True, timeout=60)
    except OSError as e:
        return f"{python}: {e}"
    if probe.returncode != 0:
        return f"{python} cannot import mooncake.engine: " + probe.stderr.strip().splitlines()[-1]
    return None


def mooncake_read(python):
    """One bench/mooncake_tcp_read.py run: its JSON (gbps, package, ...)."""
    run = subprocess.run([python, str(REPO / "bench/mooncake_tcp_read.py"), "--seconds",
                          str(READ_SECONDS)], capture_output=True, text=True, timeout=120)
    if run.returncode != 0:
        sys.exit("mooncake run failed:\n" + run.stdout[-1000:] + run.stderr[-3000:])
    return json.loads(run.stdout.strip().splitlines()[-1])


def markdown(peers, runs):
    columns = ["ours", *peers]
    lines = ["| run | " + " | ".join(f"{c} Gbit/s" for c in columns) + " |",
             "| --- |" + " ---: |" * len(columns)]
    for i, run in enumerate(runs):
        lines.append(f"| {i + 1} | " + " | ".join(f"{run[c]:.2f}" for c in columns) + " |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", default=str(REPO / "build/release/bench/sy_bench_kvx_peer"))
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seconds", type=int, default=3, help="iperf3's stream length")
    parser.add_argument("--peers", default=",".join(PEERS),
                        help="comma-separated, from: " + ", ".join(PEERS))
    parser.add_argument("--mooncake-python",
                        help="a python that imports mooncake.engine (kept out of .venv)")
    args = parser.parse_args()
    peers = [p for p in args.peers.split(",") if p]
    if unknown := set(peers) - set(PEERS):
        sys.exit(f"unknown --peers {sorted(unknown)}: choose from {PEERS}")
    if "iperf3" in peers and shutil.which("iperf3") is None:
        sys.exit("iperf3 is missing: scripts/setup_test.sh installs it")
    if "mooncake" in peers and (why := mooncake_missing(args.mooncake_python)):
        print(f"mooncake: skipped ({why})", flush=True)
        peers.remove("mooncake")
    runs, mooncake_package = [], None
    for i in range(args.runs):
        run = {"ours": ours_gbps(args.bin)}
        if "iperf3" in peers:
            run["iperf3"] = iperf3_gbps(args.seconds)
        if "mooncake" in peers:
            read = mooncake_read(args.mooncake_python)
            run["mooncake"], mooncake_package = read["gbps"], read["package"]
        runs.append(run)
        print(f"run {i + 1}: " + ", ".join(f"{k} {v:.2f} Gbit/s" for k, v in run.items()),
              flush=True)
    median = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    ratio = {p: median["ours"] / median[p] for p in peers}
    print(markdown(peers, runs))
    print("median: " + ", ".join(f"{k} {v:.2f} Gbit/s" for k, v in median.items()) +
          "".join(f"; ours / {p} {r:.2f}" for p, r in ratio.items()))
    print(json.dumps({"runs": runs, "median_gbps": median, "ours_over": ratio,
                      "mooncake_package": mooncake_package}))


if __name__ == "__main__":
    main()
