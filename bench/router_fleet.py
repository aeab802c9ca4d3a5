"""Processes for the router benchmarks (router_proxy_bench, router_picker_bench,
router_quality_bench, flow_control_bench): simulated `switchyard engine`s, `switchyard router`
over them, a sim model directory with a long context, per-process CPU time and peak memory
from /proc, load averages, Prometheus histogram quantiles, and one streamed request over an
aiohttp session for asyncio load generators.

Every process is started here and stopped by its own Popen handle (SIGTERM, then SIGKILL
after a timeout); logs go to files under the run's output directory."""
import hashlib
import http.client
import json
import os
import pathlib
import re
import shutil
import signal
import statistics
import subprocess
import time
import urllib.parse
import urllib.request

REPO = pathlib.Path(__file__).resolve().parents[1]
TINY_MODEL = REPO / "models" / "tiny-llama3"
ENGINE_READY = re.compile(r"switchyard engine: serving (\S+) on (http://\S+):(\d+)")
ENGINE_KV = re.compile(r"switchyard engine: KV events on (\S+) \(replay (\S+)\)")
ROUTER_READY = re.compile(r"switchyard router: serving (\S+) on (http://\S+):(\d+)")
CLK_TCK = os.sysconf("SC_CLK_TCK")


def default_bin():
    return REPO / "build" / "release" / "src" / "cli" / "switchyard"


def load_average():
    """The three load averages, as `uptime` prints them."""
    return tuple(float(x) for x in pathlib.Path("/proc/loadavg").read_text().split()[:3])


def cpu_times(pid):
    """(utime, stime) of a process (all its threads), in seconds."""
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    # After the ")" of comm: state is field 3, utime 14 and stime 15 (1-based).
    return int(fields[11]) / CLK_TCK, int(fields[12]) / CLK_TCK


def cpu_seconds(pid):
    """utime + stime of a process (all its threads), in seconds."""
    return sum(cpu_times(pid))


def thread_cpu(pid):
    """CPU time of a process's live threads, in seconds, summed by thread name (comm), from
    /proc/PID/task/*/schedstat (nanoseconds; /proc/PID/stat counts 10 ms clock ticks, too
    coarse for a window of a few seconds). Threads that already exited are not counted: use
    it on processes whose threads live as long as they do (the router's)."""
    by_name = {}
    for task in pathlib.Path(f"/proc/{pid}/task").iterdir():
        try:
            ns = int((task / "schedstat").read_text().split()[0])
            name = (task / "comm").read_text().strip()
        except (FileNotFoundError, ProcessLookupError):  # the thread just exited
            continue
        by_name[name] = by_name.get(name, 0.0) + ns / 1e9
    return by_name


def thread_cpu_seconds(pid):
    """thread_cpu's total over the threads."""
    return sum(thread_cpu(pid).values())


def peak_rss_kib(pid):
    """The process's peak resident set size (VmHWM), in KiB."""
    m = re.search(r"^VmHWM:\s+(\d+) kB$", pathlib.Path(f"/proc/{pid}/status").read_text(), re.M)
    return int(m.group(1))


def api_key_digest(key):
    """An API key as router.yaml's tenants list it: "sha256:" and its SHA-256 in hex."""
    return "sha256:" + hashlib.sha256(key.encode()).hexdigest()


def histogram_buckets(text, name, **labels):
    """The cumulative counts of the `name`_bucket series of a /metrics `text` whose labels
    include `labels`, summed: {le: count}, le a float (inf for "+Inf")."""
    buckets = {}
    for m in re.finditer(rf"^{re.escape(name)}_bucket\{{([^}}]*)\}} (\S+)$", text, re.M):
        have = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
        if all(have.get(k) == v for k, v in labels.items()):
            le = float(have["le"])
            buckets[le] = buckets.get(le, 0.0) + float(m.group(2))
    return buckets


