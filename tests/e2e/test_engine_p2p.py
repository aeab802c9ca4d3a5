"""Peer-to-peer prefix pull between two `switchyard engine`s (llm-d's P2P KV pull): both run
SwitchyardConnector as kv_both with one secret and one PYTHONHASHSEED; a request that carries
x-kv-cache-source-host-port (what the router's p2p-source-producer sets) makes its engine
look up the prompt's blocks at that source, read the leading run it holds into its own
pool and compute only the rest. The answer must be the one a single engine gives (the KV
moved is the KV computed); a source that holds nothing, is frozen, dead or has another
secret costs only the round trip (the prompt is computed); both engines' KV goes back to
its baseline once the puller released the source's blocks."""
import concurrent.futures
import json
import signal
import socket

import openai
import pytest
import requests

from conftest import wait_until
from engine_server import EngineServer

SECRET = "p2p-test-secret"
SEED = "4242"
# 100 tokens: 6 full blocks of 16 that a prefix hit may cover, and a partial one.
PROMPT = [(7 * i + 3) % 500 + 10 for i in range(100)]
OTHER_PROMPT = [(11 * i + 5) % 500 + 10 for i in range(100)]
MAX_TOKENS = 16
HEADER = "x-kv-cache-source-host-port"


def p2p_engine(*flags, secret=SECRET, seed=SEED, role="kv_both"):
    config = {"kv_connector": "SwitchyardConnector", "kv_role": role,
              "kv_connector_extra_config": {"io_timeout_ms": 1500}}
    return EngineServer("--kv-transfer-config", json.dumps(config), *flags,
                        env={"SWITCHYARD_KV_SECRET": secret, "PYTHONHASHSEED": seed})


def complete(engine, prompt=PROMPT, source=None):
    client = openai.OpenAI(base_url=engine.base_url, api_key="unused", max_retries=0)
    headers = {} if source is None else {HEADER: source}
    return client.completions.create(model=engine.name, prompt=prompt, max_tokens=MAX_TOKENS,
                                     temperature=0, extra_headers=headers).choices[0].text


def pulls(engine, outcome):
    return engine.sample("switchyard:kv_peer_pulls_total", outcome=outcome)


def pull_counts(engine):
    return tuple(pulls(engine, o) for o in ("loaded", "missed", "fell_back"))


def external_tokens(engine):
    return engine.sample("vllm:prompt_tokens_by_source_total", source="external_kv_transfer")


@pytest.fixture(scope="module")
def expected(switchyard):
    """The answers of one engine that does everything itself."""
    with EngineServer() as single:
        return {"prompt": complete(single), "other": complete(single, OTHER_PROMPT)}


@pytest.fixture
def source(switchyard):
    with p2p_engine() as engine:
        yield engine


def test_the_puller_answers_from_the_sources_kv(source, expected):
    with p2p_engine() as puller:
        assert complete(source) == expected["prompt"]
        assert complete(puller, source=source.kv_transfer_address()) == expected["prompt"]
        # The 96 tokens of the 6 full blocks came from the source, the rest was computed.
        assert pull_counts(puller) == (1, 0, 0)
        assert external_tokens(puller) == 96
        assert source.sample("switchyard:kv_peer_lookups_total", outcome="held") == 1
        assert source.sample("switchyard:kv_peer_lent_blocks_total") == 6
        # The puller released the source's blocks: both pools are back to empty.
        source.wait_idle()
        puller.wait_idle()
        assert source.sample("switchyard:kv_transfer_leases_ended_total", how="released") == 1
        # Pulled blocks are the puller's own cache now: the next request pulls nothing.
        assert complete(puller, source=source.kv_transfer_address()) == expected["prompt"]
        assert pull_counts(puller) == (1, 0, 0)
        assert source.sample("switchyard:kv_peer_lookups_total") == 1


def test_a_source_without_the_prefix_is_a_miss(source, expected):
    with p2p_engine() as puller:
        assert complete(puller, OTHER_PROMPT, source=source.kv_transfer_address()) == \
            expected["other"]
        assert pull_counts(puller) == (0, 1, 0)
        assert source.sample("switchyard:kv_peer_lookups_total", outcome="none") == 1
        assert external_tokens(puller) == 0
        puller.wait_idle()
        source.wait_idle()


def test_another_hash_seed_never_matches(source, expected):
    """Blocks are found by their chained hashes: an engine with another seed names other
    blocks and pulls nothing (no wrong KV)."""
    complete(source)
    with p2p_engine(seed="7") as puller:
        assert complete(puller, source=source.kv_transfer_address()) == expected["prompt"]
        assert pull_counts(puller) == (0, 1, 0)


