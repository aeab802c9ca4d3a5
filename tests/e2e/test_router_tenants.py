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
from engine_server import MODEL_NAME, EngineServer
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
