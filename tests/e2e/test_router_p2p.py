"""Peer-to-peer prefix pull through the router (llm-d's p2p-source-producer): two CPU engines
run as kv_both (one secret, one hash seed) and publish KV events to a router whose precise
prefix index knows what each holds. The profile picks round-robin, so the second request of
a prompt goes to the engine that does not hold it; the router names the holder in
x-kv-cache-source-host-port, and the picked engine pulls the prompt's blocks from it. The
answer must be the one a single engine gives; a client's own x-kv-cache-source-host-port is
never forwarded; `switchyard up --kv-p2p` starts such a fleet."""
import json

import openai
import pytest
import requests

from conftest import wait_until
from engine_server import MODEL_NAME, EngineServer, kv_events_flags
from router_server import Router, member_name, metric_sum
from test_up import Up

SECRET = "p2p-router-test-secret"
SEED = "p2p-router-seed"
# 100 tokens: 6 full blocks of 16 that a prefix hit may cover.
PROMPT = [(7 * i + 3) % 500 + 10 for i in range(100)]
MAX_TOKENS = 12

P2P_PROFILE = """scheduling:
  plugins:
  - type: prefix-cache-scorer
    parameters: {mode: precise, blockSizeTokens: 16}
  - type: p2p-source-producer
    parameters: {minExtraTokens: 32}
  - type: round-robin-picker
  schedulingProfiles:
  - name: default
    plugins:
    - {pluginRef: prefix-cache-scorer, weight: 1}
    - {pluginRef: p2p-source-producer}
    - {pluginRef: round-robin-picker}
"""


def kv_both():
    config = {"kv_connector": "SwitchyardConnector", "kv_role": "kv_both",
              "kv_connector_extra_config": {"io_timeout_ms": 2000}}
    return EngineServer("--kv-transfer-config", json.dumps(config), *kv_events_flags(),
                        kv_events=True,
                        env={"SWITCHYARD_KV_SECRET": SECRET, "PYTHONHASHSEED": SEED})


def pools(engines):
    """The static pool, each engine labelled with its KV transfer port."""
    lines = ["pools:", "- name: default", "  endpoints:"]
    for e in engines:
        kv_port = e.kv_transfer_address().rsplit(":", 1)[1]
        lines.append(f"  - {{address: '{member_name(e)}', engine: switchyard, "
                     f"labels: {{switchyard.ai/kv-port: '{kv_port}'}}, "
                     f"kvEvents: {{endpoint: '{e.kv_endpoint}', "
                     f"replayEndpoint: '{e.kv_replay_endpoint or ''}'}}}}")
    return "\n".join(lines) + "\n"


def counter(url, name, **labels):
    return metric_sum(requests.get(f"{url}/metrics", timeout=10).text, name, **labels)


@pytest.fixture(scope="module")
def expected(switchyard):
    with EngineServer() as single:
        client = openai.OpenAI(base_url=single.base_url, api_key="x", max_retries=0)
        return client.completions.create(model=single.name, prompt=PROMPT,
                                          max_tokens=MAX_TOKENS, temperature=0).choices[0].text


@pytest.fixture
def fleet(switchyard):
    engines = [kv_both() for _ in range(2)]
    for e in engines:
        e.spawn()
    try:
        for e in engines:
            e.wait_ready()
        router = Router(engines, pools=pools(engines), scheduling=P2P_PROFILE)
    except BaseException:
        for e in engines:
            e.kill()
        raise
    yield router, engines
    router.stop()
    for e in engines:
        e.stop()


def complete(router, headers=None):
    client = openai.OpenAI(base_url=f"{router.url}/v1", api_key="x", max_retries=0)
    raw = client.completions.with_raw_response.create(
        model=MODEL_NAME, prompt=PROMPT, max_tokens=MAX_TOKENS, temperature=0,
        extra_headers=headers or {})
    return raw.parse().choices[0].text, raw.headers["x-switchyard-endpoint"]


def event_batches(router, endpoint):
    """KV event batches the router has applied from `endpoint` (its /debug/endpoints)."""
    return next(e["kv_events"]["batches"] for e in router.endpoints() if e["name"] == endpoint)


def test_the_engine_the_router_picks_pulls_the_prefix_from_its_holder(fleet, expected):
    router, engines = fleet
    by_name = {member_name(e): e for e in engines}
    before = {name: event_batches(router, name) for name in by_name}
    first_text, holder = complete(router)
    assert first_text == expected
    # The router learns what the holder cached from its KV events (the prompt's blocks go
    # out in the batch of the step that computed them).
    wait_until(lambda: event_batches(router, holder) > before[holder],
               "the holder's KV events at the router")
    text, picked = complete(router)
    assert picked != holder  # round robin
    assert text == expected
    puller = by_name[picked]
    assert puller.sample("switchyard:kv_peer_pulls_total", outcome="loaded") == 1
    assert puller.sample("vllm:prompt_tokens_by_source_total",
                         source="external_kv_transfer") == 96
    assert by_name[holder].sample("switchyard:kv_peer_lent_blocks_total") == 6
    assert counter(router.url, "switchyard_router_kv_source_requests_total",
                   endpoint=picked) == 1
    for e in engines:
        e.wait_idle()


def test_a_clients_source_header_is_not_forwarded(fleet, expected):
    router, engines = fleet
    text, _ = complete(router, {"x-kv-cache-source-host-port": "127.0.0.1:1"})
    assert text == expected
    for e in engines:
        assert e.sample("switchyard:kv_peer_pulls_total") == 0


def test_up_kv_p2p_runs_lending_engines(switchyard, expected):
    up = Up("--engines", 2, "--kv-p2p")
    try:
        assert len(up.engines) == 2
        assert up.text().count("lending KV on 127.0.0.1:") == 2
        for _ in range(3):
            r = up.client.completions.create(model=up.name, prompt=PROMPT,
                                             max_tokens=MAX_TOKENS, temperature=0)
            assert r.choices[0].text == expected
    finally:
        up.stop()


def test_up_kv_p2p_refuses_sim_and_pd(switchyard):
    for extra in (["--sim", "2"], ["--pd", "1:1"]):
        result = switchyard("up", "--kv-p2p", "--port", "0", *extra, check=False)
        assert result.returncode != 0
        assert b"--kv-p2p" in result.stderr
