"""Tenants and flow control in the router, with the openai client: API keys (stored as SHA-256
digests) name the tenant, unknown keys are 401; objectives give priorities and a tenant may
use only its own (403, and 400 for one not configured); per-tenant rate and token quotas are
429 with Retry-After and x-llm-d-request-dropped-reason; the router sets each tenant's
cache_salt, so one tenant's cached prefix is no hit for another; with the flowControl feature
gate requests wait in the router while the fleet is saturated, in priority order, leave the
queue when their client goes, and are shed with a reason when their TTL runs out."""
import concurrent.futures
import hashlib
import socket
import threading
import time

import openai
import pytest
import requests

from conftest import wait_until
from engine_server import MODEL_NAME, EngineServer, start_engines
from router_server import Router, metric_sum

KEY_A = "sk-team-a-5d1f0c"
KEY_B = "sk-team-b-9e2a44"
DROPPED = "x-llm-d-request-dropped-reason"


def digest(key):
    return "sha256:" + hashlib.sha256(key.encode()).hexdigest()


def tenants(limits_a="{}", limits_b="{}", require=True):
    return (f"tenants:\n  requireApiKey: {str(require).lower()}\n  list:\n"
            f"  - id: team-a\n    apiKeys: ['{digest(KEY_A)}']\n    limits: {limits_a}\n"
            f"    objectives: [interactive, batch]\n    defaultObjective: interactive\n"
            f"  - id: team-b\n    apiKeys: ['{digest(KEY_B)}']\n    limits: {limits_b}\n"
            f"    objectives: [batch]\n    defaultObjective: batch\n"
            "objectives:\n- {name: interactive, priority: 10}\n- {name: batch, priority: -1}\n")


def flow_control(detector="{type: concurrency-detector, parameters: {maxConcurrency: 1}}",
                 flow="defaultRequestTTL: 30s"):
    return ("scheduling:\n  featureGates: [flowControl]\n  plugins:\n"
            f"  - {detector}\n  - type: queue-scorer\n  - type: max-score-picker\n"
            "  schedulingProfiles:\n  - name: default\n"
            "    plugins: [{pluginRef: queue-scorer}, {pluginRef: max-score-picker}]\n"
            f"  flowControl: {{{flow}, saturationDetector: {{pluginRef: concurrency-detector}}}}\n")


def client(router, key, **kw):
    return openai.OpenAI(base_url=f"{router.url}/v1", api_key=key, max_retries=0, timeout=60,
                         **kw)


def complete(router, key, prompt="Hello there", max_tokens=4, headers=None):
    return client(router, key).completions.create(
        model=MODEL_NAME, prompt=prompt, max_tokens=max_tokens, temperature=0,
        extra_headers=headers or {})


@pytest.fixture
def engine(switchyard):
    with EngineServer("--backend", "sim", "--sim-latency", "zero") as e:
        yield e


@pytest.fixture
def slow_engine(switchyard):
    """Each decode step takes 100 ms: a request of n tokens runs n/10 s."""
    with EngineServer("--backend", "sim", "--sim-latency", "zero,decode_ms_per_seq=100") as e:
        yield e


def test_keys_name_tenants_and_unknown_keys_are_401(engine):
    router = Router([engine], extra=tenants())
    try:
        assert complete(router, KEY_A).usage.completion_tokens == 4
        assert complete(router, KEY_B).usage.completion_tokens == 4
        with pytest.raises(openai.AuthenticationError) as e:
            complete(router, "sk-nobody")
        assert e.value.status_code == 401
        assert "sk-nobody" not in e.value.response.text
        # No key at all, while keys are required.
        r = requests.post(f"{router.url}/v1/completions", timeout=10,
                          json={"model": MODEL_NAME, "prompt": "x", "max_tokens": 1})
        assert r.status_code == 401 and "error" in r.json()
        assert metric_sum(router.metrics(), "switchyard_router_tenant_requests_rejected_total",
                          reason="unauthenticated") == 2
    finally:
        router.stop()
    # The keys never reach the log.
    assert KEY_A not in router.output() and KEY_B not in router.output()