def bucket_quantile(buckets, q):
    """Prometheus's histogram_quantile over cumulative `buckets` ({le: count}, as
    histogram_buckets gives, or the difference of two): linear inside the bucket that holds
    the q-th observation (the first bucket's lower edge is 0), the highest finite bound when
    it falls in +Inf. None without observations."""
    bounds = sorted(buckets)
    if not bounds or buckets[bounds[-1]] <= 0:
        return None
    rank = q * buckets[bounds[-1]]
    lower, below = 0.0, 0.0
    for le in bounds:
        if buckets[le] >= rank:
            if le == float("inf"):
                return lower
            return lower + (le - lower) * (rank - below) / max(buckets[le] - below, 1e-12)
        lower, below = le, buckets[le]
    return lower


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def long_context_model(out_dir, max_len=131072):
    """tiny-llama3 with max_position_embeddings raised to `max_len`: the sim backend never
    reads the weights, so this is a simulated engine for a long-context model. Files other
    than config.json are symlinks to the bundled model."""
    d = pathlib.Path(out_dir) / "sim-model"
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    config = json.loads((TINY_MODEL / "config.json").read_text())
    config["max_position_embeddings"] = max_len
    (d / "config.json").write_text(json.dumps(config, indent=2))
    for f in TINY_MODEL.iterdir():
        if f.name != "config.json":
            (d / f.name).symlink_to(f)
    return d


class Proc:
    """A child process whose stdout is a log file scanned for ready lines."""

    def __init__(self, name, argv, log_dir, cpus=None):
        self.name = name
        if cpus is not None:
            argv = ["taskset", "-c", cpus, *argv]
        self.argv = [str(a) for a in argv]
        self.out_path = pathlib.Path(log_dir) / f"{name}.out"
        self.err_path = pathlib.Path(log_dir) / f"{name}.err"
        self._out = open(self.out_path, "w+")
        self._err = open(self.err_path, "w")
        self.proc = subprocess.Popen(self.argv, stdout=self._out, stderr=self._err)

    @property
    def pid(self):
        return self.proc.pid

    def wait_for(self, *patterns, timeout=120):
        """Waits until every regex matches the stdout log; returns their matches."""
        deadline = time.monotonic() + timeout
        while True:
            text = self.out_path.read_text()
            found = [p.search(text) for p in patterns]
            if all(found):
                return found
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited {self.proc.returncode}: "
                                   f"{self.err_path.read_text()[-2000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} not ready in {timeout} s")
            time.sleep(0.05)

    def stop(self, timeout=30):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._out.close()
        self._err.close()
        return self.proc.returncode


class SimEngine(Proc):
    """`switchyard engine --backend sim` on loopback; `kv_events` publishes KV events."""

    def __init__(self, binary, name, log_dir, model=TINY_MODEL, served="tiny", latency="zero",
                 kv_events=False, extra=(), cpus=None):
        argv = [binary, "engine", "--model", model, "--served-model-name", served, "--host",
                "127.0.0.1", "--port", "0", "--backend", "sim", "--sim-latency", latency,
                *extra]
        if kv_events:
            config = {"enable_kv_cache_events": True, "endpoint": "tcp://127.0.0.1:*",
                      "replay_endpoint": "tcp://127.0.0.1:*", "topic": "kv-events"}
            argv += ["--kv-events-config", json.dumps(config)]
        self.kv_events = kv_events
        super().__init__(name, argv, log_dir, cpus)

    def wait_ready(self, timeout=120):
        patterns = [ENGINE_READY] + ([ENGINE_KV] if self.kv_events else [])
        found = self.wait_for(*patterns, timeout=timeout)
        self.port = int(found[0].group(3))
        self.address = f"127.0.0.1:{self.port}"
        self.url = f"http://{self.address}"
        if self.kv_events:
            self.kv_endpoint, self.kv_replay = found[1].group(1), found[1].group(2)
        return self


def scoring_profile(prefix_mode=None, filters=(), scorers=(), kv_utilization=True):
    """An EndpointPickerConfig: prefix-cache-scorer in `prefix_mode` ("precise" or
    "approximate", 16-token blocks) weight 3 when given, then `scorers`, queue-scorer 2,
    kv-cache-utilization 2 (unless kv_utilization is false), max-score-picker (llm-d's Helm
    default; without a prefix mode, load only). `filters` are (type, parameters) pairs of filter
    plugins that go first in the profile (parameters a YAML flow mapping or None), such as a
    saturation detector that flow control names too; `scorers` are (type, parameters, weight)
    triples of more scorers."""
    weighted = [("prefix-cache-scorer", f"{{mode: {prefix_mode}, blockSizeTokens: 16}}", 3)
                ] if prefix_mode else []
    weighted += [*scorers, ("queue-scorer", None, 2)]
    if kv_utilization:
        weighted.append(("kv-cache-utilization-scorer", None, 2))
    plugins = [f"- type: {t}" + (f"\n  parameters: {p}" if p else "")
               for t, p in [*filters, *((t, p) for t, p, _ in weighted)]]
    refs = [f"  - {{pluginRef: {t}}}" for t, _ in filters]
    refs += [f"  - {{pluginRef: {t}, weight: {w}}}" for t, _, w in weighted]
    plugins.append("- type: max-score-picker")
    refs.append("  - {pluginRef: max-score-picker}")
    return "\n".join(["plugins:", *plugins, "schedulingProfiles:", "- name: default",
                      "  plugins:", *refs]) + "\n"