@pytest.mark.parametrize("how", ["wrong_secret", "closed_port"])
def test_a_source_that_refuses_or_is_gone_falls_back(source, expected, how):
    complete(source)
    address = source.kv_transfer_address()
    if how == "closed_port":
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            address = f"127.0.0.1:{s.getsockname()[1]}"
    with p2p_engine(secret="another-secret" if how == "wrong_secret" else SECRET) as puller:
        assert complete(puller, source=address) == expected["prompt"]
        assert pull_counts(puller) == (0, 0, 1)
        puller.wait_idle()
    source.wait_idle()


def test_a_frozen_source_times_out_into_a_recompute(source, expected):
    complete(source)
    with p2p_engine() as puller:
        source.proc.send_signal(signal.SIGSTOP)
        try:
            assert complete(puller, source=source.kv_transfer_address()) == expected["prompt"]
        finally:
            source.proc.send_signal(signal.SIGCONT)
        assert pull_counts(puller) == (0, 0, 1)
        puller.wait_idle()
    # The source answers again, and whatever it lent the frozen lookup is given back.
    source.wait_idle(timeout=20)


def test_a_killed_source_does_not_lose_the_request(switchyard, expected):
    source = p2p_engine().start()
    complete(source)
    address = source.kv_transfer_address()
    source.kill()
    with p2p_engine() as puller:
        assert complete(puller, source=address) == expected["prompt"]
        assert pull_counts(puller) == (0, 0, 1)
        puller.wait_idle()


def test_an_engine_that_does_not_consume_ignores_the_header(source, expected):
    complete(source)
    with p2p_engine(role="kv_producer") as engine:
        assert complete(engine, source=source.kv_transfer_address()) == expected["prompt"]
        assert pull_counts(engine) == (0, 0, 0)
    assert source.sample("switchyard:kv_peer_lookups_total") == 0


def test_a_malformed_source_header_is_refused(source):
    response = requests.post(f"{source.url}/v1/completions",
                             headers={HEADER: "no-port-here"},
                             json={"model": source.name, "prompt": PROMPT, "max_tokens": 2},
                             timeout=30)
    assert response.status_code == 400
    error = response.json()["error"]
    assert HEADER in error["message"]
    assert error["type"] == "BadRequestError"
    source.wait_idle()


def test_simulated_engines_with_kv_memory_pull_real_bytes(switchyard):
    """--backend sim --sim-kv-memory: the forward pass is simulated but the KV bytes are
    real (the model's size), so a pull moves as much as a real one; the answer is the sim's
    own, the same with or without the pull."""
    sim = ["--backend", "sim", "--sim-latency", "zero", "--sim-kv-memory",
           "--num-gpu-blocks-override", "64", "--max-model-len", "512"]
    with p2p_engine(*sim) as source, p2p_engine(*sim) as puller, EngineServer(
            "--backend", "sim", "--sim-latency", "zero") as alone:
        answer = complete(alone)
        assert complete(source) == answer
        assert complete(puller, source=source.kv_transfer_address()) == answer
        assert pull_counts(puller) == (1, 0, 0)
        assert external_tokens(puller) == 96
        source.wait_idle()
        puller.wait_idle()


def test_a_pull_that_finds_no_room_waits_for_it_and_loads(switchyard):
    """The puller's pool is nearly all held by a long request when the pull arrives: there is
    no room for the pulled blocks, nor to compute them. The pull waits in the load queue (as
    a tier load does) and runs once the long request ends, instead of recomputing."""
    sim = ["--backend", "sim", "--sim-kv-memory", "--max-model-len", "256"]
    slow = ["--sim-latency", "zero,decode_ms_per_seq=40", "--num-gpu-blocks-override", "20"]
    with p2p_engine(*sim, "--sim-latency", "zero", "--num-gpu-blocks-override", "64") as source, \
            p2p_engine(*sim, *slow) as puller:
        answer = complete(source)
        c = openai.OpenAI(base_url=puller.base_url, api_key="unused", max_retries=0)
        # 230 + 25 tokens: 16 of the 20 blocks; PROMPT needs 7.
        long_prompt = [(13 * i + 2) % 500 + 10 for i in range(230)]
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            long_request = pool.submit(
                c.completions.create, model=puller.name, prompt=long_prompt, max_tokens=25,
                temperature=0, extra_body={"ignore_eos": True})
            wait_until(lambda: puller.metrics()["vllm:num_requests_running"] == 1,
                       "the long request to run")
            assert complete(puller, source=source.kv_transfer_address()) == answer
            assert long_request.result().usage.completion_tokens == 25
        assert pull_counts(puller) == (1, 0, 0)
        assert external_tokens(puller) == 96
        source.wait_idle()
        puller.wait_idle()


def test_a_simulated_engine_without_kv_memory_cannot_transfer(switchyard):
    engine = p2p_engine("--backend", "sim", "--sim-latency", "zero")
    with pytest.raises(AssertionError, match="cannot be moved"):
        engine.start()
