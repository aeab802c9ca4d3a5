"""Prefill/decode disaggregation between two `switchyard engine`s (--kv-transfer-config with
SwitchyardConnector), driven as vLLM's toy proxy and llm-d's P/D sidecar drive vLLM, with
the `openai` client: the prompt goes to the producer with kv_transfer_params
{"do_remote_decode": true} and max_tokens 1; the kv_transfer_params of its response go,
with the original request, to the consumer, which pulls the prompt's KV over TCP and
decodes. The answer must be the one a single engine gives (the KV moved is the KV
computed), and every failure (a wrong secret, a dead producer, block ids it does not lend)
must fall back to computing the prompt: the same answer, later. Both engines' KV goes back
to its baseline: the producer frees its lease when the consumer releases it."""
import json
import signal
import time

import openai
import pytest
import requests

from conftest import wait_until
from engine_server import EngineServer

SECRET = "pd-test-secret"
# 100 tokens: 6 full blocks of 16 that a prefix hit may cover, and a partial one.
PROMPT = [(7 * i + 3) % 500 + 10 for i in range(100)]
MAX_TOKENS = 16


def kv_flags(role, **extra):
    config = {"kv_connector": "SwitchyardConnector", "kv_role": role}
    if extra:
        config["kv_connector_extra_config"] = extra
    return ["--kv-transfer-config", json.dumps(config)]


def client(engine):
    return openai.OpenAI(base_url=engine.base_url, api_key="unused", max_retries=0)


def complete(engine, max_tokens, kv_transfer_params=None):
    extra = {} if kv_transfer_params is None else {"kv_transfer_params": kv_transfer_params}
    return client(engine).completions.create(model=engine.name, prompt=PROMPT,
                                             max_tokens=max_tokens, temperature=0,
                                             extra_body=extra)


def prefill(producer):
    """The proxy's first leg: returns the kv_transfer_params for the decode engine."""
    response = complete(producer, 1, {"do_remote_decode": True})
    params = response.model_extra["kv_transfer_params"]
    assert params["do_remote_prefill"] is True
    assert params["do_remote_decode"] is False
    assert params["remote_host"] == "127.0.0.1"
    assert params["remote_port"] > 0
    assert len(params["remote_block_ids"]) == 7  # 101 tokens of KV in blocks of 16
    return params


def counter(engine, name):
    return engine.metrics().get(name, 0.0)


def external_tokens(engine):
    return engine.sample("vllm:prompt_tokens_by_source_total", source="external_kv_transfer")


def loads(engine, outcome):
    return engine.sample("switchyard:kv_transfer_loads_total", outcome=outcome)


def leases_ended(engine, how):
    return engine.sample("switchyard:kv_transfer_leases_ended_total", how=how)


@pytest.fixture(scope="module")
def expected(switchyard):
    """The answer of one engine that does everything itself."""
    with EngineServer() as single:
        return complete(single, MAX_TOKENS).choices[0].text


@pytest.fixture
def producer(switchyard):
    with EngineServer(*kv_flags("kv_producer", lease_seconds=3),
                      env={"SWITCHYARD_KV_SECRET": SECRET}) as engine:
        yield engine


def consumer_engine(secret=SECRET):
    return EngineServer(*kv_flags("kv_consumer", io_timeout_ms=2000),
                        env={"SWITCHYARD_KV_SECRET": secret})


def test_the_decode_engine_answers_from_the_prefills_kv(producer, expected):
    with consumer_engine() as consumer:
        params = prefill(producer)
        hits_before = counter(consumer, "vllm:prefix_cache_hits_total")
        answer = complete(consumer, MAX_TOKENS, params)
        assert answer.choices[0].text == expected
        # The 96 tokens of the 6 full blocks came from the producer, the rest was computed;
        # as in vLLM, loaded tokens are not local prefix-cache hits.
        assert counter(consumer, "vllm:prefix_cache_hits_total") - hits_before == 0
        assert external_tokens(consumer) == 96
        assert (loads(consumer, "loaded"), loads(consumer, "fell_back")) == (1, 0)
        # The consumer released the producer's blocks: its KV is back to empty.
        producer.wait_idle()
        consumer.wait_idle()
        assert (leases_ended(producer, "released"), leases_ended(producer, "expired")) == (1, 0)


