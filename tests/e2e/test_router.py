"""`switchyard router` in front of simulated engines, driven by the openai client: proxying
(plain and streamed), prefix-cache affinity, signed session tokens, retries when an engine
dies before answering, and the router's debug view."""
import re
import signal
import subprocess
import tempfile
import time

import openai
import pytest
import requests

from conftest import MODELS_DIR, switchyard_bin
from engine_server import MODEL_NAME, EngineServer

_READY = re.compile(r"switchyard router: serving (\S+) on (http://\S+):(\d+)")


class Router:
    def __init__(self, engines, scheduling=None):
        endpoints = "\n".join(
            f"  - {{address: '127.0.0.1:{e.port}', engine: switchyard}}" for e in engines)
        self.config = tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False)
        self.config.write(f"listen: {{host: 127.0.0.1, port: 0}}\nmodel: {MODEL_NAME}\n"
                          f"tokenizer: {MODELS_DIR / 'tiny-llama3'}\n"
                          f"scraping: {{intervalMs: 50, stalenessMs: 2000}}\n"
                          f"pools:\n- name: default\n  endpoints:\n{endpoints}\n"
                          + (scheduling or ""))
        self.config.close()
        self.out = tempfile.TemporaryFile("w+")
        self.err = tempfile.TemporaryFile("w+")
        self.proc = subprocess.Popen([str(switchyard_bin()), "router", "--config",
                                      self.config.name], stdout=self.out, stderr=self.err)
        deadline = time.monotonic() + 60
        while True:
            self.out.seek(0)
            m = _READY.search(self.out.read())
            if m:
                break
            assert self.proc.poll() is None, self._tail()
            assert time.monotonic() < deadline, self._tail()
            time.sleep(0.02)
        self.url = f"http://127.0.0.1:{m.group(3)}"
        # Wait until every endpoint has been scraped once.
        while True:
            eps = requests.get(f"{self.url}/debug/endpoints", timeout=5).json()["endpoints"]
            if all(e["metrics"]["fresh"] for e in eps):
                break
            assert time.monotonic() < deadline
            time.sleep(0.02)

    def _tail(self):
        self.err.seek(0)
        return self.err.read()[-3000:]

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(timeout=30) == 0, self._tail()


@pytest.fixture(scope="module")
def fleet():
    engines = [EngineServer("--backend", "sim", "--sim-latency", "zero") for _ in range(3)]
    for e in engines:
        e.spawn()
    for e in engines:
        e.wait_ready()
    router = Router(engines)
    yield router, engines
    router.stop()
    for e in engines:
        e.stop()


def test_completion_and_stream_through_the_router(fleet):
    router, _ = fleet
    client = openai.OpenAI(base_url=f"{router.url}/v1", api_key="x", timeout=30)
    out = client.completions.create(model=MODEL_NAME, prompt="Hello", max_tokens=5)
    assert out.choices[0].finish_reason == "length"
    assert out.usage.completion_tokens == 5
    chunks = list(client.chat.completions.create(
        model=MODEL_NAME, messages=[{"role": "user", "content": "hi"}], max_tokens=4,
        stream=True))
    assert chunks[-1].choices[0].finish_reason == "length"
    # Errors from the engine come back as they are.
    with pytest.raises(openai.BadRequestError):
        client.completions.create(model=MODEL_NAME, prompt="x", max_tokens=5, temperature=-1)


def test_same_prefix_goes_to_the_same_endpoint(fleet):
    router, engines = fleet
    prompt = "A long shared system prompt. " * 20
    seen = set()
    for i in range(6):
        r = requests.post(f"{router.url}/v1/completions", timeout=30,
                          json={"model": MODEL_NAME, "prompt": prompt + str(i), "max_tokens": 2})
        assert r.status_code == 200, r.text
        seen.add(r.headers["x-switchyard-endpoint"])
    assert len(seen) == 1
    ports = {f"127.0.0.1:{e.port}" for e in engines}
    assert seen <= ports


def test_session_token_pins_and_forged_tokens_do_not():
    engines = [EngineServer("--backend", "sim", "--sim-latency", "zero") for _ in range(3)]
    for e in engines:
        e.start()
    router = Router(engines, scheduling=(
        "scheduling:\n  plugins:\n  - type: session-affinity-filter\n"
        "  - type: random-picker\n"))
    try:
        body = {"model": MODEL_NAME, "prompt": "session", "max_tokens": 1}
        first = requests.post(f"{router.url}/v1/completions", json=body, timeout=30)
        assert first.status_code == 200, first.text
        token = first.headers["x-session-token"]
        pinned = first.headers["x-switchyard-endpoint"]
        for _ in range(8):
            r = requests.post(f"{router.url}/v1/completions", json=body, timeout=30,
                              headers={"x-session-token": token})
            assert r.headers["x-switchyard-endpoint"] == pinned
        # An unsigned (llm-d style) token naming an endpoint is not trusted: the random picker
        # spreads such requests over the fleet instead of pinning them.
        import base64
        other = next(f"127.0.0.1:{e.port}" for e in engines if f"127.0.0.1:{e.port}" != pinned)
        forged = base64.urlsafe_b64encode(other.encode()).decode()
        seen = set()
        for _ in range(24):
            r = requests.post(f"{router.url}/v1/completions", json=body, timeout=30,
                              headers={"x-session-token": forged})
            assert r.status_code == 200, r.text
            seen.add(r.headers["x-switchyard-endpoint"])
        assert len(seen) > 1
    finally:
        router.stop()
        for e in engines:
            e.stop()


def test_debug_endpoints_and_metrics(fleet):
    router, engines = fleet
    eps = requests.get(f"{router.url}/debug/endpoints", timeout=5).json()["endpoints"]
    assert sorted(e["name"] for e in eps) == sorted(f"127.0.0.1:{e.port}" for e in engines)
    assert all(e["healthy"] and e["metrics"]["block_size"] == 16 for e in eps)
    text = requests.get(f"{router.url}/metrics", timeout=5).text
    assert "switchyard_router_requests_total" in text
    assert requests.get(f"{router.url}/nope", timeout=5).status_code == 404


def test_dead_engine_is_retried_elsewhere():
    engines = [EngineServer("--backend", "sim", "--sim-latency", "zero") for _ in range(2)]
    for e in engines:
        e.start()
    router = Router(engines)
    try:
        # Kill one engine; until the scraper notices, picks that land on it are retried.
        engines[0].stop()
        for i in range(10):
            r = requests.post(f"{router.url}/v1/completions", timeout=30,
                              json={"model": MODEL_NAME, "prompt": f"p{i}", "max_tokens": 2})
            assert r.status_code == 200, r.text
            assert r.headers["x-switchyard-endpoint"] == f"127.0.0.1:{engines[1].port}"
    finally:
        router.stop()
        engines[1].stop()
