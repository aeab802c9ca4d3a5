#!/usr/bin/env python3
"""Proxy cost in instructions: user-space instructions and heap allocations per proxied
request of `switchyard router`, counted by callgrind, for the two profiles that
router_proxy_bench.py compares with nginx.

Instruction counts barely move with the machine's other load, unlike CPU seconds, so this is
the figure to compare two builds by on a busy machine. Setup: one
`switchyard engine --backend sim --sim-latency zero` (tiny-llama3) upstream; the router
(`listen.threads: 1`, scraping every SCRAPE_MS) runs under
`valgrind --tool=callgrind --instr-atstart=no`. Per profile: a warm-up with wrk (connections,
pools, caches, valgrind's translations), then `callgrind_control -i on`, wrk -t1 -cC for
DURATION s (the same 9-token /v1/completions POST as router_proxy_bench.py),
`callgrind_control -i off`, and the router is stopped so callgrind writes its totals.
Per request = totals of every router thread (the scraper included) / requests wrk completed.
Allocations = calls to malloc, calloc, realloc, aligned allocation and operator new.
--top N lists the N functions with the most inclusive instructions per request. --nginx
also counts nginx (Debian's, router_proxy_bench.py's config with `master_process off`, so
that its one process is the worker) proxying the same requests to the same upstream.

usage: .venv/bin/python bench/router_proxy_instructions.py [--bin PATH] [--duration 10]
           [--profile default|minimal|both] [--top 0] [--nginx]
"""
import argparse
import pathlib
import re
import socket
import subprocess
import sys
import tempfile
import time

from router_fleet import Proc, Router, SimEngine, TINY_MODEL, router_yaml, stop_all
from router_proxy_bench import (MINIMAL_PROFILE, NGINX_CONF, WRK_SCRIPT, default_bin, free_port,
                                wrk)

# glibc's or tcmalloc's entry points (the router links tcmalloc, whose operator new does not go
# through malloc); names as callgrind writes them, argument lists cut off.
ALLOC_FUNCTIONS = {"malloc", "calloc", "realloc", "aligned_alloc", "posix_memalign", "memalign",
                   "operator new", "operator new[]"}


def instrument(pid, on):
    """Turns callgrind's instrumentation of process `pid` on or off."""
    subprocess.run(["callgrind_control", "-i", "on" if on else "off", str(pid)], check=True,
                   capture_output=True, timeout=60)


def allocation_calls(out_file):
    """Calls into the allocation functions, from the callgrind output's call records."""
    names, total, callee = {}, 0, None
    name_ref = re.compile(r"^cfn=\((\d+)\)(?: (.*))?$")
    for line in pathlib.Path(out_file).read_text(errors="replace").splitlines():
        m = name_ref.match(line)
        if m:
            if m.group(2) is not None:
                names[m.group(1)] = m.group(2)
            callee = names.get(m.group(1))
            continue
        if line.startswith("fn="):  # fn=(id) name defines names too
            fm = re.match(r"^fn=\((\d+)\) (.*)$", line)
            if fm:
                names[fm.group(1)] = fm.group(2)
            callee = None
            continue
        if line.startswith("calls=") and callee and callee.split("(")[0] in ALLOC_FUNCTIONS:
            total += int(line.split("=", 1)[1].split()[0])
    return total


def short_name(annotated):
    """callgrind_annotate's "file:function(args) [object]" as "file:function", shortened."""
    name = re.sub(r" \[[^\]]*\]$", "", annotated)
    file, _, function = name.partition(":")
    function = re.sub(r"\(.*", "", function)
    return f"{pathlib.Path(file).name}:{function}"[:160]


def annotate(out_file, top):
    """Total instructions and the `top` functions by inclusive instructions."""
    text = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100",
                           str(out_file)], capture_output=True, text=True, check=True).stdout
    total = None
    rows = []
    for line in text.splitlines():
        m = re.match(r"^\s*([\d,]+)\s+\(?[\d.%)\s]*PROGRAM TOTALS", line)
        if m:
            total = int(m.group(1).replace(",", ""))
            continue
        m = re.match(r"^\s*([\d,]+)\s+(?:\([\d.]+%\)\s+)?(\S.*)$", line)
        if m and total is not None and len(rows) < top:
            rows.append((int(m.group(1).replace(",", "")), short_name(m.group(2))))
    return total, rows


