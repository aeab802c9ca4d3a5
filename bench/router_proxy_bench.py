#!/usr/bin/env python3
"""Proxy cost: `switchyard router` vs nginx as a plain reverse proxy, same upstream, same core.

Upstream: one `switchyard engine --backend sim --sim-latency zero` (tiny-llama3). In front of
it, side by side in one invocation:
  - nginx (Debian's package: `apt-get install -y nginx wrk`), `worker_processes 1`, an
    upstream block with `keepalive 64`, `proxy_http_version 1.1`, `Connection ""`,
    access log off, and no limit on requests per keep-alive connection either side
    (`keepalive_requests`; nginx's default of 1000 would make it reconnect where the router
    does not); the config is written next to the logs.
  - router, default profile: no `scheduling:` section, so llm-d's Helm default profile
    (approximate prefix-cache-scorer 3, queue-scorer 2, kv-cache-utilization-scorer 2,
    max-score-picker); with `tokenizer:` set, so every prompt is tokenized.
  - router, minimal profile: random-picker only, no tokenizer (nothing reads the tokens).
Both routers use `listen.threads: 1` (one server loop, one upstream-client loop, plus the
scrape thread). The proxies are pinned to one core (`taskset -c PROXY_CPU`, default 0), the
load generator and the upstream to the other (LOAD_CPU, default 1), so both proxies have
the same one core.

Load generator: wrk (Debian's `wrk`), one thread, a Lua script for the POST body
(/v1/completions, a 9-token text prompt, max_tokens 1). Per target and run:
  - saturation: `wrk -c SAT_CONNECTIONS` for DURATION s: requests/s, and requests per CPU
    second of the proxy process(es) (utime+stime from /proc; nginx: master + worker) — the
    figure the machine's other load disturbs least — with user and system CPU per request
    apart;
  - fixed rate: `wrk -c RATE_CONNECTIONS` with a per-connection think time (Lua delay()),
    about the same rate for every target: latency p50/p90/p99 as wrk measures it (write of
    the request to the last byte of the response).
Direct-to-upstream runs the same two measurements; "added" latency is the target's minus
the direct figure of the same run (paired), then the median over runs. Runs interleave the
targets (rotating the order) so that load from other jobs hits all of them.

usage: .venv/bin/python bench/router_proxy_bench.py [--bin PATH] [--runs 5] [--duration 5]
"""
import argparse
import json
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

from router_fleet import (Proc, Router, SimEngine, TINY_MODEL, cpu_times, default_bin,
                          load_average, median, router_yaml, stop_all)

BODY = json.dumps({"model": "tiny", "prompt": "Hello world, this is a small prompt",
                   "max_tokens": 1})

WRK_SCRIPT = """
wrk.method = "POST"
wrk.body = [==[%s]==]
wrk.headers["Content-Type"] = "application/json"
local think_ms = tonumber(os.getenv("WRK_THINK_MS") or "0")
if think_ms > 0 then
  function delay()
    return think_ms
  end
end
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "WRK_JSON {\\"requests\\":%%d,\\"duration_us\\":%%d,\\"errors\\":%%d,\\"status_errors\\":%%d," ..
    "\\"p50_us\\":%%d,\\"p90_us\\":%%d,\\"p99_us\\":%%d,\\"mean_us\\":%%.1f}\\n",
    summary.requests, summary.duration, e.connect + e.read + e.write + e.timeout, e.status,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.mean))
end
""" % BODY

NGINX_CONF = """
user root;
worker_processes 1;
daemon off;
pid {dir}/nginx.pid;
error_log {dir}/nginx-error.log warn;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  keepalive_requests 1000000000;
  client_body_temp_path {dir}/body;
  proxy_temp_path {dir}/proxy;
  fastcgi_temp_path {dir}/fastcgi;
  uwsgi_temp_path {dir}/uwsgi;
  scgi_temp_path {dir}/scgi;
  upstream engine {{
    server {upstream};
    keepalive 64;
    keepalive_requests 1000000000;
  }}
  server {{
    listen 127.0.0.1:{port};
    location / {{
      proxy_pass http://engine;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }}
  }}
}}
"""