def test_objectives_set_the_priority_a_tenant_may_use(engine):
    router = Router([engine], extra=tenants())
    try:
        assert complete(router, KEY_A, headers={"x-llm-d-inference-objective": "batch"})
        with pytest.raises(openai.PermissionDeniedError):
            complete(router, KEY_B, headers={"x-llm-d-inference-objective": "interactive"})
        with pytest.raises(openai.BadRequestError) as e:
            complete(router, KEY_A, headers={"x-llm-d-inference-objective": "nope"})
        assert "nope" in e.value.message
    finally:
        router.stop()


def test_a_tenant_over_its_request_rate_gets_429_with_retry_after(engine):
    router = Router([engine], extra=tenants(limits_b="{requestsPerSecond: 0.2, burst: 1}"))
    try:
        complete(router, KEY_B)
        with pytest.raises(openai.RateLimitError) as e:
            complete(router, KEY_B)
        headers = e.value.response.headers
        assert headers[DROPPED] == "rate-limited-requests"
        assert 1 <= int(headers["retry-after"]) <= 5
        # The other tenant is not limited by it.
        for _ in range(3):
            complete(router, KEY_A)
        assert metric_sum(router.metrics(), "switchyard_router_tenant_requests_rejected_total",
                          tenant="team-b", reason="rate-limited-requests") == 1
    finally:
        router.stop()


def test_token_quotas_charge_prompts_and_generated_tokens(engine):
    router = Router([engine], extra=tenants(limits_b="{tokensPerMinute: 60}"))
    try:
        # A prompt larger than a minute's quota can never pass.
        with pytest.raises(openai.RateLimitError) as e:
            complete(router, KEY_B, prompt="word " * 100)
        assert e.value.response.headers[DROPPED] == "exceeds-token-quota"
        # Prompt and generated tokens come out of the quota: 70 generated tokens put it in
        # debt, so the next request finds it spent.
        assert complete(router, KEY_B, prompt="hi", max_tokens=70).usage.completion_tokens == 70
        with pytest.raises(openai.RateLimitError) as e:
            complete(router, KEY_B, prompt="hi", max_tokens=4)
        assert e.value.response.headers[DROPPED] == "rate-limited-tokens"
        text = router.metrics()
        assert metric_sum(text, "switchyard_router_tenant_tokens_total", tenant="team-b",
                          kind="generated") == 70
        assert metric_sum(text, "switchyard_router_tenant_tokens_total", tenant="team-b",
                          kind="prompt") > 0
    finally:
        router.stop()


def test_each_tenant_gets_its_own_cache_salt(engine):
    router = Router([engine], extra=tenants())
    try:
        prompt = "The same long shared prefix for both tenants " * 8
        hits = lambda: engine.sample("vllm:prefix_cache_hits_total")  # noqa: E731
        complete(router, KEY_A, prompt=prompt)
        complete(router, KEY_A, prompt=prompt)
        after_a = hits()
        assert after_a > 0  # team-a hits its own prefix
        complete(router, KEY_B, prompt=prompt)
        assert hits() == after_a  # team-b finds nothing of team-a's
        # The client's own cache_salt is replaced by its tenant's: team-b now hits its own
        # prefix, which a salt of the client's choosing would have missed.
        client(router, KEY_B).completions.create(model=MODEL_NAME, prompt=prompt, max_tokens=1,
                                                 extra_body={"cache_salt": "anything"})
        assert hits() > after_a
    finally:
        router.stop()


def flows(router):
    return requests.get(f"{router.url}/debug/flows", timeout=5).json()


def in_background(fn, *args, **kwargs):
    """Runs fn in a thread; returns a future."""
    pool = concurrent.futures.ThreadPoolExecutor(1)
    future = pool.submit(fn, *args, **kwargs)
    pool.shutdown(wait=False)
    return future


