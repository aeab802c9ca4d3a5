"""Graceful drain, as Envoy and vLLM drain. SIGTERM to the router: /health answers 503 at
once, new requests get 503 with Retry-After (an OpenAI error body, Connection: close),
streams in flight finish, or end with a clean SSE error and `data: [DONE]` at
--shutdown-timeout (buffered requests: 503 with Retry-After), a second signal ends the drain
at once, and the process exits 0. SIGTERM to one of two engines under a stream of requests:
the router retries what the draining engine refuses (503 + Retry-After) elsewhere, sends it
no more, and every request completes once. Real processes, the openai client."""
import concurrent.futures
import contextlib
import json
import signal
import time

import openai
import pytest
import requests

from engine_server import MODEL_NAME, EngineServer
from router_server import Router, member_name, metric_sum

# Steps of 25 ms: a stream of n tokens takes about n / 40 s.
SLOW = ("--backend", "sim", "--sim-latency", "zero,overhead_ms=25")


@pytest.fixture
def engines():
    engines = [EngineServer(*SLOW) for _ in range(2)]
    for e in engines:
        e.spawn()
    for e in engines:
        e.wait_ready()
    yield engines
    for e in engines:
        e.stop()


@contextlib.contextmanager
def router_for(engines, shutdown_timeout):
    """A router the test signals itself; killed should the test fail before it exited."""
    router = Router(engines, args=["--shutdown-timeout", shutdown_timeout])
    try:
        yield router
    finally:
        if router.proc.poll() is None:
            router.proc.kill()
            router.proc.wait()


def open_stream(server, max_tokens):
    """A raw streamed completion to a router or an engine that has begun (its first event
    read); returns the response and its line iterator."""
    r = requests.post(f"{server.url}/v1/completions", stream=True, timeout=60,
                      json={"model": MODEL_NAME, "prompt": "Hello", "max_tokens": max_tokens,
                            "stream": True})
    assert r.status_code == 200, r.text
    lines = r.iter_lines()
    first = next(line for line in lines if line and not line.startswith(b":"))
    assert first.startswith(b"data: {"), first
    return r, lines


def drained_events(lines):
    """The rest of a stream's data events, decoded (the [DONE] marker as the string)."""
    out = []
    for line in lines:
        if line.startswith(b"data: "):
            payload = line[len(b"data: "):]
            out.append("[DONE]" if payload == b"[DONE]" else json.loads(payload))
    return out


def check_refusing(router):
    health = requests.get(f"{router.url}/health", timeout=5)
    assert health.status_code == 503
    r = requests.post(f"{router.url}/v1/completions", timeout=5,
                      json={"model": MODEL_NAME, "prompt": "x", "max_tokens": 1})
    assert r.status_code == 503, r.text
    assert int(r.headers["retry-after"]) >= 1
    assert r.headers.get("connection", "").lower() == "close"
    assert "shutting down" in r.json()["error"]["message"]


def test_sigterm_lets_streams_in_flight_finish(engines):
    with router_for(engines, 30) as router:
        sigterm_lets_streams_in_flight_finish(router)


def sigterm_lets_streams_in_flight_finish(router):
    client = openai.OpenAI(base_url=f"{router.url}/v1", api_key="x", timeout=60, max_retries=0)
    tokens = 40
    started = []

    def stream(i):
        chunks = client.completions.create(model=MODEL_NAME, prompt=f"Hello {i}",
                                           max_tokens=tokens, stream=True)
        n, finish = 0, None
        for chunk in chunks:
            n += 1
            if n == 1:
                started.append(i)
            finish = chunk.choices[0].finish_reason or finish
        return n, finish

    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        futures = [pool.submit(stream, i) for i in range(6)]
        deadline = time.monotonic() + 30
        while len(started) < 6:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        router.proc.send_signal(signal.SIGTERM)
        time.sleep(0.1)
        check_refusing(router)
        results = [f.result() for f in futures]
    for n, finish in results:
        assert finish == "length" and n >= tokens
    assert router.proc.wait(timeout=30) == 0, router.output()


def test_shutdown_timeout_ends_what_is_left_with_clean_errors(engines):
    with router_for(engines, 1) as router:
        shutdown_timeout_ends_what_is_left(router)


