"""Starts `switchyard engine` subprocesses for the end-to-end tests and reads their metrics.

An EngineServer runs the binary with `--host 127.0.0.1 --port 0` (or the `host` and `port`
given: engines on 127.0.0.2, 127.0.0.3, ... sharing one port stand for pods) plus the given
flags, waits for the ready line ("switchyard engine: serving NAME on http://HOST:PORT", and the KV events
line when events are on), and on stop sends SIGTERM and requires exit code 0 within a
timeout: a crash, a sanitizer report (ASan aborts) or a hang fails the test that owns it."""
import json
import os
import pathlib
import re
import signal
import subprocess
import tempfile
import time

import requests

from conftest import MODELS_DIR, switchyard_bin

TINY_MODEL = MODELS_DIR / "tiny-llama3"
MODEL_NAME = "tiny"

_READY = re.compile(r"switchyard engine: serving (\S+) on (http://\S+):(\d+)")
_KV = re.compile(r"switchyard engine: KV events on (\S+) \(replay (\S+)\)")
_LENDING = re.compile(r"switchyard engine: KV blocks lent on (\S+)")


def kv_events_flags(topic="kv-events", **options):
    """--kv-events-config for an engine that publishes KV events, with a replay socket, on
    free loopback ports (EngineServer(..., kv_events=True) reads them from the ready line);
    `options` adds or overrides vLLM KVEventsConfig fields (event_layout, block_hash_format)."""
    config = {"enable_kv_cache_events": True, "endpoint": "tcp://127.0.0.1:*",
              "replay_endpoint": "tcp://127.0.0.1:*", "topic": topic, **options}
    return ["--kv-events-config", json.dumps(config)]


