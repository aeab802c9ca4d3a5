"""Prefill/decode disaggregation through the router (llm-d's disagg-profile-handler): `switchyard
up --pd 1:1` runs a prefill and a decode engine behind a router that sends a prompt's prefill
to the prefill engine and its decode, with the KV the prefill made, to the decode engine. The
answers must be one engine's greedy answers, the response headers name both endpoints, and the
decode engine counts the prompt's tokens as transferred. A prefill engine killed with SIGKILL
costs no request: the decode engine computes the prompt itself (a fallback the router counts)."""
import json
import re

import openai
import pytest
import requests

from engine_server import EngineServer
from router_server import Router, member_name, metric_sum
from test_up import Up

_PD_ENGINE = re.compile(r"engine \d+ \(cpu, (prefill|decode)\) on http://(\S+:\d+)")
MAX_TOKENS = 12
# Long enough (well over the 16 uncached tokens the decider asks for) and different from each
# other, so that each is cold on the decode engine.
PROMPTS = [f"Story {i}: the quick brown fox jumps over the lazy dog while the cat watches "
           f"from the old wooden fence and the farmer counts {i} sheep in the green field."
           for i in range(4)]
SECRET = "pd-router-test-secret"


def completion(client, model, prompt):
    return client.completions.with_raw_response.create(
        model=model, prompt=prompt, max_tokens=MAX_TOKENS, temperature=0)


def chat(client, model, prompt, **extra):
    return client.chat.completions.with_raw_response.create(
        model=model, messages=[{"role": "user", "content": prompt}], max_tokens=MAX_TOKENS,
        temperature=0, **extra)


def engine_counter(url, name, **labels):
    return metric_sum(requests.get(f"{url}/metrics", timeout=10).text, name, **labels)


def external_tokens(url):
    return engine_counter(f"http://{url}", "vllm:prompt_tokens_by_source_total",
                          source="external_kv_transfer")


def pd_decisions(router_url, outcome):
    return engine_counter(router_url, "switchyard_router_pd_decisions_total", outcome=outcome)


@pytest.fixture(scope="module")
def single(switchyard):
    """One engine doing everything itself: the answers to match."""
    with EngineServer() as engine:
        yield openai.OpenAI(base_url=engine.base_url, api_key="x", max_retries=0), engine.name


def test_up_pd_disaggregates_completions_and_chats(single):
    one, one_model = single
    up = Up("--pd", "1:1", "--threads", 1)
    try:
        roles = dict(_PD_ENGINE.findall(up.text()))
        assert set(roles) == {"prefill", "decode"}, up.text()
        prefill, decode = roles["prefill"], roles["decode"]

        before = external_tokens(decode)
        raw = completion(up.client, up.name, PROMPTS[0])
        assert raw.headers["x-switchyard-endpoint"] == decode
        assert raw.headers["x-switchyard-prefill-endpoint"] == prefill
        want = completion(one, one_model, PROMPTS[0]).parse().choices[0].text
        assert raw.parse().choices[0].text == want
        after_completion = external_tokens(decode)
        assert after_completion > before

        raw = chat(up.client, up.name, PROMPTS[1])
        assert raw.headers["x-switchyard-endpoint"] == decode
        assert raw.headers["x-switchyard-prefill-endpoint"] == prefill
        want = chat(one, one_model, PROMPTS[1]).parse().choices[0].message.content
        assert raw.parse().choices[0].message.content == want
        assert external_tokens(decode) > after_completion

        # A stream gets the decode engine's stream, with the limits the client asked for.
        stream = up.client.chat.completions.create(
            model=up.name, messages=[{"role": "user", "content": PROMPTS[2]}],
            max_tokens=MAX_TOKENS, temperature=0, stream=True)
        text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
        assert text == chat(one, one_model, PROMPTS[2]).parse().choices[0].message.content
        assert pd_decisions(up.url, "disaggregated") >= 3
        assert pd_decisions(up.url, "fallback") == 0
    finally:
        up.stop()


def kv_flags(role):
    return ["--kv-transfer-config",
            json.dumps({"kv_connector": "SwitchyardConnector", "kv_role": role,
                        "kv_connector_extra_config": {"io_timeout_ms": 2000}})]


ALWAYS_DISAGG = """
scheduling:
  plugins:
  - type: prefill-filter
  - type: decode-filter
  - type: queue-scorer
  - type: always-disagg-pd-decider
  - type: disagg-profile-handler
    parameters: {deciders: {prefill: always-disagg-pd-decider}}
  schedulingProfiles:
  - name: decode
    plugins: [{pluginRef: decode-filter}, {pluginRef: queue-scorer}]
  - name: prefill
    plugins: [{pluginRef: prefill-filter}, {pluginRef: queue-scorer}]
"""


def test_a_killed_prefill_engine_falls_back_to_the_decode_engine(single):
    one, one_model = single
    env = {"SWITCHYARD_KV_SECRET": SECRET}
    with EngineServer(*kv_flags("kv_producer"), env=env) as producer, \
            EngineServer(*kv_flags("kv_consumer"), env=env) as consumer:
        pools = ("pools:\n- name: default\n  endpoints:\n"
                 f"  - {{address: '{member_name(producer)}', engine: switchyard, "
                 "labels: {llm-d.ai/role: prefill}}\n"
                 f"  - {{address: '{member_name(consumer)}', engine: switchyard, "
                 "labels: {llm-d.ai/role: decode}}\n")
        router = Router([producer, consumer], pools=pools, scheduling=ALWAYS_DISAGG)
        try:
            client = openai.OpenAI(base_url=f"{router.url}/v1", api_key="x", max_retries=0,
                                   timeout=60)
            raw = completion(client, producer.name, PROMPTS[0])
            assert raw.headers["x-switchyard-prefill-endpoint"] == member_name(producer)
            assert raw.parse().choices[0].text == \
                completion(one, one_model, PROMPTS[0]).parse().choices[0].text
            assert pd_decisions(router.url, "disaggregated") == 1

            producer.kill()
            for prompt in PROMPTS[1:]:
                raw = completion(client, producer.name, prompt)
                assert raw.headers["x-switchyard-endpoint"] == member_name(consumer)
                assert "x-switchyard-prefill-endpoint" not in raw.headers
                assert raw.parse().choices[0].text == \
                    completion(one, one_model, prompt).parse().choices[0].text
            assert pd_decisions(router.url, "fallback") == len(PROMPTS) - 1
            assert pd_decisions(router.url, "disaggregated") == 1
        finally:
            router.stop()
