"""Router replicas that share state through a real Redis (`sharedState:` in router.yaml):
two routers over the same sim engines, as two replicas behind a load balancer. What one
replica learns the other uses: a prefix routed by one is a hit on the other (approximate
prefix scoring, which llm-d documents as not working active-active), a session bound by one
stays bound on the other, a tenant's quota holds across both, and each sees the other's
requests in flight. A replica started later reads what the fleet learnt before it. With
Redis killed both keep serving on their own views (fail-open, counted), and sharing resumes
when Redis is back."""
import concurrent.futures
import hashlib
import random
import string

import openai
import pytest
import requests

from conftest import wait_until
from engine_server import MODEL_NAME, EngineServer, start_engines
from redis_server import RedisServer
from router_server import Router, metric_sum

ENDPOINT = "x-switchyard-endpoint"
KEY = "sk-replicas-team-a"

SCHEDULING = """scheduling:
  plugins:
  - type: prefix-cache-scorer
  - type: session-affinity-scorer
    parameters: {strategy: session_id}
  - type: max-score-picker
  schedulingProfiles:
  - name: default
    plugins:
    - {pluginRef: prefix-cache-scorer, weight: 1}
    - {pluginRef: session-affinity-scorer, weight: 10}
    - {pluginRef: max-score-picker}
"""


def shared_state(redis, replica):
    return (f"sharedState: {{redis: '127.0.0.1:{redis.port}', key: 'test', "
            f"replicaId: {replica}, intervalMs: 10}}\n")


def tenants(limits):
    digest = "sha256:" + hashlib.sha256(KEY.encode()).hexdigest()
    return (f"tenants:\n  requireApiKey: true\n  list:\n"
            f"  - id: team-a\n    apiKeys: ['{digest}']\n    limits: {limits}\n")


def prompt(rng, words=48):
    return " ".join("".join(rng.choices(string.ascii_lowercase, k=6)) for _ in range(words))


def post(router, text, headers=None, key=None):
    """A completion through `router`: (status, the endpoint that served it)."""
    h = dict(headers or {})
    if key:
        h["authorization"] = f"Bearer {key}"
    r = requests.post(f"{router.url}/v1/completions", headers=h, timeout=30,
                      json={"model": MODEL_NAME, "prompt": text, "max_tokens": 2})
    return r.status_code, r.headers.get(ENDPOINT)


def received(router):
    return metric_sum(router.metrics(), "switchyard_router_shared_state_updates_received_total")


def synced(*routers):
    """Waits until each router applied two more updates from the others: the second was sent
    after everything the others had learnt when this was called (the first may have been on
    its way already)."""
    before = [received(r) for r in routers]
    wait_until(lambda: all(received(r) >= b + 2 for r, b in zip(routers, before)),
               "replicas synced")


@pytest.fixture
def engines(switchyard):
    es = start_engines(4, "--backend", "sim", "--sim-latency", "zero")
    yield es
    for e in es:
        e.stop()


@pytest.fixture
def redis():
    server = RedisServer()
    yield server
    server.kill()


@pytest.fixture
def pair(engines, redis):
    routers = [Router(engines, scheduling=SCHEDULING, extra=shared_state(redis, name))
               for name in ("replica-a", "replica-b")]
    yield routers
    for r in routers:
        r.stop()


def test_a_prefix_routed_by_one_replica_is_a_hit_on_the_other(pair):
    a, b = pair
    rng = random.Random(7)
    prompts = [prompt(rng) for _ in range(8)]
    served = {}
    for p in prompts:
        status, served[p] = post(a, p)
        assert status == 200
    synced(a, b)
    # Four engines, no load scorer: without the shared index b would pick one of four at
    # random for each prompt (all eight right by chance: 4^-8).
    assert [post(b, p)[1] for p in prompts] == [served[p] for p in prompts]
    assert metric_sum(b.metrics(), "switchyard_router_shared_state_connected") == 1
    assert metric_sum(a.metrics(), "switchyard_router_shared_state_replicas") == 1


def test_a_session_bound_on_one_replica_stays_bound_on_the_other(pair):
    a, b = pair
    rng = random.Random(11)
    bound = {}
    for s in range(6):
        status, bound[s] = post(a, prompt(rng), headers={"x-session-id": f"session-{s}"})
        assert status == 200
    synced(a, b)
    for s in range(6):  # new prompts: only the session can pin them
        for _ in range(2):
            assert post(b, prompt(rng), headers={"x-session-id": f"session-{s}"})[1] == bound[s]


