"""Keyed engines behind the router: a pool's (or an endpoint's) credentials, from an
environment variable or a file, go with every forwarded request (in place of the client's
own Authorization) and with the router's scrapes; an engine that refuses the scrape (401/403)
is a visible failure in /debug/endpoints, the metrics and the log, not a silent "unhealthy".
The key itself never shows. Against our engine (--api-key) and llama.cpp's llama-server
(--api-key, which guards its /metrics too), with the openai client."""
import time

import openai
import pytest
import requests

from conftest import MODELS_DIR
from engine_server import MODEL_NAME, EngineServer
from peer_servers import LLAMA_SERVER, LlamaServer
from router_server import Router, member_name, metric_sum

# Needs llama-server: a peer_tools test (conftest.py).
pytestmark = pytest.mark.peer_tools

KEY = "sk-engine-8f3a1c77d2"
CLIENT_KEY = "sk-client-not-for-engines"


def pool(member, credentials):
    return (f"pools:\n- name: keyed\n  credentials: {credentials}\n  endpoints:\n"
            f"  - {{address: '{member_name(member)}', engine: {member.engine_kind}}}\n")


def wait_for(predicate, timeout=15):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_our_keyed_engine_with_credentials_from_the_environment():
    with EngineServer("--backend", "sim", "--sim-latency", "zero", "--api-key", KEY) as engine:
        # The engine takes no request without its key.
        assert requests.post(f"{engine.url}/v1/completions", timeout=5,
                             json={"model": MODEL_NAME, "prompt": "x"}).status_code == 401
        router = Router([engine], pools=pool(engine, "{apiKeyEnv: SY_TEST_ENGINE_KEY}"),
                        env={"SY_TEST_ENGINE_KEY": KEY})
        try:
            # The client's own key is for the router; the engine gets the pool's.
            client = openai.OpenAI(base_url=f"{router.url}/v1", api_key=CLIENT_KEY, timeout=30,
                                   max_retries=0)
            out = client.completions.create(model=MODEL_NAME, prompt="Hello", max_tokens=3)
            assert out.usage.completion_tokens == 3
            chunks = list(client.chat.completions.create(
                model=MODEL_NAME, messages=[{"role": "user", "content": "hi"}], max_tokens=3,
                stream=True))
            assert chunks[-1].choices[0].finish_reason == "length"
            (e,) = router.endpoints()
            assert e["healthy"] and e["metrics"]["fresh"]
            assert e["credentials"] == "env SY_TEST_ENGINE_KEY"
            assert e["scrape_error"] is None and not e["scrape_unauthorized"]
            debug = requests.get(f"{router.url}/debug/endpoints", timeout=5).text
            assert KEY not in debug and KEY not in router.metrics()
        finally:
            router.stop()
        assert KEY not in router.output()


def test_inline_keys_and_missing_variables_are_refused(switchyard, tmp_path):
    for credentials, message in [("{apiKey: " + KEY + "}", "never inline"),
                                 ("{apiKeyEnv: SY_TEST_UNSET_KEY}", "SY_TEST_UNSET_KEY"),
                                 ("{apiKeyFile: missing.key}", "missing.key")]:
        config = tmp_path / "router.yaml"
        config.write_text(f"model: m\npools:\n- name: p\n  credentials: {credentials}\n"
                          f"  endpoints:\n  - {{address: '127.0.0.1:1'}}\n")
        proc = switchyard("router", "--config", config, check=False, timeout=30)
        err = proc.stderr.decode()
        assert proc.returncode == 2 and message in err, err
        assert KEY not in err


@pytest.fixture(scope="module")
def keyed_llama_server():
    if not LLAMA_SERVER.exists():
        pytest.fail(f"{LLAMA_SERVER} is missing: run scripts/setup_llamacpp.sh")
    server = LlamaServer(MODELS_DIR / "tiny-llama3" / "model.gguf", MODEL_NAME,
                         api_key=KEY)
    server.spawn()
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


def test_llama_server_guards_its_metrics_with_its_key(keyed_llama_server):
    url = keyed_llama_server.url
    assert requests.get(f"{url}/metrics", timeout=5).status_code == 401
    headers = {"Authorization": f"Bearer {KEY}"}
    assert requests.get(f"{url}/metrics", headers=headers, timeout=5).status_code == 200


def test_llama_server_without_credentials_is_a_visible_scrape_failure(keyed_llama_server):
    server = keyed_llama_server
    name = member_name(server)
    router = Router([server], wait_fresh=[])
    try:
        wait_for(lambda: router.endpoints()[0]["scrape_unauthorized"])
        (e,) = router.endpoints()
        assert "401" in e["scrape_error"] and "credentials" in e["scrape_error"], e
        assert e["credentials"] is None
        assert metric_sum(router.metrics(), "switchyard_router_endpoint_scrape_unauthorized",
                          endpoint=name) == 1
        time.sleep(0.5)  # many more scrapes, each refused
    finally:
        router.stop()
    log = router.output()
    assert log.count("HTTP 401 on /metrics") == 1, log  # said once, not at every scrape


def test_llama_server_with_credentials_from_a_file(keyed_llama_server, tmp_path):
    server = keyed_llama_server
    key_file = tmp_path / "engine.key"
    key_file.write_text(KEY + "\n")
    router = Router([server], pools=pool(server, f"{{apiKeyFile: '{key_file}'}}"))
    try:
        (e,) = router.endpoints()
        assert e["healthy"] and e["metrics"]["fresh"] and not e["scrape_unauthorized"]
        assert e["credentials"] == f"file {key_file}"
        client = openai.OpenAI(base_url=f"{router.url}/v1", api_key=CLIENT_KEY, timeout=60,
                               max_retries=0)
        out = client.completions.create(model=MODEL_NAME, prompt="Hello", max_tokens=2)
        assert out.choices[0].text is not None
        assert KEY not in requests.get(f"{router.url}/debug/endpoints", timeout=5).text
    finally:
        router.stop()
    assert KEY not in router.output()