MINIMAL_PROFILE = """
plugins:
- type: random-picker
"""


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wrk(url, script, connections, duration, cpu, think_ms=0):
    env = {"WRK_THINK_MS": str(think_ms), "PATH": "/usr/bin:/bin"}
    argv = ["taskset", "-c", cpu, "wrk", "-t1", f"-c{connections}", f"-d{duration}s",
            "--timeout", "5s", "-s", str(script), url + "/v1/completions"]
    out = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=duration + 60)
    for line in out.stdout.splitlines():
        if line.startswith("WRK_JSON "):
            r = json.loads(line[len("WRK_JSON "):])
            r["rps"] = r["requests"] / (r["duration_us"] / 1e6)
            return r
    raise RuntimeError(f"wrk printed no result: {out.stdout[-1000:]} {out.stderr[-1000:]}")


class Target:
    def __init__(self, name, url, pids):
        self.name, self.url, self.pids = name, url, pids

    def cpu(self):
        """(user, system) CPU seconds of the target's processes."""
        times = [cpu_times(p) for p in self.pids]
        return sum(t[0] for t in times), sum(t[1] for t in times)


def nginx_pids(master_pid):
    """The nginx master and its worker(s)."""
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(master_pid)], capture_output=True,
                         text=True).stdout.split()
    return [master_pid] + [int(p) for p in out]


def measure(target, a, script):
    c0 = target.cpu() if target.pids else None
    sat = wrk(target.url, script, a.sat_connections, a.duration, a.load_cpu)
    c1 = target.cpu() if target.pids else None
    fixed = wrk(target.url, script, a.rate_connections, a.duration, a.load_cpu, a.think_ms)
    r = {"rps": sat["rps"], "sat_errors": sat["errors"] + sat["status_errors"],
         "sat_p99_us": sat["p99_us"], "fixed_rps": fixed["rps"],
         "fixed_errors": fixed["errors"] + fixed["status_errors"],
         "p50_us": fixed["p50_us"], "p90_us": fixed["p90_us"], "p99_us": fixed["p99_us"]}
    if c0 is not None:
        user, system = c1[0] - c0[0], c1[1] - c0[1]
        cpu = user + system
        r["cpu_s"] = cpu
        r["req_per_cpu_s"] = sat["requests"] / cpu if cpu > 0 else None
        r["user_us_per_req"] = user / sat["requests"] * 1e6 if sat["requests"] else None
        r["system_us_per_req"] = system / sat["requests"] * 1e6 if sat["requests"] else None
    return r