def wait_running(router, n=1):
    wait_until(lambda: sum(f["in_flight"] for f in flows(router)["flows"]) >= n,
               f"{n} request(s) dispatched")


def test_requests_wait_in_the_router_while_the_fleet_is_saturated(slow_engine):
    router = Router([slow_engine], extra=tenants(), scheduling=flow_control())
    try:
        assert flows(router)["enabled"]
        started = time.monotonic()
        futures = [in_background(complete, router, KEY_A, max_tokens=5) for _ in range(3)]
        wait_until(lambda: flows(router)["queued"] >= 1, "a request queued in the router")
        # The engine never holds more than the detector's capacity: the rest wait here.
        assert slow_engine.sample("vllm:num_requests_running") <= 1
        assert slow_engine.sample("vllm:num_requests_waiting") == 0
        assert all(f.result(timeout=30).usage.completion_tokens == 5 for f in futures)
        # One after the other: the first token comes with the prefill, then 4 steps of 100 ms.
        assert time.monotonic() - started >= 3 * 0.4 * 0.9
        text = router.metrics()
        assert metric_sum(text, "switchyard_router_flow_control_request_queue_duration_seconds_count",
                          fairness_id="team-a", outcome="dispatched") == 3
        wait_until(lambda: flows(router)["queued"] == 0 and not flows(router)["flows"],
                   "flow control idle")
    finally:
        router.stop()


def test_a_higher_priority_request_overtakes_queued_batch_work(slow_engine):
    router = Router([slow_engine], extra=tenants(), scheduling=flow_control())
    try:
        order = []
        lock = threading.Lock()

        def run(objective, max_tokens):
            out = complete(router, KEY_A, max_tokens=max_tokens,
                           headers={"x-llm-d-inference-objective": objective})
            with lock:
                order.append(objective)
            return out

        first = in_background(run, "interactive", 8)
        wait_running(router)
        batch = in_background(run, "batch", 2)
        wait_until(lambda: flows(router)["queued"] == 1, "the batch request queued")
        urgent = in_background(run, "interactive", 2)
        wait_until(lambda: flows(router)["queued"] == 2, "both queued")
        for f in (first, batch, urgent):
            f.result(timeout=30)
        # The interactive band goes first; batch only once the fleet has idle room.
        assert order == ["interactive", "interactive", "batch"]
        bands = {b["priority"] for b in flows(router)["bands"]}
        assert {10, -1} <= bands
    finally:
        router.stop()


def test_queued_requests_are_shed_when_their_ttl_runs_out(slow_engine):
    router = Router([slow_engine], extra=tenants(),
                    scheduling=flow_control(flow="defaultRequestTTL: 300ms"))
    try:
        long = in_background(complete, router, KEY_A, max_tokens=15)
        wait_running(router)
        started = time.monotonic()
        with pytest.raises(openai.RateLimitError) as e:
            complete(router, KEY_A, max_tokens=2)
        waited = time.monotonic() - started
        assert 0.25 <= waited < 1.2
        assert e.value.response.headers[DROPPED] == "rejected-ttl-expired"
        assert int(e.value.response.headers["retry-after"]) >= 1
        assert long.result(timeout=30).usage.completion_tokens == 15
        assert metric_sum(router.metrics(), "switchyard_router_tenant_requests_rejected_total",
                          tenant="team-a", reason="rejected-ttl-expired") == 1
    finally:
        router.stop()