def router_yaml(engines, model, scheduling, threads=1, tokenizer=None, scrape_interval_ms=50,
                engine_kind="switchyard", listen_extra="", extra=""):
    """A router.yaml over `engines` (SimEngine, ready; an engine's `labels` dict, when it has
    one, labels its endpoint); `scheduling` is the text of an EndpointPickerConfig (indented
    under `scheduling:`) or None for the router's default. `listen_extra` is more of the
    listen mapping (", maxConnectionsPerClient: 0"), `extra` more top-level YAML (tenants:,
    objectives:)."""
    lines = [f"listen: {{host: 127.0.0.1, port: 0, threads: {threads}{listen_extra}}}",
             f"model: {model}"]
    if tokenizer:
        lines.append(f"tokenizer: {tokenizer}")
    lines.append(f"scraping: {{intervalMs: {scrape_interval_ms}, stalenessMs: 2000}}")
    lines += ["pools:", "- name: default", "  endpoints:"]
    for e in engines:
        entry = f"  - {{address: '{e.address}', engine: {engine_kind}"
        labels = getattr(e, "labels", None)  # e.g. {"llm-d.ai/role": "prefill"}
        if labels:
            entry += ", labels: {" + ", ".join(f"{k}: '{v}'" for k, v in labels.items()) + "}"
        if e.kv_events:
            entry += (f", kvEvents: {{endpoint: '{e.kv_endpoint}', "
                      f"replayEndpoint: '{e.kv_replay}', topic: kv-events}}")
        lines.append(entry + "}")
    if scheduling:
        lines.append("scheduling:")
        lines += ["  " + line for line in scheduling.strip("\n").splitlines()]
    if extra:
        lines += extra.strip("\n").splitlines()
    return "\n".join(lines) + "\n"


class Router(Proc):
    """`switchyard router` with `config_text` as its router.yaml; `wrapper` (argv) runs it
    under another program, such as valgrind."""

    def __init__(self, binary, name, log_dir, config_text, cpus=None, wrapper=()):
        self.config_path = pathlib.Path(log_dir) / f"{name}.yaml"
        self.config_path.write_text(config_text)
        super().__init__(name, [*wrapper, binary, "router", "--config", self.config_path],
                         log_dir, cpus)

    def wait_ready(self, num_endpoints, timeout=120):
        found = self.wait_for(ROUTER_READY, timeout=timeout)
        self.port = int(found[0].group(3))
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + timeout
        while True:  # every endpoint scraped once
            eps = get_json(self.url + "/debug/endpoints")["endpoints"]
            if len(eps) == num_endpoints and all(e["metrics"]["fresh"] for e in eps):
                return self
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name}: endpoints not fresh in {timeout} s")
            time.sleep(0.1)

    def metrics_text(self):
        """The router's /metrics."""
        return urllib.request.urlopen(self.url + "/metrics", timeout=10).read().decode()

    def scheduling_seconds(self):
        """Seconds the router spent deciding, summed over requests: tokenize (parse, chat
        template, encode) plus scheduler (snapshot, filters, scorers, picker) from the
        switchyard_router_*_duration_seconds histograms, or the older single counter
        switchyard_router_scheduling_seconds_total; None when neither is exported."""
        text = self.metrics_text()
        sums = [float(m.group(1)) for m in re.finditer(
            r"^switchyard_router_(?:tokenize|scheduler)_duration_seconds_sum (\S+)$", text, re.M)]
        if sums:
            return sum(sums)
        m = re.search(r"^switchyard_router_scheduling_seconds_total (\S+)$", text, re.M)
        return float(m.group(1)) if m else None


# The default latency model's terms (sim/latency_model.h: the CPU engine on bench-135m).
CALIBRATED_LATENCY = {"overhead_ms": 17.5, "prefill_us_per_token": 2700.0,
                      "decode_ms_per_seq": 7.5, "attention_us_per_context_token": 35.0}