def test_a_tenant_quota_holds_across_replicas(engines, redis):
    # A burst of 4 requests and a refill too slow to matter in the test: 4 in all, not 4 each.
    routers = [Router(engines, scheduling=SCHEDULING,
                      extra=shared_state(redis, name)
                      + tenants("{requestsPerSecond: 0.01, burst: 4}"))
               for name in ("replica-a", "replica-b")]
    a, b = routers
    try:
        rng = random.Random(3)
        assert [post(r, prompt(rng), key=KEY)[0] for r in (a, a, b, b)] == [200] * 4
        synced(a, b)
        assert post(a, prompt(rng), key=KEY)[0] == 429
        assert post(b, prompt(rng), key=KEY)[0] == 429
    finally:
        for r in routers:
            r.stop()


def test_each_replica_counts_the_others_requests_in_flight(redis):
    slow = EngineServer("--backend", "sim", "--sim-latency", "zero,decode_ms_per_seq=100")
    slow.start()
    routers = [Router([slow], scheduling=SCHEDULING, extra=shared_state(redis, name))
               for name in ("replica-a", "replica-b")]
    a, b = routers
    try:
        client = openai.OpenAI(base_url=f"{a.url}/v1", api_key="x", max_retries=0)
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            futures = [pool.submit(client.completions.create, model=MODEL_NAME, prompt="hi",
                                   max_tokens=20) for _ in range(3)]
            wait_until(lambda: b.endpoints()[0]["elsewhere_requests"] == 3,
                       "b sees a's 3 requests")
            assert b.endpoints()[0]["active_requests"] == 3  # scheduling counts them
            assert a.endpoints()[0]["elsewhere_requests"] == 0
            assert all(f.result(timeout=30).usage.completion_tokens == 20 for f in futures)
        wait_until(lambda: b.endpoints()[0]["elsewhere_requests"] == 0, "a's requests ended")
    finally:
        for r in routers:
            r.stop()
        slow.stop()


def test_a_replica_started_later_knows_the_fleet_prefixes(engines, redis):
    a = Router(engines, scheduling=SCHEDULING, extra=shared_state(redis, "replica-a"))
    try:
        rng = random.Random(5)
        prompts = [prompt(rng) for _ in range(8)]
        sent = metric_sum(a.metrics(), "switchyard_router_shared_state_updates_sent_total")
        served = {p: post(a, p)[1] for p in prompts}
        # Two more: the second left after the last pick (see synced).
        wait_until(lambda: metric_sum(a.metrics(),
                                      "switchyard_router_shared_state_updates_sent_total")
                   >= sent + 2, "a sent its picks")
        late = Router(engines, scheduling=SCHEDULING, extra=shared_state(redis, "replica-c"))
        try:
            assert [post(late, p)[1] for p in prompts] == [served[p] for p in prompts]
        finally:
            late.stop()
    finally:
        a.stop()


def test_replicas_fail_open_while_redis_is_down_and_share_again_after(pair, redis):
    a, b = pair
    redis.kill()
    wait_until(lambda: metric_sum(a.metrics(), "switchyard_router_shared_state_connected") == 0
               and metric_sum(b.metrics(), "switchyard_router_shared_state_connected") == 0,
               "both see Redis down")
    rng = random.Random(9)
    for r in (a, b):  # every request is still served, on the replica's own view
        for _ in range(5):
            assert post(r, prompt(rng))[0] == 200
    assert metric_sum(a.metrics(), "switchyard_router_shared_state_errors_total") >= 1
    assert "scheduling on this replica's own view" in a.output()
    redis.start()
    wait_until(lambda: metric_sum(a.metrics(), "switchyard_router_shared_state_connected") == 1
               and metric_sum(b.metrics(), "switchyard_router_shared_state_connected") == 1,
               "both reconnected", timeout=15)
    prompts = [prompt(rng) for _ in range(8)]
    served = {p: post(a, p)[1] for p in prompts}
    synced(a, b)
    assert [post(b, p)[1] for p in prompts] == [served[p] for p in prompts]
