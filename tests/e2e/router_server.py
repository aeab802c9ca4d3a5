"""Starts `switchyard router --config` for the end-to-end tests.

A Router writes a config naming its members (one static pool, or the `pools` YAML given),
starts the binary with `listen: {host: 127.0.0.1, port: 0}` (plus `listen_extra` keys), waits
for the ready line ("switchyard router: serving NAME on http://HOST:PORT") and then until the
members named by `wait_fresh` (default: every member) have been scraped once. A member is any object with a
`port` and an `engine_kind` (its `engine:` value in the config): an EngineServer or a
peer_servers server; a member with a `kv_endpoint` (an EngineServer started with
kv_events=True) is listed with `kvEvents:` (its PUB and replay sockets, every topic), which
feed the router's index when the scheduling config has a precise prefix-cache-scorer.
`args` adds flags to the command line (--shutdown-timeout), `env` variables to its
environment (credentials' apiKeyEnv). stop() sends SIGTERM and requires exit code 0."""
import os
import re
import signal
import subprocess
import tempfile
import time

import requests

from conftest import MODELS_DIR, switchyard_bin
from engine_server import MODEL_NAME, parse_metrics

_READY = re.compile(r"switchyard router: serving (\S+) on (http://\S+):(\d+)")


def member_name(member):
    """The router's name for a static member: its address."""
    return f"127.0.0.1:{member.port}"


def member_line(member):
    """The member's entry in the config's `endpoints:` list."""
    kv = ""
    if getattr(member, "kv_endpoint", None):
        replay = member.kv_replay_endpoint or ""
        kv = f", kvEvents: {{endpoint: '{member.kv_endpoint}', replayEndpoint: '{replay}'}}"
    return f"  - {{address: '{member_name(member)}', engine: {member.engine_kind}{kv}}}"


def metric_sum(text, name, **labels):
    """The sum of the samples of `name` in Prometheus text whose labels include `labels`."""
    wanted = [f'{k}="{v}"' for k, v in labels.items()]
    lines = [line for line in text.splitlines()
             if line.split("{", 1)[0].split(" ", 1)[0] == name and all(w in line for w in wanted)]
    return sum(parse_metrics(line)[name] for line in lines)


class Router:
    def __init__(self, members, scheduling=None, pools=None, wait_fresh=None,
                 model=MODEL_NAME, tokenizer=MODELS_DIR / "tiny-llama3", start_timeout=60,
                 listen_extra="", extra="", args=(), env=None):
        """listen_extra: more keys of `listen:`; extra: more top-level YAML for the config
        (proxy:, outlierDetection: ...); args, env: more command-line flags, environment."""
        endpoints = "\n".join(member_line(m) for m in members)
        pools = pools or f"pools:\n- name: default\n  endpoints:\n{endpoints}\n"
        self.config = tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False)
        listen = ", ".join(x for x in ("host: 127.0.0.1, port: 0", listen_extra) if x)
        self.config.write(f"listen: {{{listen}}}\nmodel: {model}\n"
                          f"tokenizer: {tokenizer}\n"
                          f"scraping: {{intervalMs: 50, stalenessMs: 2000}}\n"
                          + pools + (scheduling or "") + extra)
        self.config.close()
        self.out = tempfile.TemporaryFile("w+")
        self.err = tempfile.TemporaryFile("w+")
        self.proc = subprocess.Popen([str(switchyard_bin()), "router", "--config",
                                      self.config.name, *map(str, args)], stdout=self.out,
                                     stderr=self.err, env={**os.environ, **(env or {})})
        try:
            self._wait_ready(members if wait_fresh is None else wait_fresh, start_timeout)
        except BaseException:
            self.proc.kill()  # a router that never got ready is not left running
            self.proc.wait()
            raise

    def _wait_ready(self, wait_fresh, start_timeout):
        deadline = time.monotonic() + start_timeout
        while True:
            self.out.seek(0)
            m = _READY.search(self.out.read())
            if m:
                break
            assert self.proc.poll() is None, self._tail()
            assert time.monotonic() < deadline, self._tail()
            time.sleep(0.02)
        self.url = f"http://127.0.0.1:{m.group(3)}"
        names = {member_name(m) for m in wait_fresh}
        while True:
            fresh = {e["name"] for e in self.endpoints() if e["metrics"]["fresh"]}
            if names <= fresh:
                break
            assert time.monotonic() < deadline, f"not scraped: {sorted(names - fresh)}"
            time.sleep(0.02)

    def endpoints(self):
        """GET /debug/endpoints: what the router believes about each member."""
        return requests.get(f"{self.url}/debug/endpoints", timeout=5).json()["endpoints"]

    def metrics(self):
        """GET /metrics: the router's Prometheus text (read it with metric_sum)."""
        return requests.get(f"{self.url}/metrics", timeout=5).text

    def output(self):
        """Everything it printed: stdout (its log lines) and stderr."""
        self.out.seek(0)
        self.err.seek(0)
        return self.out.read() + self.err.read()

    def _tail(self):
        self.err.seek(0)
        return self.err.read()[-3000:]

    def kill(self):
        """SIGKILL: a router that dies with requests in flight."""
        self.proc.kill()
        self.proc.wait()

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(timeout=30) == 0, self._tail()