def callgrind(out_file):
    return ["valgrind", "--tool=callgrind", "--instr-atstart=no",
            f"--callgrind-out-file={out_file}"]


def start_router(a, engine, name, scheduling, tokenizer, out, out_file):
    """The router under callgrind; returns (process, url)."""
    config = router_yaml([engine], "tiny", scheduling, threads=1, tokenizer=tokenizer,
                         scrape_interval_ms=a.scrape_ms)
    router = Router(a.bin, f"router-{name}", out, config, wrapper=callgrind(out_file))
    router.wait_ready(1, timeout=300)
    return router, router.url


def start_nginx(engine, out, out_file):
    """nginx as router_proxy_bench.py runs it, but as one process (master_process off, so
    the worker is the process callgrind runs); returns (process, url)."""
    conf_dir = out / "nginx"
    conf_dir.mkdir(exist_ok=True)
    port = free_port()
    conf = NGINX_CONF.format(dir=conf_dir, upstream=engine.address, port=port)
    (conf_dir / "nginx.conf").write_text(conf.replace("daemon off;", "daemon off;\nmaster_process off;"))
    nginx = Proc("nginx", [*callgrind(out_file), "nginx", "-p", conf_dir, "-c",
                           conf_dir / "nginx.conf"], out)
    deadline = time.monotonic() + 120
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if time.monotonic() > deadline or nginx.proc.poll() is not None:
                raise RuntimeError(f"nginx did not start: {nginx.err_path.read_text()[-2000:]}")
            time.sleep(0.2)
    return nginx, f"http://127.0.0.1:{port}"


def measure(a, name, start, out):
    """Starts a proxy under callgrind (`start(out_file)` -> (process, url)), loads it, counts."""
    out_file = out / f"callgrind.{name}.out"
    proc, url = start(out_file)
    try:
        script = out / "post.lua"
        wrk(url, script, a.connections, a.warmup, "0-255")
        instrument(proc.pid, True)
        r = wrk(url, script, a.connections, a.duration, "0-255")
        instrument(proc.pid, False)
    finally:
        stop_all([proc])
    if r["errors"] or r["status_errors"]:
        sys.exit(f"{name}: wrk saw errors: {r}")
    total, rows = annotate(out_file, a.top)
    allocs = allocation_calls(out_file)
    n = r["requests"]
    print(f"{name}: {n} requests, {total / n:,.0f} instructions/request, "
          f"{allocs / n:.1f} allocations/request ({out_file})", flush=True)
    for ir, fn in rows:
        print(f"  {ir / n:10,.0f}  {fn}")
    return total / n


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", type=pathlib.Path, default=default_bin())
    ap.add_argument("--duration", type=int, default=10, help="seconds of counted load")
    ap.add_argument("--warmup", type=int, default=3, help="seconds of uncounted load first")
    ap.add_argument("--connections", type=int, default=4)
    ap.add_argument("--scrape-ms", type=int, default=1000)
    ap.add_argument("--profile", choices=["default", "minimal", "both"], default="both")
    ap.add_argument("--top", type=int, default=0)
    ap.add_argument("--out", type=pathlib.Path, default=None)
    ap.add_argument("--nginx", action="store_true",
                    help="also count nginx (Debian's) proxying the same requests")
    a = ap.parse_args()
    out = a.out or pathlib.Path(tempfile.mkdtemp(prefix="router-instructions-"))
    out.mkdir(parents=True, exist_ok=True)
    (out / "post.lua").write_text(WRK_SCRIPT)
    engine = SimEngine(a.bin, "engine", out)
    try:
        engine.wait_ready()
        if a.profile in ("default", "both"):
            measure(a, "default",
                    lambda f: start_router(a, engine, "default", None, TINY_MODEL, out, f), out)
        if a.profile in ("minimal", "both"):
            measure(a, "minimal",
                    lambda f: start_router(a, engine, "minimal", MINIMAL_PROFILE, None, out, f),
                    out)
        if a.nginx:
            measure(a, "nginx", lambda f: start_nginx(engine, out, f), out)
    finally:
        stop_all([engine])


if __name__ == "__main__":
    main()