def test_kv_transfer_params_ride_on_chat_completions_too(producer):
    with consumer_engine() as consumer:
        messages = [{"role": "user", "content": "Tell me about the sea. " * 8}]
        p = client(producer).chat.completions.create(
            model=producer.name, messages=messages, max_tokens=1, temperature=0,
            extra_body={"kv_transfer_params": {"do_remote_decode": True}})
        params = p.model_extra["kv_transfer_params"]
        d = client(consumer).chat.completions.create(
            model=consumer.name, messages=messages, max_tokens=8, temperature=0,
            extra_body={"kv_transfer_params": params})
        single = client(producer).chat.completions.create(
            model=producer.name, messages=messages, max_tokens=8, temperature=0)
        assert d.choices[0].message.content == single.choices[0].message.content
        producer.wait_idle()


def test_a_wrong_secret_falls_back_to_computing_the_prompt(producer, expected):
    with consumer_engine(secret="not-the-secret") as consumer:
        params = prefill(producer)
        assert complete(consumer, MAX_TOKENS, params).choices[0].text == expected
        assert loads(consumer, "fell_back") == 1
        # Nobody released the producer's blocks: its lease (3 s) ends them.
        producer.wait_idle(timeout=15)
        consumer.wait_idle()
        assert leases_ended(producer, "expired") == 1


def test_a_dead_producer_falls_back_to_computing_the_prompt(expected, switchyard):
    producer = EngineServer(*kv_flags("kv_producer"), env={"SWITCHYARD_KV_SECRET": SECRET})
    producer.start()
    try:
        params = prefill(producer)
    finally:
        producer.kill()
    with consumer_engine() as consumer:
        assert complete(consumer, MAX_TOKENS, params).choices[0].text == expected
        assert loads(consumer, "fell_back") == 1
        consumer.wait_idle()


def test_a_frozen_producer_times_out_into_computing_the_prompt(producer, expected):
    """SIGSTOP: the producer's port still accepts (the kernel completes the handshake) but
    nothing answers; the consumer's pull gives up after io_timeout_ms (2 s) and computes."""
    params = prefill(producer)
    with consumer_engine() as consumer:
        producer.proc.send_signal(signal.SIGSTOP)
        try:
            started = time.monotonic()
            assert complete(consumer, MAX_TOKENS, params).choices[0].text == expected
            assert time.monotonic() - started < 15
            assert loads(consumer, "fell_back") == 1
            consumer.wait_idle()
        finally:
            producer.proc.send_signal(signal.SIGCONT)
        # Thawed, the producer serves on, and its lease still ends (released or expired).
        assert complete(producer, MAX_TOKENS).choices[0].text == expected
        producer.wait_idle(timeout=15)


def test_blocks_the_producer_does_not_lend_fall_back(producer, expected):
    params = prefill(producer)
    top = max(params["remote_block_ids"])
    refused = {
        # Ids outside the producer's pool.
        "out of range": [10**6 + i for i in range(7)],
        # Ids inside it that no lease lends (free, or another request's).
        "not leased": [top + 1 + i for i in range(7)],
    }
    # A fresh consumer each: one that computed the prompt would hit its own prefix cache and
    # pull nothing the next time.
    for case, ids in refused.items():
        with consumer_engine() as consumer:
            answer = complete(consumer, MAX_TOKENS, {**params, "remote_block_ids": ids})
            assert answer.choices[0].text == expected, case
            assert loads(consumer, "fell_back") == 1, case
            assert external_tokens(consumer) == 0, case
            consumer.wait_idle()
    # The real lease still serves, after both refusals.
    with consumer_engine() as consumer:
        assert complete(consumer, MAX_TOKENS, params).choices[0].text == expected
        assert loads(consumer, "loaded") == 1
        assert external_tokens(consumer) == 96
    producer.wait_idle(timeout=15)


def test_malformed_kv_transfer_params_are_a_400(producer):
    r = requests.post(f"{producer.url}/v1/completions",
                      json={"model": producer.name, "prompt": PROMPT, "max_tokens": 1,
                            "kv_transfer_params": {"remote_block_ids": ["a"]}}, timeout=30)
    assert r.status_code == 400, r.text
    assert "kv_transfer_params" in r.json()["error"]["message"]


def test_the_engine_refuses_to_start_without_a_secret(switchyard):
    engine = EngineServer(*kv_flags("kv_both"), env={"SWITCHYARD_KV_SECRET": ""})
    with pytest.raises(AssertionError, match="SWITCHYARD_KV_SECRET"):
        engine.start()