class EngineServer:
    engine_kind = "switchyard"  # its `engine:` in a router config

    def __init__(self, *flags, model=TINY_MODEL, name=MODEL_NAME, env=None, kv_events=False,
                 start_timeout=120, binary=None, host="127.0.0.1", port=0, log_level=None):
        self.binary = pathlib.Path(binary) if binary is not None else None
        self.flags = [str(f) for f in flags]
        self.model = pathlib.Path(model)
        self.name = name
        self.env = {**os.environ, **(env or {})}
        self.kv_events = kv_events
        self.start_timeout = start_timeout
        self.host = host
        self.listen_port = port
        self.log_level = log_level
        self.proc = None
        self._signalled = False
        self._stopped = False
        self.port = None
        self.url = None
        self.kv_endpoint = None
        self.kv_replay_endpoint = None

    @property
    def base_url(self):
        """The OpenAI client's base_url."""
        return f"{self.url}/v1"

    def start(self):
        self.spawn()
        return self.wait_ready()

    def spawn(self):
        """Starts the process without waiting for it (to start several at once)."""
        binary = self.binary or switchyard_bin()
        if not binary.exists():
            raise AssertionError(f"switchyard binary not found at {binary}; set SWITCHYARD_BIN")
        self._out = tempfile.TemporaryFile(mode="w+")
        self._err = tempfile.TemporaryFile(mode="w+")
        level = ["--log-level", self.log_level] if self.log_level else []
        args = [str(binary), *level, "engine", "--model", str(self.model), "--served-model-name",
                self.name, "--host", self.host, "--port", str(self.listen_port), *self.flags]
        self.proc = subprocess.Popen(args, stdout=self._out, stderr=self._err, env=self.env)
        self._deadline = time.monotonic() + self.start_timeout

    def wait_ready(self):
        """Waits for the ready line(s); returns self."""
        deadline = self._deadline
        while True:
            self._out.seek(0)
            text = self._out.read()
            ready = _READY.search(text)
            kv = _KV.search(text)
            if ready and (kv or not self.kv_events):
                break
            if self.proc.poll() is not None:
                raise AssertionError(f"engine exited {self.proc.returncode} before it was ready: "
                                     f"{self.stderr_tail()}")
            if time.monotonic() > deadline:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError(f"engine not ready in {self.start_timeout} s: "
                                     f"{self.stderr_tail()}")
            time.sleep(0.02)
        assert ready.group(1) == self.name, text
        self.port = int(ready.group(3))
        self.url = f"http://127.0.0.1:{self.port}"
        if kv:
            self.kv_endpoint = kv.group(1)
            self.kv_replay_endpoint = None if kv.group(2) == "off" else kv.group(2)
        return self

    def kv_transfer_address(self):
        """host:port of the KV block server of an engine that produces (its startup line):
        what a router puts in x-kv-cache-source-host-port."""
        self._out.seek(0)
        found = _LENDING.search(self._out.read())
        assert found, f"the engine lends no KV blocks: {self.stderr_tail()}"
        return found.group(1)

    def log(self):
        """Everything it printed: stdout, then stderr (its log lines)."""
        self._out.seek(0)
        self._err.seek(0)
        return self._out.read() + self._err.read()

    def stderr_tail(self, chars=4000):
        self._err.seek(0)
        return self._err.read()[-chars:]

    def terminate(self):
        """Sends SIGTERM without waiting (stop waits). An engine that exited by itself before
        (a crash) fails here."""
        if self.proc is None or self._signalled:
            return
        self._signalled = True
        if self.proc.poll() is not None:
            raise AssertionError(f"engine exited {self.proc.returncode} while serving: "
                                 f"{self.stderr_tail()}")
        self.proc.send_signal(signal.SIGTERM)

    def kill(self):
        """SIGKILL (a crash on purpose: tests of what survives one); stop() then does nothing."""
        self._stopped = True
        self.proc.kill()
        self.proc.wait()

    def stop(self, timeout=30):
        """SIGTERM, then requires a clean exit (code 0) within `timeout` seconds."""
        if self.proc is None or self._stopped:
            return
        self._stopped = True
        self.terminate()
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"engine did not exit within {timeout} s of SIGTERM: "
                                 f"{self.stderr_tail()}")
        assert code == 0, f"engine exited {code} after SIGTERM: {self.stderr_tail()}"

    def __enter__(self):
        return self.start()

    def __exit__(self, exc_type, exc, tb):
        try:
            self.stop()
        except AssertionError:
            if exc_type is None:  # do not hide the error that ended the block
                raise

    # --- helpers over HTTP -------------------------------------------------------------------

    def complete(self, prompt, max_tokens=1):
        """POST /v1/completions straight to the engine (greedy); returns the response JSON."""
        r = requests.post(f"{self.url}/v1/completions",
                          json={"model": self.name, "prompt": prompt, "max_tokens": max_tokens,
                                "temperature": 0}, timeout=30)
        assert r.status_code == 200, r.text
        return r.json()

    def metrics(self):
        """The engine's Prometheus samples as {name: value}: the first series of each name,
        labels dropped (the gauges read here have one series each)."""
        response = requests.get(f"{self.url}/metrics", timeout=10)
        response.raise_for_status()
        return parse_metrics(response.text)

    def sample(self, name, **labels):
        """The sum of the samples of `name` whose labels include `labels`; fails when there
        is none."""
        return sample(self.url, name, **labels)

    def wait_idle(self, timeout=15):
        """Waits until nothing runs or waits and no KV block is held; returns the metrics.
        Freeing after a disconnect happens on the engine loop, so it is polled for."""
        deadline = time.monotonic() + timeout
        while True:
            m = self.metrics()
            if idle(m):
                return m
            if time.monotonic() > deadline:
                raise AssertionError(f"engine not idle after {timeout} s: "
                                     f"{ {k: v for k, v in m.items() if k in IDLE_GAUGES} }")
            time.sleep(0.05)


IDLE_GAUGES = ("vllm:num_requests_running", "vllm:num_requests_waiting",
               "vllm:kv_cache_usage_perc")


def start_engines(count, *flags, **kwargs):
    """`count` EngineServers of `flags` (and EngineServer's keyword arguments), spawned
    together, then each waited for: started, in order."""
    engines = [EngineServer(*flags, **kwargs) for _ in range(count)]
    for e in engines:
        e.spawn()
    for e in engines:
        e.wait_ready()
    return engines


def sample(url, name, **labels):
    """The sum of the samples of `name` at url/metrics whose labels include `labels`; fails
    when there is none."""
    wanted = [f'{k}="{v}"' for k, v in labels.items()]
    text = requests.get(f"{url}/metrics", timeout=10).text
    values = [float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
              if line.split("{", 1)[0].split(" ", 1)[0] == name
              and all(w in line for w in wanted)]
    assert values, f"no {name} sample with {labels}"
    return sum(values)


def idle(m):
    return all(m[name] == 0 for name in IDLE_GAUGES)


def parse_metrics(text):
    samples = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name_labels, _, value = line.rpartition(" ")
        name = name_labels.split("{", 1)[0]
        samples.setdefault(name, float(value))
    return samples