def fmt(v, digits=0):
    return "-" if v is None else f"{v:,.{digits}f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", type=pathlib.Path, default=default_bin())
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--duration", type=int, default=5, help="seconds per wrk measurement")
    ap.add_argument("--sat-connections", type=int, default=32)
    ap.add_argument("--rate-connections", type=int, default=4)
    ap.add_argument("--think-ms", type=int, default=4,
                    help="per-connection pause between requests at the fixed rate")
    ap.add_argument("--proxy-cpu", default="0")
    ap.add_argument("--load-cpu", default="1")
    ap.add_argument("--out", type=pathlib.Path, default=None)
    ap.add_argument("--json-out", type=pathlib.Path, default=None)
    a = ap.parse_args()
    for tool in ("wrk", "nginx", "taskset"):
        if shutil.which(tool) is None and not pathlib.Path(f"/usr/sbin/{tool}").exists():
            sys.exit(f"{tool} not found: apt-get install -y nginx wrk")
    out = a.out or pathlib.Path(tempfile.mkdtemp(prefix="router-proxy-bench-"))
    out.mkdir(parents=True, exist_ok=True)
    script = out / "post.lua"
    script.write_text(WRK_SCRIPT)
    print(f"logs in {out}; load average at start {load_average()}", flush=True)

    procs = []
    try:
        engine = SimEngine(a.bin, "engine", out, cpus=a.load_cpu)
        procs.append(engine)
        engine.wait_ready()
        nginx_dir = out / "nginx"
        nginx_dir.mkdir(exist_ok=True)
        nginx_port = free_port()
        (nginx_dir / "nginx.conf").write_text(
            NGINX_CONF.format(dir=nginx_dir, upstream=engine.address, port=nginx_port))
        nginx = Proc("nginx", ["nginx", "-p", nginx_dir, "-c", nginx_dir / "nginx.conf"], out,
                     cpus=a.proxy_cpu)
        procs.append(nginx)
        router_default = Router(
            a.bin, "router-default", out,
            router_yaml([engine], "tiny", None, threads=1, tokenizer=TINY_MODEL), a.proxy_cpu)
        router_minimal = Router(a.bin, "router-minimal", out,
                                router_yaml([engine], "tiny", MINIMAL_PROFILE, threads=1),
                                a.proxy_cpu)
        procs += [router_default, router_minimal]
        router_default.wait_ready(1)
        router_minimal.wait_ready(1)
        deadline = time.monotonic() + 30
        while len(nginx_pids(nginx.pid)) < 2:
            if time.monotonic() > deadline:
                raise RuntimeError("nginx worker did not start")
            time.sleep(0.1)
        targets = [Target("direct", engine.url, []),
                   Target("nginx", f"http://127.0.0.1:{nginx_port}", nginx_pids(nginx.pid)),
                   Target("router (default profile)", router_default.url, [router_default.pid]),
                   Target("router (random-picker only)", router_minimal.url,
                          [router_minimal.pid])]
        for t in targets:  # warm-up: connections, pools, caches
            wrk(t.url, script, a.sat_connections, 1, a.load_cpu)

        results = {t.name: [] for t in targets}
        loads = []
        for run in range(a.runs):
            order = targets[run % len(targets):] + targets[:run % len(targets)]
            load0 = load_average()
            for t in order:
                r = measure(t, a, script)
                results[t.name].append(r)
                print(f"run {run + 1} {t.name}: {json.dumps(r)}", flush=True)
            loads.append((load0, load_average()))
            print(f"run {run + 1}: load average {load0} -> {loads[-1][1]}", flush=True)
    finally:
        stop_all(procs)

    direct = results["direct"]
    rows = []
    nginx_rps = median([r["rps"] for r in results["nginx"]])
    nginx_eff = median([r.get("req_per_cpu_s") for r in results["nginx"]])
    for t in targets:
        rs = results[t.name]
        added = lambda key: median([r[key] - d[key] for r, d in zip(rs, direct)])
        row = {"target": t.name, "rps": median([r["rps"] for r in rs]),
               "req_per_cpu_s": median([r.get("req_per_cpu_s") for r in rs]),
               "user_us": median([r.get("user_us_per_req") for r in rs]),
               "system_us": median([r.get("system_us_per_req") for r in rs]),
               "fixed_rps": median([r["fixed_rps"] for r in rs]),
               "p50_us": median([r["p50_us"] for r in rs]),
               "p99_us": median([r["p99_us"] for r in rs]),
               "errors": sum(r["sat_errors"] + r["fixed_errors"] for r in rs)}
        if t.name != "direct":
            row["added_p50_us"] = added("p50_us")
            row["added_p99_us"] = added("p99_us")
            row["rps_vs_nginx"] = row["rps"] / nginx_rps if nginx_rps else None
            row["cpu_vs_nginx"] = (row["req_per_cpu_s"] / nginx_eff
                                   if nginx_eff and row["req_per_cpu_s"] else None)
        rows.append(row)

    print(f"\nmedians of {a.runs} runs; saturation: wrk -t1 -c{a.sat_connections} "
          f"-d{a.duration}s; fixed rate: -c{a.rate_connections}, {a.think_ms} ms think time; "
          f"proxies on CPU {a.proxy_cpu}, wrk + upstream on CPU {a.load_cpu}")
    print("load average per run (start -> end): "
          + "; ".join(f"{l0[0]:.2f} -> {l1[0]:.2f}" for l0, l1 in loads))
    print("\n| target | req/s (saturated) | vs nginx | req per CPU-s | vs nginx | "
          "user / system us per req | fixed-rate req/s | p50 ms | p99 ms | added p50 ms | "
          "added p99 ms | errors |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        ms = lambda us: None if us is None else us / 1000
        print(f"| {r['target']} | {fmt(r['rps'])} | "
              f"{fmt(r.get('rps_vs_nginx'), 2) + 'x' if r.get('rps_vs_nginx') else '-'} | "
              f"{fmt(r['req_per_cpu_s'])} | "
              f"{fmt(r.get('cpu_vs_nginx'), 2) + 'x' if r.get('cpu_vs_nginx') else '-'} | "
              f"{fmt(r['user_us'], 1)} / {fmt(r['system_us'], 1)} | {fmt(r['fixed_rps'])} | {fmt(ms(r['p50_us']), 3)} | {fmt(ms(r['p99_us']), 3)} | "
              f"{fmt(ms(r.get('added_p50_us')), 3)} | {fmt(ms(r.get('added_p99_us')), 3)} | "
              f"{r['errors']} |")
    if a.json_out:
        a.json_out.write_text(json.dumps({"args": {k: str(v) for k, v in vars(a).items()},
                                          "loads": loads, "runs": results, "rows": rows},
                                         indent=1))


if __name__ == "__main__":
    main()