def test_a_client_that_leaves_while_queued_is_removed_at_once(slow_engine):
    router = Router([slow_engine], extra=tenants(), scheduling=flow_control())
    try:
        long = in_background(complete, router, KEY_A, max_tokens=15)
        wait_running(router)
        impatient = openai.OpenAI(base_url=f"{router.url}/v1", api_key=KEY_A, max_retries=0,
                                  timeout=0.3)
        with pytest.raises(openai.APITimeoutError):
            impatient.completions.create(model=MODEL_NAME, prompt="hi", max_tokens=2)
        wait_until(lambda: flows(router)["queued"] == 0, "the queue emptied", timeout=2)
        assert flows(router)["rejected_total"]["rejected-context-cancelled"] == 1
        assert long.result(timeout=30).usage.completion_tokens == 15
        # The engine never saw the request that left.
        assert slow_engine.sample("vllm:request_success_total") == 1
    finally:
        router.stop()


def test_a_tenant_at_its_max_concurrent_waits_while_others_go(slow_engine):
    router = Router([slow_engine], extra=tenants(limits_a="{maxConcurrent: 1}"),
                    scheduling=flow_control(
                        detector="{type: concurrency-detector, parameters: {maxConcurrency: 8}}"))
    try:
        order = []
        lock = threading.Lock()

        def run(key, label, max_tokens):
            complete(router, key, max_tokens=max_tokens)
            with lock:
                order.append(label)

        a1 = in_background(run, KEY_A, "a1", 10)
        wait_running(router)
        a2 = in_background(run, KEY_A, "a2", 2)
        wait_until(lambda: flows(router)["queued"] == 1, "team-a's second request held back")
        b = in_background(run, KEY_B, "b", 2)
        for f in (a1, a2, b):
            f.result(timeout=30)
        assert order.index("b") < order.index("a2")
    finally:
        router.stop()


def test_without_flow_control_a_tenant_over_max_concurrent_gets_429(slow_engine):
    router = Router([slow_engine], extra=tenants(limits_a="{maxConcurrent: 1}"))
    try:
        long = in_background(complete, router, KEY_A, max_tokens=10)
        wait_until(lambda: slow_engine.sample("vllm:num_requests_running") == 1, "running")
        with pytest.raises(openai.RateLimitError) as e:
            complete(router, KEY_A, max_tokens=1)
        assert e.value.response.headers[DROPPED] == "max-concurrent"
        assert long.result(timeout=30)
        complete(router, KEY_A, max_tokens=1)  # its slot came back
    finally:
        router.stop()


def test_sigterm_lets_queued_requests_finish(slow_engine):
    router = Router([slow_engine], extra=tenants(), scheduling=flow_control(),
                    args=["--shutdown-timeout", "20"])
    futures = [in_background(complete, router, KEY_A, max_tokens=4) for _ in range(3)]
    # One runs, two wait: all three are in the router before SIGTERM (a request that
    # arrives after it is refused with 503, rightly).
    wait_until(lambda: flows(router)["queued"] >= 2, "requests queued")
    router.stop()  # SIGTERM: drains, exit code 0
    assert all(f.result(timeout=30).usage.completion_tokens == 4 for f in futures)


def test_queued_requests_survive_an_engine_killed_under_them(switchyard):
    """Two engines behind flow control (one request each at a time); an engine is killed
    (SIGKILL) while requests run on it and more wait in the router: every request is
    answered once, by the engine left, and flow control ends empty."""
    engines = start_engines(2, "--backend", "sim", "--sim-latency",
                            "zero,decode_ms_per_seq=100")
    router = Router(engines, extra=tenants(), scheduling=flow_control())
    try:
        futures = [in_background(complete, router, KEY_A, max_tokens=4) for _ in range(6)]
        wait_until(lambda: flows(router)["queued"] >= 1, "requests queued")
        engines[0].kill()
        answers = [f.result(timeout=60) for f in futures]
        assert all(a.usage.completion_tokens == 4 for a in answers)
        assert len({a.id for a in answers}) == 6  # none served twice
        wait_until(lambda: not flows(router)["flows"], "flow control idle")
        assert metric_sum(router.metrics(),
                          "switchyard_router_flow_control_request_queue_duration_seconds_count",
                          outcome="dispatched") == 6
    finally:
        router.stop()
        engines[1].stop()
