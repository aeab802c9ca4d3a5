"""`switchyard router` in front of simulated engines, driven by the openai client: proxying
(plain and streamed), prefix-cache affinity, signed session tokens, retries when an engine
dies before answering, the router's debug view and metrics, 405s for wrong methods, request
ids, and a pool whose members come from DNS."""
import re

import openai
import pytest
import requests

from engine_server import MODEL_NAME, EngineServer
from router_server import Router, metric_sum

_UUID4 = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")


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


def test_a_known_path_with_another_method_is_405_with_allow(fleet):
    """As the engine answers: 405, the allowed method in Allow, an OpenAI error body."""
    router, _ = fleet
    for method, path, allowed in (("GET", "/v1/completions", "POST"),
                                  ("PUT", "/v1/chat/completions", "POST"),
                                  ("POST", "/health", "GET"), ("DELETE", "/metrics", "GET"),
                                  ("POST", "/v1/models", "GET")):
        r = requests.request(method, f"{router.url}{path}", timeout=5)
        assert r.status_code == 405, (method, path, r.text)
        assert r.headers["allow"] == allowed
        err = r.json()["error"]
        assert err["type"] == "MethodNotAllowedError" and err["code"] == 405
        assert err["message"] == f"Method {method} is not allowed on {path}; use {allowed}."


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


def test_request_ids_are_echoed_or_made(fleet):
    """A client's x-request-id comes back as sent and reaches the engine (which, as vLLM,
    answers with id cmpl-<x-request-id>); without one the router makes a UUIDv4 and sends it
    upstream; router-made errors carry it too."""
    router, _ = fleet
    client = openai.OpenAI(base_url=f"{router.url}/v1", api_key="x", timeout=30)
    raw = client.completions.with_raw_response.create(
        model=MODEL_NAME, prompt="Hello", max_tokens=2,
        extra_headers={"x-request-id": "e2e-trace-1"})
    assert raw.headers["x-request-id"] == "e2e-trace-1"
    completion = raw.parse()
    assert completion.usage.completion_tokens == 2
    assert completion.id == "cmpl-e2e-trace-1"
    raw = client.chat.completions.with_raw_response.create(
        model=MODEL_NAME, messages=[{"role": "user", "content": "hi"}], max_tokens=3, stream=True)
    made = raw.headers["x-request-id"]
    assert _UUID4.fullmatch(made), made
    chunks = list(raw.parse())
    assert chunks[-1].choices[0].finish_reason == "length"
    assert {c.id for c in chunks} == {f"chatcmpl-{made}"}
    r = requests.post(f"{router.url}/v1/completions", data="{nope", timeout=30,
                      headers={"content-type": "application/json", "x-request-id": "bad-1"})
    assert r.status_code == 400
    assert r.headers["x-request-id"] == "bad-1"
    assert r.json()["error"]["message"]


def test_router_metrics_after_requests(fleet):
    router, engines = fleet
    names = [f"127.0.0.1:{e.port}" for e in engines]
    before = requests.get(f"{router.url}/metrics", timeout=5).text
    client = openai.OpenAI(base_url=f"{router.url}/v1", api_key="x", timeout=30)
    prompt = "Metrics share this long prefix across requests. " * 16
    for i in range(4):
        client.completions.create(model=MODEL_NAME, prompt=prompt, max_tokens=2)
    list(client.chat.completions.create(
        model=MODEL_NAME, messages=[{"role": "user", "content": "hi"}], max_tokens=2,
        stream=True))
    with pytest.raises(openai.BadRequestError):
        client.completions.create(model=MODEL_NAME, prompt="x", max_tokens=2, temperature=-1)
    text = requests.get(f"{router.url}/metrics", timeout=5).text

    def delta(name, **labels):
        return metric_sum(text, name, **labels) - metric_sum(before, name, **labels)

    # Requests by the status the client got, per endpoint and pool.
    assert delta("switchyard_router_requests_total", model=MODEL_NAME, pool="default",
                 code="200") == 5
    # The bad temperature is the engine's to refuse (the router reads only what it routes
    # on): its 400 comes back through the router and counts under the endpoint.
    assert delta("switchyard_router_requests_total", pool="default", code="400") == 1
    assert delta("switchyard_router_requests_total", endpoint="", code="400") == 0
    # Latencies: one per proxied request (all six); decision times: one tokenization per
    # request, one pick per proxied one.
    assert delta("switchyard_router_request_duration_seconds_count") == 6
    assert delta("switchyard_router_time_to_first_byte_seconds_count") == 6
    assert delta("switchyard_router_tokenize_duration_seconds_count") == 6
    assert delta("switchyard_router_scheduler_duration_seconds_count") == 6
    # The four same-prefix completions: the 2nd to 4th were predicted cached where they went.
    prompt_tokens = delta("switchyard_router_prefix_prompt_tokens_total")
    cached = delta("switchyard_router_prefix_predicted_cached_tokens_total")
    assert prompt_tokens > 0
    assert 0 < cached < prompt_tokens
    # What the router believes about each endpoint.
    for n in names:
        assert metric_sum(text, "switchyard_router_endpoint_healthy", endpoint=n,
                          pool="default") == 1
        assert metric_sum(text, "switchyard_router_endpoint_metrics_age_seconds",
                          endpoint=n) >= 0
        assert metric_sum(text, "switchyard_router_endpoint_inflight_requests", endpoint=n) == 0
    assert metric_sum(text, "switchyard_router_pool_size", pool="default") == len(engines)
    assert metric_sum(text, "switchyard_router_pool_ready_endpoints", pool="default") == len(engines)


def test_dns_pool_serves_requests():
    engine = EngineServer("--backend", "sim", "--sim-latency", "zero")
    engine.start()
    router = Router([engine], pools=(
        "pools:\n- name: dns\n  dns:\n"
        f"  - {{name: localhost, port: {engine.port}, engine: switchyard, refreshSeconds: 1}}\n"))
    try:
        member = f"127.0.0.1:{engine.port}"
        eps = requests.get(f"{router.url}/debug/endpoints", timeout=5).json()["endpoints"]
        assert member in {e["name"] for e in eps}
        assert all(e["pool"] == "dns" for e in eps)
        client = openai.OpenAI(base_url=f"{router.url}/v1", api_key="x", timeout=30)
        for i in range(3):
            raw = client.completions.with_raw_response.create(
                model=MODEL_NAME, prompt=f"dns {i}", max_tokens=2)
            assert raw.headers["x-switchyard-endpoint"] == member
            assert raw.parse().usage.completion_tokens == 2
        text = requests.get(f"{router.url}/metrics", timeout=5).text
        assert metric_sum(text, "switchyard_router_pool_size", pool="dns") == len(eps)
        assert metric_sum(text, "switchyard_router_requests_total", endpoint=member, pool="dns",
                          code="200") == 3
    finally:
        router.stop()
        engine.stop()