def shutdown_timeout_ends_what_is_left(router):
    streams = [open_stream(router, 2000) for _ in range(2)]
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        buffered = pool.submit(
            requests.post, f"{router.url}/v1/completions", timeout=60,
            json={"model": MODEL_NAME, "prompt": "Hello", "max_tokens": 2000})
        time.sleep(0.3)
        sent = time.monotonic()
        router.proc.send_signal(signal.SIGTERM)
        for _, lines in streams:
            events = drained_events(lines)
            # An error event, then [DONE]: never a fake normal finish.
            assert events[-1] == "[DONE]", events[-3:]
            assert "shutting down" in events[-2]["error"]["message"], events[-3:]
            assert all(e == "[DONE]" or "error" in e or e["choices"][0]["finish_reason"] is None
                       for e in events)
        r = buffered.result()
        assert r.status_code == 503 and int(r.headers["retry-after"]) >= 1, r.text
        assert "shutting down" in r.json()["error"]["message"]
    assert router.proc.wait(timeout=30) == 0, router.output()
    assert 0.8 < time.monotonic() - sent < 10


def test_a_second_signal_ends_the_drain_at_once(engines):
    with router_for(engines, 120) as router:
        a_second_signal_ends_the_drain(router)


def a_second_signal_ends_the_drain(router):
    r, lines = open_stream(router, 2000)
    router.proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    check_refusing(router)
    router.proc.send_signal(signal.SIGINT)
    sent = time.monotonic()
    events = drained_events(lines)
    assert events[-1] == "[DONE]" and "error" in events[-2], events[-3:]
    assert router.proc.wait(timeout=30) == 0, router.output()
    assert time.monotonic() - sent < 10


def test_sigterm_to_an_engine_under_load_loses_no_request():
    """One of two engines drains (SIGTERM) while requests keep coming: what it refuses is
    retried on the other, it gets no new request for its Retry-After, and every request
    completes, each once (a request the router retried was refused before it ran). A long
    stream straight to the draining engine keeps it draining (and refusing) for seconds."""
    engines = [EngineServer(*SLOW, "--shutdown-timeout", "30") for _ in range(2)]
    for e in engines:
        e.spawn()
    for e in engines:
        e.wait_ready()
    victim = engines[0]
    name = member_name(victim)
    router = Router(engines, scheduling="scheduling:\n  plugins:\n  - type: random-picker\n")
    try:
        client = openai.OpenAI(base_url=f"{router.url}/v1", api_key="x", timeout=120,
                               max_retries=0)
        total = 60

        def one(i):
            kw = dict(model=MODEL_NAME, prompt=f"Hello {i}", max_tokens=12)
            if i % 2:
                chunks = list(client.completions.create(stream=True, **kw))
                return chunks[-1].choices[0].finish_reason
            return client.completions.create(**kw).choices[0].finish_reason

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            long_stream, lines = open_stream(victim, 160)  # about 4 s
            futures = [pool.submit(one, i) for i in range(total)]
            deadline = time.monotonic() + 60
            while sum(f.done() for f in futures) < 10:
                assert time.monotonic() < deadline
                time.sleep(0.01)
            victim.terminate()
            results = [f.result() for f in futures]
            assert drained_events(lines)[-1] == "[DONE]"
        assert results == ["length"] * total
        assert victim.proc.wait(timeout=60) == 0, victim.stderr_tail()
        victim._stopped = True
        text = router.metrics()
        assert metric_sum(text, "switchyard_router_requests_total", code="200") == total
        # The draining engine was retried away from only when it refused (503) or, once it
        # had exited, could not be reached: never after it had started on a request.
        refused = metric_sum(text, "switchyard_router_upstream_retries_total", endpoint=name,
                             reason="http_503")
        # Each refusal keeps it out for its Retry-After (1 s): a few refusals, not one for
        # every request picked for it while it drained.
        assert 1 <= refused <= 10, refused
        for reason in ("timeout", "http_502"):
            assert metric_sum(text, "switchyard_router_upstream_retries_total",
                              reason=reason) == 0, text
        # The other engine ran each request it answered once.
        survivor = engines[1]
        served = metric_sum(text, "switchyard_router_requests_total", code="200",
                            endpoint=member_name(survivor))
        ran = sum(float(line.rsplit(" ", 1)[1])
                  for line in requests.get(f"{survivor.url}/metrics", timeout=5).text.splitlines()
                  if line.startswith("vllm:request_success_total"))
        assert ran == served
    finally:
        router.stop()
        for e in engines:
            e.stop()