def add_sim_bench_args(ap, out_dir):
    """The arguments of a benchmark over simulated engines (--sim-kv-memory) on bench-135m's
    shape: --bin, --model, --speedup (the calibrated latency model's terms are divided by
    it), --seed, --request-timeout, --out-dir (default `out_dir` under build/), --json-out."""
    ap.add_argument("--bin", type=pathlib.Path, default=default_bin())
    ap.add_argument("--model", type=pathlib.Path, default=REPO / "models/bench/bench-135m")
    ap.add_argument("--speedup", type=float, default=10.0,
                    help="divide the calibrated latency model's terms by this")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--request-timeout", type=float, default=600)
    ap.add_argument("--out-dir", type=pathlib.Path, default=REPO / "build" / out_dir)
    ap.add_argument("--json-out", type=pathlib.Path)


def write_results(a, results):
    """Prints `results` as one JSON line and, with --json-out, keeps them with the args."""
    print(json.dumps(results))
    if a.json_out:
        a.json_out.write_text(json.dumps({"args": {k: str(v) for k, v in vars(a).items()},
                                          "results": results}, indent=1))


def calibrated_latency(speedup):
    """--sim-latency for the calibrated model with every term divided by `speedup`."""
    return ",".join(f"{k}={v / speedup:g}" for k, v in CALIBRATED_LATENCY.items())


def stream_completion(url, model, tokens, max_tokens, timeout_s, headers=None):
    """One streaming greedy POST /v1/completions of token ids (ignore_eos) to `url`, with
    `headers` added when given: a dict of ttft (s, send to the first token chunk), gaps (s,
    between token chunks), chunks and the endpoint the router named (x-switchyard-endpoint,
    None from an engine)."""
    body = json.dumps({"model": model, "prompt": tokens, "max_tokens": max_tokens,
                       "ignore_eos": True, "temperature": 0, "stream": True}).encode()
    u = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout_s)
    try:
        t0 = time.perf_counter()
        conn.request("POST", "/v1/completions", body,
                     {"Content-Type": "application/json", **(headers or {})})
        resp = conn.getresponse()
        if resp.status != 200:
            raise RuntimeError(f"HTTP {resp.status}: {resp.read()[:300]!r}")
        times = []
        for raw in resp:
            line = raw.strip()
            if line.startswith(b"data:") and line != b"data: [DONE]":
                choices = json.loads(line[5:]).get("choices")
                if choices and choices[0].get("finish_reason") is None:
                    times.append(time.perf_counter())
        if not times:
            raise RuntimeError("the stream ended without a token")
        return {"ttft": times[0] - t0, "gaps": [b - a for a, b in zip(times, times[1:])],
                "chunks": len(times), "endpoint": resp.getheader("x-switchyard-endpoint")}
    finally:
        conn.close()


def get_json(url, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read())


def stop_all(procs):
    for p in reversed(procs):
        try:
            p.stop()
        except Exception as e:  # keep stopping the others
            print(f"stopping {p.name}: {e!r}")


async def stream_request_async(session, url, body, headers=None):
    """POSTs `body` (a dict with "stream": true) to `url` over an aiohttp ClientSession and
    reads its SSE stream: a dict of status, ttft (s from the send to the first data event
    with a choice), seconds (to the end of the response), chunks (data events with a choice),
    done (whether "data: [DONE]" came), text (choice 0's text or delta content, joined), and
    the x-llm-d-request-dropped-reason and retry-after headers (dropped, retry_after: None
    when absent). A non-200 response's body is read and kept in `error`. Connection errors
    and timeouts raise (the session's timeout applies)."""
    t0 = time.perf_counter()
    async with session.post(url, json=body, headers=headers) as resp:
        r = {"status": resp.status, "ttft": None, "chunks": 0, "done": False, "text": "",
             "dropped": resp.headers.get("x-llm-d-request-dropped-reason"),
             "retry_after": resp.headers.get("retry-after"), "error": None}
        if resp.status != 200:
            r["error"] = (await resp.read())[:300].decode(errors="replace")
        else:
            parts = []
            async for raw in resp.content:
                line = raw.strip()
                if not line.startswith(b"data:"):
                    continue
                if line == b"data: [DONE]":
                    r["done"] = True
                    continue
                choices = json.loads(line[5:]).get("choices")
                if not choices:
                    continue
                if r["ttft"] is None:
                    r["ttft"] = time.perf_counter() - t0
                r["chunks"] += 1
                c = choices[0]
                parts.append(c.get("text") or (c.get("delta") or {}).get("content") or "")
            r["text"] = "".join(parts)
    r["seconds"] = time.perf_counter() - t0
    return r
