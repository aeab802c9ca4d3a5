"""`switchyard engine` served to the official `openai` Python client: completions and chat
(plain and streamed), n > 1, best_of, stop strings, logprobs, prompt logprobs, seeds, usage
(also continuous) and cached tokens, echo (with logprobs, with max_tokens 0), batched
prompts, special tokens in the text, the tokenizer routes, the info routes and --api-key. One
engine (CPU backend, the bundled tiny model, random weights: its text is gibberish but greedy
is deterministic) serves the whole module."""
import json
import re
import socket
import time

import openai
import pytest
import requests

from engine_server import MODEL_NAME, EngineServer

# Greedy text must not end early at one of the tiny model's EOS ids.
NO_EOS = {"ignore_eos": True}
CHAT = [{"role": "user", "content": "Tell me about switchyards."}]
LONG_PROMPT = list(range(100, 300))  # 200 token ids: 12 full blocks of 16


@pytest.fixture(scope="module")
def engine():
    with EngineServer("--num-gpu-blocks-override", "1024") as server:
        yield server
        server.wait_idle()


@pytest.fixture(scope="module")
def client(engine):
    with openai.OpenAI(base_url=engine.base_url, api_key="unused", max_retries=0,
                       timeout=30) as c:
        yield c


def complete(client, prompt="Hello world", **kw):
    kw.setdefault("max_tokens", 12)
    kw.setdefault("temperature", 0)
    kw.setdefault("extra_body", NO_EOS)
    return client.completions.create(model=MODEL_NAME, prompt=prompt, **kw)


def chat(client, messages=CHAT, **kw):
    kw.setdefault("max_tokens", 12)
    kw.setdefault("temperature", 0)
    kw.setdefault("extra_body", NO_EOS)
    return client.chat.completions.create(model=MODEL_NAME, messages=messages, **kw)


def test_completion(client):
    r = complete(client)
    assert r.object == "text_completion" and r.id.startswith("cmpl-")
    assert r.model == MODEL_NAME
    assert len(r.choices) == 1
    choice = r.choices[0]
    assert choice.index == 0 and choice.text
    assert choice.finish_reason == "length"
    assert r.usage.completion_tokens == 12
    assert r.usage.total_tokens == r.usage.prompt_tokens + 12
    assert complete(client).choices[0].text == choice.text  # greedy is deterministic


def test_request_id_header_names_the_response(client):
    """As vLLM: a client's x-request-id becomes the response id (cmpl-<id> / chatcmpl-<id>)
    and comes back in the header; two requests may share one id."""
    for _ in range(2):
        raw = client.completions.with_raw_response.create(
            model=MODEL_NAME, prompt="Hello", max_tokens=2, n=2,
            extra_headers={"x-request-id": "trace-42"})
        assert raw.headers["x-request-id"] == "trace-42"
        assert raw.parse().id == "cmpl-trace-42"
    raw = client.chat.completions.with_raw_response.create(
        model=MODEL_NAME, messages=CHAT, max_tokens=2, stream=True,
        extra_headers={"x-request-id": "trace-43"})
    assert {c.id for c in raw.parse()} == {"chatcmpl-trace-43"}
    made = client.completions.with_raw_response.create(model=MODEL_NAME, prompt="Hi",
                                                       max_tokens=1)
    assert made.parse().id.startswith("cmpl-") and made.headers["x-request-id"] == made.parse().id


def test_chat(client):
    r = chat(client)
    assert r.object == "chat.completion" and r.id.startswith("chatcmpl-")
    msg = r.choices[0].message
    assert msg.role == "assistant" and msg.content
    assert r.choices[0].finish_reason == "length"
    assert r.usage.completion_tokens == 12
    assert chat(client).choices[0].message.content == msg.content


def test_completion_stream_equals_plain(client):
    plain = complete(client, max_tokens=20).choices[0]
    chunks = list(complete(client, max_tokens=20, stream=True))
    assert all(c.object == "text_completion" for c in chunks)
    assert len({c.id for c in chunks}) == 1
    assert "".join(c.choices[0].text for c in chunks if c.choices) == plain.text
    assert chunks[-1].choices[0].finish_reason == "length"
    assert all(c.choices[0].finish_reason is None for c in chunks[:-1])
    assert all(c.usage is None for c in chunks)


def test_stream_chunks_survive_a_busy_submit(engine):
    """A batched streaming completion submits its prompts one by one on the HTTP thread
    while the engine already generates for the first: every choice must still arrive.
    (Regression: the SSE head, posted from the HTTP loop inside the handler, reached the
    connection after chunks the engine thread had posted meanwhile, which were dropped.)"""
    prompts = [[100 + i, 7] for i in range(100)]
    body = {"model": MODEL_NAME, "prompt": prompts, "max_tokens": 2, "temperature": 0,
            "ignore_eos": True}
    plain = requests.post(f"{engine.url}/v1/completions", json=body, timeout=30).json()
    want = {c["index"]: c["text"] for c in plain["choices"]}
    for _ in range(20):
        try:
            r = requests.post(f"{engine.url}/v1/completions", json={**body, "stream": True},
                              timeout=10)
        except requests.exceptions.Timeout:
            pytest.fail("the stream never ended")
        got, finished = {}, set()
        for event in r.content.decode().split("\n\n"):
            if event.startswith("data: {"):
                for c in json.loads(event[6:])["choices"]:
                    got[c["index"]] = got.get(c["index"], "") + c["text"]
                    if c["finish_reason"]:
                        finished.add(c["index"])
        assert finished == set(want)
        assert got == want


def test_chat_stream_equals_plain(client):
    plain = chat(client, max_tokens=20).choices[0]
    chunks = list(chat(client, max_tokens=20, stream=True))
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == plain.message.content
    assert chunks[-1].choices[0].finish_reason == "length"


def test_stream_include_usage(client):
    for stream in (complete(client, max_tokens=5, stream=True,
                            stream_options={"include_usage": True}),
                   chat(client, max_tokens=5, stream=True,
                        stream_options={"include_usage": True})):
        chunks = list(stream)
        last = chunks[-1]
        assert last.choices == []
        assert last.usage.completion_tokens == 5
        assert last.usage.total_tokens == last.usage.prompt_tokens + 5
        assert all(c.usage is None for c in chunks[:-1])


def test_n_choices_distinct_under_seed(client):
    r = complete(client, n=4, temperature=1.0, seed=11, max_tokens=16)
    assert [c.index for c in r.choices] == [0, 1, 2, 3]
    texts = [c.text for c in r.choices]
    assert len(set(texts)) == 4, texts
    assert r.usage.completion_tokens == 64
    again = complete(client, n=4, temperature=1.0, seed=11, max_tokens=16)
    assert [c.text for c in again.choices] == texts


def test_n_chat_streamed(client):
    chunks = list(chat(client, n=3, temperature=1.0, seed=5, max_tokens=8, stream=True))
    texts = {}
    finished = {}
    for c in chunks:
        for choice in c.choices:
            texts[choice.index] = texts.get(choice.index, "") + (choice.delta.content or "")
            if choice.finish_reason:
                finished[choice.index] = choice.finish_reason
    assert sorted(texts) == [0, 1, 2]
    assert finished == {0: "length", 1: "length", 2: "length"}
    plain = chat(client, n=3, temperature=1.0, seed=5, max_tokens=8)
    assert [texts[i] for i in range(3)] == [c.message.content for c in plain.choices]


def stop_string_from(text):
    """A 2-character ASCII piece of `text` past its first character."""
    for i in range(1, len(text) - 1):
        piece = text[i:i + 2]
        if piece.isascii() and piece.isalpha():
            return piece
    pytest.fail(f"no ASCII letters in greedy output {text!r}")


def test_stop_string(client):
    full = complete(client, max_tokens=48).choices[0].text
    stop = stop_string_from(full)
    raw = client.completions.with_raw_response.create(
        model=MODEL_NAME, prompt="Hello world", max_tokens=48, temperature=0, stop=[stop],
        extra_body=NO_EOS)
    body = raw.http_response.json()
    choice = body["choices"][0]
    assert choice["text"] == full[:full.index(stop)]
    assert choice["finish_reason"] == "stop"
    assert choice["stop_reason"] == stop
    # include_stop_str_in_output keeps it; streaming stops at the same place.
    kept = complete(client, max_tokens=48, stop=stop,
                    extra_body={**NO_EOS, "include_stop_str_in_output": True})
    assert kept.choices[0].text == full[:full.index(stop) + len(stop)]
    streamed = "".join(c.choices[0].text
                       for c in complete(client, max_tokens=48, stop=[stop], stream=True))
    assert streamed == choice["text"]


def test_chat_stop_string(client):
    full = chat(client, max_tokens=48).choices[0].message.content
    stop = stop_string_from(full)
    r = chat(client, max_tokens=48, stop=stop)
    assert r.choices[0].message.content == full[:full.index(stop)]
    assert r.choices[0].finish_reason == "stop"


def test_completion_logprobs(client):
    r = complete(client, logprobs=3, max_tokens=6)
    lp = r.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == 6
    assert len(lp.text_offset) == 6 and lp.text_offset[0] == 0
    # Offsets count characters (vLLM: Python len of each token string).
    for i in range(5):
        assert lp.text_offset[i + 1] - lp.text_offset[i] == len(lp.tokens[i])
    for token, logprob, top in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs):
        assert logprob <= 0
        # k entries, plus the sampled one when outside them; a dict, so ids that decode to
        # the same text (byte pieces shown as U+FFFD) keep only the best.
        assert 1 <= len(top) <= 4 and token in top
        # Greedy: the chosen token has the highest logprob.
        assert top[token] == pytest.approx(logprob) and logprob >= max(top.values()) - 1e-6


def test_bad_words_ban_the_greedy_token(client, engine):
    """A banned word's token loses its step to the best token that is not a form of it."""
    greedy = complete(client, logprobs=5, max_tokens=8).choices[0].logprobs
    for i, token in enumerate(greedy.tokens):
        word = token.strip()
        if not word or "\ufffd" in word:
            continue
        ids = requests.post(f"{engine.url}/tokenize",
                            json={"prompt": word, "add_special_tokens": False}, timeout=10).json()
        if ids["count"] == 1:
            break
    else:
        pytest.skip("no single-token word among the greedy tokens")
    forms = {word, " " + word}
    if any(t in forms for t in greedy.tokens[:i]):
        pytest.skip("the word occurs before its chosen position")
    banned = complete(client, logprobs=5, max_tokens=8,
                      extra_body={**NO_EOS, "bad_words": [word]}).choices[0].logprobs
    assert banned.tokens[:i] == greedy.tokens[:i]
    top = greedy.top_logprobs[i]
    expected = max((t for t in top if t not in forms), key=top.get)
    assert banned.tokens[i] == expected
    assert not forms.intersection(banned.tokens)


def test_completion_logprobs_show_a_sampled_token_outside_the_top(client):
    """vLLM's completions: top_logprobs holds the top N and the sampled token (N + 1 entries
    when it is not among them); chat keeps OpenAI's top N."""
    r = complete(client, logprobs=1, max_tokens=24, temperature=2.0, seed=3)
    lp = r.choices[0].logprobs
    outside = [i for i, (token, top) in enumerate(zip(lp.tokens, lp.top_logprobs))
               if len(top) == 2]
    assert outside, lp.top_logprobs  # at temperature 2 some token is not the most likely
    for i in outside:
        top = lp.top_logprobs[i]
        assert top[lp.tokens[i]] == pytest.approx(lp.token_logprobs[i])
        assert max(top.values()) > lp.token_logprobs[i]
    c = chat(client, logprobs=True, top_logprobs=1, max_tokens=24, temperature=2.0, seed=3)
    assert all(len(t.top_logprobs) == 1 for t in c.choices[0].logprobs.content)


def test_completion_logprobs_streamed(client):
    plain = complete(client, logprobs=2, max_tokens=6).choices[0].logprobs
    tokens, offsets, values = [], [], []
    for c in complete(client, logprobs=2, max_tokens=6, stream=True):
        lp = c.choices[0].logprobs
        if lp is not None:
            tokens += lp.tokens
            offsets += lp.text_offset
            values += lp.token_logprobs
    assert tokens == plain.tokens
    assert offsets == plain.text_offset
    assert values == pytest.approx(plain.token_logprobs)


def test_chat_logprobs(client):
    r = chat(client, logprobs=True, top_logprobs=2, max_tokens=5)
    content = r.choices[0].logprobs.content
    assert len(content) == 5
    for item in content:
        assert item.logprob <= 0
        assert len(item.top_logprobs) == 2
        assert item.top_logprobs[0].logprob == pytest.approx(item.logprob)
        assert bytes(item.bytes).decode("utf-8", errors="replace") == item.token
    without = chat(client, logprobs=False, max_tokens=5)
    assert without.choices[0].logprobs is None


def test_seeded_sampling_reproducible(client):
    a = complete(client, temperature=1.0, seed=1234, max_tokens=24)
    b = complete(client, temperature=1.0, seed=1234, max_tokens=24)
    c = complete(client, temperature=1.0, seed=4321, max_tokens=24)
    assert a.choices[0].text == b.choices[0].text
    assert a.choices[0].text != c.choices[0].text
    x = chat(client, temperature=1.0, seed=99, max_tokens=24)
    y = chat(client, temperature=1.0, seed=99, max_tokens=24)
    assert x.choices[0].message.content == y.choices[0].message.content


def test_cached_tokens_on_repeated_prefix(client, engine):
    before = engine.metrics()
    first = complete(client, prompt=LONG_PROMPT, max_tokens=2)
    second = complete(client, prompt=LONG_PROMPT, max_tokens=2)
    assert first.usage.prompt_tokens == second.usage.prompt_tokens == 200
    assert first.usage.prompt_tokens_details.cached_tokens == 0
    # Every full block but never the last prompt token: 12 blocks of 16.
    assert second.usage.prompt_tokens_details.cached_tokens == 192
    after = engine.metrics()
    assert after["vllm:prefix_cache_hits_total"] - before["vllm:prefix_cache_hits_total"] >= 192
    # Chat: the same long conversation twice hits the cache too.
    messages = [{"role": "user", "content": "switchyard " * 100}]
    chat(client, messages=messages, max_tokens=2)
    again = chat(client, messages=messages, max_tokens=2)
    assert again.usage.prompt_tokens_details.cached_tokens > 0


def test_max_tokens_length(client):
    r = complete(client, max_tokens=1)
    assert r.choices[0].finish_reason == "length"
    assert r.usage.completion_tokens == 1
    r = chat(client, max_completion_tokens=3)
    assert r.usage.completion_tokens == 3 and r.choices[0].finish_reason == "length"


def test_default_max_tokens_completion_is_16(client):
    r = client.completions.create(model=MODEL_NAME, prompt="Hi", temperature=0,
                                  extra_body=NO_EOS)
    assert r.usage.completion_tokens == 16


def test_echo(client):
    plain = complete(client, prompt="Echo this", max_tokens=5).choices[0].text
    r = complete(client, prompt="Echo this", max_tokens=5, echo=True)
    assert r.choices[0].text == "Echo this" + plain
    streamed = "".join(c.choices[0].text for c in
                       complete(client, prompt="Echo this", max_tokens=5, echo=True, stream=True))
    assert streamed == "Echo this" + plain


def tokenize(engine, prompt):
    return requests.post(f"{engine.url}/tokenize", json={"model": MODEL_NAME, "prompt": prompt},
                         timeout=10).json()["tokens"]


def check_offsets(lp):
    """text_offset starts at 0 and moves by each token's length (characters, as vLLM)."""
    assert lp.text_offset[0] == 0
    for a, b, token in zip(lp.text_offset, lp.text_offset[1:], lp.tokens):
        assert b - a == len(token)


ECHO_PROMPT = "Echo the switchyard"


def test_echo_logprobs(client, engine):
    """vLLM's echo with logprobs: the prompt's tokens come first in the choice's logprobs (the
    first with null logprob and null top entries), taken from the prompt logprobs, then the
    completion's; offsets run through both."""
    ids = tokenize(engine, ECHO_PROMPT)
    k = len(ids)
    r = complete(client, prompt=ECHO_PROMPT, max_tokens=4, echo=True, logprobs=2)
    plain = complete(client, prompt=ECHO_PROMPT, max_tokens=4, logprobs=2).choices[0]
    choice = r.choices[0]
    assert choice.text == ECHO_PROMPT + plain.text
    lp = choice.logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == k + 4
    # The BOS the tokenizer adds is echoed as a token, not as text (vLLM does the same).
    assert lp.tokens[0] == "<|begin_of_text|>" and ids[0] == 1000
    assert lp.token_logprobs[0] is None and lp.top_logprobs[0] is None
    assert "".join(lp.tokens[1:k]) == ECHO_PROMPT
    check_offsets(lp)
    assert lp.tokens[k:] == plain.logprobs.tokens
    assert lp.token_logprobs[k:] == pytest.approx(plain.logprobs.token_logprobs,
                                                  abs=LOGPROB_TOLERANCE)
    # The prompt part is what prompt_logprobs gives for the same prompt: the prompt token's
    # logprob, and as top entries the prompt token then the 2 most likely ids.
    _, plp = with_prompt_logprobs(client, ECHO_PROMPT, 2)
    for position in range(1, k):
        entry = plp[position]
        own = entry[str(ids[position])]
        assert lp.tokens[position] == own["decoded_token"]
        assert lp.token_logprobs[position] == pytest.approx(own["logprob"], abs=1e-6)
        top = {}
        for value in entry.values():
            top.setdefault(value["decoded_token"], value["logprob"])
        assert lp.top_logprobs[position] == pytest.approx(top, abs=1e-6)
    # As vLLM, echo with logprobs asks the engine for prompt logprobs; the choice has them.
    assert choice.prompt_logprobs == plp


def test_echo_logprobs_streamed(client):
    plain = complete(client, prompt=ECHO_PROMPT, max_tokens=4, echo=True, logprobs=2).choices[0]
    text, tokens, offsets, values = "", [], [], []
    for c in complete(client, prompt=ECHO_PROMPT, max_tokens=4, echo=True, logprobs=2,
                      stream=True):
        (choice,) = c.choices
        text += choice.text
        if choice.logprobs is not None:
            tokens += choice.logprobs.tokens
            offsets += choice.logprobs.text_offset
            values += choice.logprobs.token_logprobs
    assert text == plain.text
    assert tokens == plain.logprobs.tokens
    assert offsets == plain.logprobs.text_offset
    assert values[0] is None
    assert values[1:] == pytest.approx(plain.logprobs.token_logprobs[1:], abs=LOGPROB_TOLERANCE)


def test_echo_logprobs_streamed_n_over_chunked_prefill(client):
    """200 prompt tokens take the first sequence several steps to score (64 prompt positions a
    step) while its sibling prefills at once and starts generating: each choice's stream still
    opens with the whole echoed prompt and its logprobs, then the completion."""
    chunks = list(complete(client, prompt=LONG_PROMPT, n=2, max_tokens=3, echo=True, logprobs=1,
                           stream=True))
    plain = complete(client, prompt=LONG_PROMPT, n=2, max_tokens=3, echo=True, logprobs=1)
    for index in (0, 1):
        mine = [c.choices[0] for c in chunks if c.choices and c.choices[0].index == index]
        first = mine[0].logprobs
        assert len(first.tokens) == len(LONG_PROMPT) and first.token_logprobs[0] is None
        assert "".join(c.text for c in mine) == plain.choices[index].text
        assert [t for c in mine for t in c.logprobs.tokens] == plain.choices[index].logprobs.tokens
        assert ([o for c in mine for o in c.logprobs.text_offset]
                == plain.choices[index].logprobs.text_offset)
        check_offsets(plain.choices[index].logprobs)


def test_echo_max_tokens_zero(client, engine):
    """vLLM takes max_tokens 0 with echo: it runs one token and answers the prompt alone (the
    token counts in usage, as there)."""
    k = len(tokenize(engine, ECHO_PROMPT))
    r = complete(client, prompt=ECHO_PROMPT, max_tokens=0, echo=True, logprobs=1)
    (choice,) = r.choices
    assert choice.text == ECHO_PROMPT and choice.finish_reason == "length"
    assert len(choice.logprobs.tokens) == k and choice.logprobs.token_logprobs[0] is None
    assert r.usage.prompt_tokens == k and r.usage.completion_tokens == 1
    streamed = list(complete(client, prompt=ECHO_PROMPT, max_tokens=0, echo=True, stream=True))
    assert "".join(c.choices[0].text for c in streamed) == ECHO_PROMPT
    assert streamed[-1].choices[0].finish_reason == "length"
    with pytest.raises(openai.BadRequestError) as err:
        complete(client, prompt=ECHO_PROMPT, max_tokens=0)
    assert "max_tokens" in str(err.value)


BEST_OF = {"temperature": 1.0, "seed": 7, "max_tokens": 8}


def test_best_of_answers_the_most_likely_sequences(client):
    """vLLM's best_of: best_of sequences are sampled (sequence i from seed + i, as with n) and
    the n whose summed token logprobs are highest answer, best first; usage counts every
    sequence's tokens."""
    every = complete(client, n=3, logprobs=0, **BEST_OF)
    sums = [sum(c.logprobs.token_logprobs) for c in every.choices]
    assert len({c.text for c in every.choices}) == 3
    ranked = sorted(range(3), key=lambda i: -sums[i])
    best = complete(client, best_of=3, logprobs=0, **BEST_OF)
    (choice,) = best.choices
    assert choice.index == 0 and choice.text == every.choices[ranked[0]].text
    assert sum(choice.logprobs.token_logprobs) == pytest.approx(max(sums), abs=LOGPROB_TOLERANCE)
    assert best.usage.completion_tokens == every.usage.completion_tokens == 24
    two = complete(client, n=2, best_of=3, **BEST_OF)
    assert [c.index for c in two.choices] == [0, 1]
    assert [c.text for c in two.choices] == [every.choices[i].text for i in ranked[:2]]
    assert all(c.logprobs is None for c in two.choices)
    # best_of == n streams, in sequence order.
    streamed = {}
    for c in complete(client, n=2, best_of=2, stream=True, **BEST_OF):
        for ch in c.choices:
            streamed[ch.index] = streamed.get(ch.index, "") + ch.text
    assert [streamed[0], streamed[1]] == [c.text for c in every.choices[:2]]


def test_best_of_chat(client):
    every = chat(client, n=3, logprobs=True, **BEST_OF)
    sums = [sum(t.logprob for t in c.logprobs.content) for c in every.choices]
    best = chat(client, extra_body={**NO_EOS, "best_of": 3}, **BEST_OF)
    assert len(best.choices) == 1
    want = every.choices[max(range(3), key=lambda i: sums[i])]
    assert best.choices[0].message.content == want.message.content
    assert best.usage.completion_tokens == 24


def test_batched_prompts(client):
    prompts = ["one", "two two", "three three three"]
    singles = [complete(client, prompt=p, max_tokens=6).choices[0].text for p in prompts]
    r = complete(client, prompt=prompts, max_tokens=6)
    assert [c.index for c in r.choices] == [0, 1, 2]
    assert [c.text for c in r.choices] == singles
    assert r.usage.completion_tokens == 18
    # With n: choice index = prompt * n + sequence.
    r = complete(client, prompt=prompts[:2], n=2, max_tokens=6)
    assert [c.index for c in r.choices] == [0, 1, 2, 3]
    assert [c.text for c in r.choices] == [singles[0]] * 2 + [singles[1]] * 2
    # Token-id prompts, batched.
    ids = [[100, 101, 102], [200, 201]]
    r = complete(client, prompt=ids, max_tokens=4)
    assert len(r.choices) == 2
    assert r.usage.prompt_tokens == 5


# A prompt logprob and the logprob of the same token sampled at generation time come from
# the same logits computed in different batch shapes (a prefill chunk against a decode
# step), so float32 rounding may differ slightly.
LOGPROB_TOLERANCE = 1e-3


def with_prompt_logprobs(client, prompt, top, **kw):
    """A completion of one token that asks for prompt_logprobs; returns it and them."""
    kw.setdefault("max_tokens", 1)
    r = complete(client, prompt=prompt, extra_body={**NO_EOS, "prompt_logprobs": top}, **kw)
    return r, r.choices[0].prompt_logprobs


def check_prompt_logprobs_shape(plp, prompt_ids, top):
    """vLLM's shape: null, then per position {token id: {logprob, rank, decoded_token}},
    the prompt token first, then the `top` most likely ids ranked 1..top (one entry per
    id: a prompt token among them is not repeated)."""
    assert len(plp) == len(prompt_ids)
    assert plp[0] is None
    for position, entry in enumerate(plp[1:], start=1):
        keys = list(entry)
        assert int(keys[0]) == prompt_ids[position]
        for value in entry.values():
            assert set(value) == {"logprob", "rank", "decoded_token"}
            assert value["logprob"] <= 0 and value["rank"] >= 1
        own = entry[keys[0]]["rank"]
        top_ranks = list(range(1, top + 1))
        ranks = [entry[k]["rank"] for k in keys]
        if own <= top:
            assert len(entry) == top and sorted(ranks) == top_ranks
        else:
            assert len(entry) == top + 1 and ranks[1:] == top_ranks
        by_rank = sorted(entry.values(), key=lambda v: v["rank"])
        assert all(a["logprob"] >= b["logprob"] for a, b in zip(by_rank, by_rank[1:]))


def test_prompt_logprobs_match_generated_logprobs(client):
    """Greedy generation gives k tokens with their logprobs; fed back as prompt, the same
    tokens get the same logprobs as prompt logprobs, each ranked first."""
    prompt = [100 + (37 * i) % 700 for i in range(20)]
    k = 6
    generated = complete(client, prompt=prompt, max_tokens=k, logprobs=1).choices[0].logprobs
    # The greedy ids, one by one: the rank-1 id at the position after the ids so far (the
    # prompt token placed there, 5, only makes the position exist).
    ids = []
    for j in range(k):
        _, plp = with_prompt_logprobs(client, prompt + ids + [5], 1)
        entry = plp[len(prompt) + j]
        ids.append(next(int(t) for t, v in entry.items() if v["rank"] == 1))
    r, plp = with_prompt_logprobs(client, prompt + ids, 1)
    check_prompt_logprobs_shape(plp, prompt + ids, 1)
    for j in range(k):
        entry = plp[len(prompt) + j]
        first = entry[str(ids[j])]
        assert list(entry) == [str(ids[j])] and first["rank"] == 1
        assert first["decoded_token"] == generated.tokens[j]
        assert first["logprob"] == pytest.approx(generated.token_logprobs[j], abs=LOGPROB_TOLERANCE)


def test_prompt_logprobs_over_chunked_prefill(client):
    """200 prompt positions take several steps (a step returns at most 64 prompt positions'
    logits); positions from different steps agree with the logprob of the same token forced
    at generation time (allowed_token_ids; logprobs are raw, before that mask)."""
    r, plp = with_prompt_logprobs(client, LONG_PROMPT, 3)
    check_prompt_logprobs_shape(plp, LONG_PROMPT, 3)
    assert r.usage.prompt_tokens == 200
    again = with_prompt_logprobs(client, LONG_PROMPT, 3)[1]
    assert again == plp
    for position in (1, 63, 64, 130, 199):
        token = LONG_PROMPT[position]
        forced = complete(client, prompt=LONG_PROMPT[:position], max_tokens=1, logprobs=0,
                          extra_body={**NO_EOS, "allowed_token_ids": [token]})
        lp = forced.choices[0].logprobs
        assert plp[position][str(token)]["decoded_token"] == lp.tokens[0]
        assert plp[position][str(token)]["logprob"] == pytest.approx(lp.token_logprobs[0],
                                                                     abs=LOGPROB_TOLERANCE)


def test_prompt_logprobs_skip_prefix_cache_reads(client):
    """As vLLM, a prompt_logprobs request computes its whole prompt (its positions' logits are
    needed) even when the prefix is cached; the cache keeps serving the others."""
    prompt = list(range(400, 480))  # 5 full blocks of 16
    complete(client, prompt=prompt, max_tokens=1)
    r, plp = with_prompt_logprobs(client, prompt, 0)
    assert r.usage.prompt_tokens_details.cached_tokens == 0
    assert len(plp) == 80 and all(len(entry) == 1 for entry in plp[1:])
    again = complete(client, prompt=prompt, max_tokens=1)
    assert again.usage.prompt_tokens_details.cached_tokens == 64


def test_prompt_logprobs_batched_and_n(client):
    prompts = [[100, 101, 102, 103], [200, 201, 202]]
    r = complete(client, prompt=prompts, n=2, max_tokens=2,
                 extra_body={**NO_EOS, "prompt_logprobs": 2})
    assert len(r.choices) == 4
    for choice in r.choices:
        check_prompt_logprobs_shape(choice.prompt_logprobs, prompts[choice.index // 2], 2)
    assert r.choices[0].prompt_logprobs == r.choices[1].prompt_logprobs
    assert r.choices[2].prompt_logprobs == r.choices[3].prompt_logprobs
    single = with_prompt_logprobs(client, prompts[1], 2)[1]
    assert r.choices[2].prompt_logprobs == single
    # Not asked: no field.
    assert getattr(complete(client, max_tokens=1).choices[0], "prompt_logprobs", None) is None


def test_chat_prompt_logprobs(client, engine):
    r = chat(client, max_tokens=2, extra_body={**NO_EOS, "prompt_logprobs": 2})
    plp = r.prompt_logprobs
    ids = requests.post(f"{engine.url}/tokenize", json={"model": MODEL_NAME, "messages": CHAT},
                        timeout=10).json()["tokens"]
    check_prompt_logprobs_shape(plp, ids, 2)
    assert len(plp) == r.usage.prompt_tokens
    # Streams never carry them: vLLM refuses prompt_logprobs > 0 there and takes 0.
    with pytest.raises(openai.BadRequestError) as err:
        chat(client, stream=True, extra_body={**NO_EOS, "prompt_logprobs": 1})
    assert "prompt_logprobs" in str(err.value)
    for c in chat(client, stream=True, max_tokens=3, extra_body={**NO_EOS, "prompt_logprobs": 0}):
        assert getattr(c, "prompt_logprobs", None) is None


def test_stream_continuous_usage(client):
    """include_usage + continuous_usage_stats: every chunk carries its prompt's tokens and the
    choice's completion tokens so far (vLLM), then the usual usage-only last chunk."""
    options = {"include_usage": True, "continuous_usage_stats": True}
    chunks = list(complete(client, max_tokens=6, n=2, logprobs=1, stream=True,
                           stream_options=options))
    final = chunks[-1]
    assert final.choices == [] and final.usage.completion_tokens == 12
    seen = {0: 0, 1: 0}
    for c in chunks[:-1]:
        (choice,) = c.choices
        seen[choice.index] += len(choice.logprobs.tokens)
        assert c.usage.completion_tokens == seen[choice.index]
        assert c.usage.prompt_tokens == final.usage.prompt_tokens
        assert c.usage.total_tokens == c.usage.prompt_tokens + c.usage.completion_tokens
    assert seen == {0: 6, 1: 6}
    chat_chunks = list(chat(client, max_tokens=5, stream=True, stream_options=options))
    assert all(c.usage is not None for c in chat_chunks)
    counts = [c.usage.completion_tokens for c in chat_chunks[:-1]]
    assert counts == sorted(counts) and counts[-1] == 5
    assert chat_chunks[-1].choices == [] and chat_chunks[-1].usage.completion_tokens == 5
    # Without include_usage there is no usage at all, continuous or not (vLLM).
    bare = list(complete(client, max_tokens=3, stream=True,
                         stream_options={"include_usage": False, "continuous_usage_stats": True}))
    assert all(c.usage is None for c in bare)


def test_spaces_between_special_tokens(client, engine):
    """The tiny model's tokenizer (tokenizer.json, byte-level decoder) never puts spaces
    between special tokens, so vLLM's spaces_between_special_tokens changes nothing here:
    the text is the tokens back to back either way, and empty when they are skipped."""
    special = [1002, 1003]
    names = [requests.post(f"{engine.url}/detokenize", json={"tokens": [t]},
                           timeout=10).json()["prompt"] for t in special]
    assert all(n.startswith("<|") for n in names)
    for spaces in (True, False):
        body = {**NO_EOS, "allowed_token_ids": special, "skip_special_tokens": False,
                "spaces_between_special_tokens": spaces}
        r = complete(client, max_tokens=6, temperature=1.0, seed=5, logprobs=0, extra_body=body)
        lp = r.choices[0].logprobs
        assert set(lp.tokens) <= set(names) and len(lp.tokens) == 6
        assert r.choices[0].text == "".join(lp.tokens)
        skipped = complete(client, max_tokens=6, extra_body={**body, "skip_special_tokens": True})
        assert skipped.choices[0].text == ""


def test_tokenize_detokenize(engine):
    text = "Hello switchyard world"
    r = requests.post(f"{engine.url}/tokenize",
                      json={"model": MODEL_NAME, "prompt": text, "add_special_tokens": False,
                            "return_token_strs": True}, timeout=10)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["count"] == len(body["tokens"]) > 0
    assert body["max_model_len"] == 2048
    assert len(body["token_strs"]) == body["count"]
    d = requests.post(f"{engine.url}/detokenize",
                      json={"model": MODEL_NAME, "tokens": body["tokens"]}, timeout=10)
    assert d.status_code == 200, d.text
    assert d.json() == {"prompt": text}
    # With special tokens the BOS id comes first.
    with_bos = requests.post(f"{engine.url}/tokenize", json={"prompt": text},
                             timeout=10).json()
    assert with_bos["tokens"][1:] == body["tokens"]


def test_tokenize_messages_matches_chat_usage(engine, client):
    r = requests.post(f"{engine.url}/tokenize", json={"model": MODEL_NAME, "messages": CHAT},
                      timeout=10)
    assert r.status_code == 200, r.text
    assert r.json()["count"] == chat(client, max_tokens=1).usage.prompt_tokens


def test_models_version_health(engine, client):
    models = client.models.list()
    assert [m.id for m in models.data] == [MODEL_NAME]
    assert models.data[0].object == "model"
    raw = requests.get(f"{engine.url}/v1/models", timeout=10).json()
    # vLLM's ModelCard: the real context length and the Unix time the server started (the
    # router passes both through; issue 18, defect 14).
    assert raw["data"][0]["max_model_len"] == 2048
    assert 0 < time.time() - raw["data"][0]["created"] < 24 * 3600
    assert models.data[0].created == raw["data"][0]["created"]
    version = requests.get(f"{engine.url}/version", timeout=10)
    assert version.status_code == 200 and isinstance(version.json()["version"], str)
    assert requests.get(f"{engine.url}/health", timeout=10).status_code == 200
    metrics = engine.metrics()
    for name in ("vllm:num_requests_running", "vllm:num_requests_waiting",
                 "vllm:kv_cache_usage_perc", "vllm:prefix_cache_queries_total",
                 "vllm:prompt_tokens_total", "vllm:generation_tokens_total",
                 "vllm:request_success_total", "vllm:time_to_first_token_seconds_count",
                 "vllm:e2e_request_latency_seconds_count", "vllm:cache_config_info"):
        assert name in metrics, name


def test_unknown_model_is_404(client):
    with pytest.raises(openai.NotFoundError):
        client.completions.create(model="nope", prompt="x", max_tokens=1)


# --- beam search (vLLM's use_beam_search) --------------------------------------------------

BEAM_PROMPT = "The switchyard at dawn"
EOS_TEXT = "<|eot_id|>"  # the tiny model's tokenizer EOS, the one beam search stops on


def beam(client, n, max_tokens=8, **extra):
    """A beam search completion with the chosen tokens' logprobs (EOS ignored)."""
    return complete(client, prompt=BEAM_PROMPT, n=n, max_tokens=max_tokens, logprobs=1,
                    extra_body={"use_beam_search": True, **NO_EOS, **extra})


def beam_score(choice, prompt_tokens, length_penalty):
    """vLLM's get_beam_search_score from the reported logprobs: cum / seq_len^penalty, the
    prompt counted, an ending EOS not."""
    lp = choice.logprobs
    seq_len = prompt_tokens + len(lp.tokens) - (1 if lp.tokens[-1] == EOS_TEXT else 0)
    return sum(lp.token_logprobs) / seq_len ** length_penalty


def test_beam_search_returns_n_distinct_choices_best_first(client):
    r = beam(client, 3)
    assert [c.index for c in r.choices] == [0, 1, 2]
    assert len({c.text for c in r.choices}) == 3
    for c in r.choices:
        assert c.finish_reason == "length"
        assert len(c.logprobs.tokens) == 8
        # The top-1 entry, plus the beam's own token when it is not the top one.
        assert all(1 <= len(top) <= 2 and token in top
                   for token, top in zip(c.logprobs.tokens, c.logprobs.top_logprobs))
    # vLLM counts every returned beam's tokens.
    assert r.usage.completion_tokens == 3 * 8
    scores = [beam_score(c, r.usage.prompt_tokens, 1.0) for c in r.choices]
    assert scores == sorted(scores, reverse=True) or all(
        a >= b - 1e-5 for a, b in zip(scores, scores[1:])), scores
    assert beam(client, 3).choices[0].text == r.choices[0].text  # deterministic


def test_beam_width_one_is_greedy(client):
    greedy = complete(client, prompt=BEAM_PROMPT, max_tokens=8, logprobs=1).choices[0]
    for length_penalty in (0.5, 1.0, 2.0):
        b = beam(client, 1, length_penalty=length_penalty).choices[0]
        assert b.text == greedy.text
        assert b.logprobs.tokens == greedy.logprobs.tokens
        assert b.logprobs.token_logprobs == pytest.approx(greedy.logprobs.token_logprobs,
                                                          abs=LOGPROB_TOLERANCE)


def test_best_beam_is_at_least_as_likely_as_greedy(client):
    """With no length penalty the score is the cumulative logprob (beams of one length):
    the best of 4 beams is no less likely than the greedy sequence, here."""
    greedy = complete(client, prompt=BEAM_PROMPT, max_tokens=8, logprobs=1).choices[0]
    r = beam(client, 4, length_penalty=0.0)
    cums = [sum(c.logprobs.token_logprobs) for c in r.choices]
    assert all(a >= b - 1e-5 for a, b in zip(cums, cums[1:])), cums
    assert cums[0] >= sum(greedy.logprobs.token_logprobs) - LOGPROB_TOLERANCE


def test_beam_search_streamed_equals_plain(client):
    """As vLLM: the stream carries the final beams, one chunk each, then the usage."""
    plain = beam(client, 2)
    chunks = list(complete(client, prompt=BEAM_PROMPT, n=2, max_tokens=8, stream=True,
                           stream_options={"include_usage": True},
                           extra_body={"use_beam_search": True, **NO_EOS}))
    texts, finish = {}, {}
    for chunk in chunks[:-1]:
        for c in chunk.choices:
            texts[c.index] = texts.get(c.index, "") + c.text
            finish[c.index] = c.finish_reason or finish.get(c.index)
    assert texts == {c.index: c.text for c in plain.choices}
    assert finish == {0: "length", 1: "length"}
    assert chunks[-1].usage.completion_tokens == plain.usage.completion_tokens


def test_beam_search_chat(client):
    r = chat(client, n=2, max_tokens=6, logprobs=True, top_logprobs=2,
             extra_body={"use_beam_search": True})
    assert [c.index for c in r.choices] == [0, 1]
    # Distinct beams. Their texts may still match (lone UTF-8 bytes all decode to U+FFFD);
    # a token's logprob tells such tokens apart.
    beams = [[(t.token, t.logprob) for t in c.logprobs.content] for c in r.choices]
    assert beams[0] != beams[1]
    total = 0
    for c in r.choices:
        assert c.finish_reason in ("stop", "length")
        assert c.message.role == "assistant"
        assert all(len(t.top_logprobs) == 2 for t in c.logprobs.content)
        total += len(c.logprobs.content)
    assert r.usage.completion_tokens == total


def finished_requests(engine):
    text = requests.get(f"{engine.url}/metrics", timeout=10).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("vllm:request_success_total{"))


def test_beam_search_client_leaving_stops_the_search(engine):
    """Each beam step is one engine request per beam; a client that leaves ends them, and no
    further step starts."""
    body = json.dumps({"model": MODEL_NAME, "prompt": BEAM_PROMPT, "n": 4, "max_tokens": 1500,
                       "use_beam_search": True, "ignore_eos": True}).encode()
    before = finished_requests(engine)
    s = socket.create_connection(("127.0.0.1", engine.port), timeout=30)
    s.sendall((f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
               f"\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body)
    deadline = time.monotonic() + 10
    while finished_requests(engine) < before + 8:  # a couple of steps went through
        assert time.monotonic() < deadline
        time.sleep(0.02)
    s.close()
    # The HTTP loop notices the close a little later (later still under ASan on a loaded
    # machine), so a step or two may still run; then the count must settle.
    deadline = time.monotonic() + 15
    last = finished_requests(engine)
    while True:
        time.sleep(0.5)
        now = finished_requests(engine)
        if now == last:
            break
        assert time.monotonic() < deadline, "the beam search kept running after the client left"
        last = now
    engine.wait_idle(timeout=5)
    # 1500 steps of 4 beams were asked for; far fewer ran.
    assert last - before < 1000


@pytest.fixture(scope="module")
def keyed_engine():
    with EngineServer("--api-key", "sekret") as server:
        yield server


def test_api_key(keyed_engine):
    """--api-key protects what vLLM's protects: every path under /v1 (its middleware checks
    the prefix before routing, so an unknown /v1 path is 401 too). /metrics, /health, /ping,
    /version and /tokenize stay open, so that a router scrapes a keyed engine (issue 18,
    defect 7)."""
    url = keyed_engine.url
    for method, path in (("GET", "/v1/models"), ("POST", "/v1/completions"),
                         ("POST", "/v1/chat/completions"), ("GET", "/v1/nothing-here")):
        r = requests.request(method, url + path, json={}, timeout=10)
        assert r.status_code == 401, path
        assert r.json()["error"]["code"] == 401
        assert r.json()["error"]["type"] == "AuthenticationError"
        for header in ("Bearer wrong", "sekret", "Basic sekret", "Bearer sekret2"):
            r = requests.request(method, url + path, json={}, headers={"Authorization": header},
                                 timeout=10)
            assert r.status_code == 401, (path, header)
    good = {"Authorization": "Bearer sekret"}
    assert requests.get(url + "/v1/models", headers=good, timeout=10).status_code == 200
    assert requests.get(url + "/v1/nothing-here", headers=good, timeout=10).status_code == 404
    for path in ("/metrics", "/health", "/ping", "/version"):
        assert requests.get(url + path, timeout=10).status_code == 200, path
    assert "vllm:num_requests_running" in requests.get(url + "/metrics", timeout=10).text
    r = requests.post(url + "/tokenize", json={"prompt": "x"}, timeout=10)
    assert r.status_code == 200 and r.json()["count"] >= 1
    with openai.OpenAI(base_url=keyed_engine.base_url, api_key="wrong", max_retries=0,
                       timeout=30) as bad:
        with pytest.raises(openai.AuthenticationError):
            bad.completions.create(model=MODEL_NAME, prompt="x", max_tokens=1)
    with openai.OpenAI(base_url=keyed_engine.base_url, api_key="sekret", max_retries=0,
                       timeout=30) as good:
        r = good.completions.create(model=MODEL_NAME, prompt="x", max_tokens=2)
        assert r.usage.completion_tokens >= 1
        assert [m.id for m in good.models.list().data] == [MODEL_NAME]


# Structured output. The tiny model's text is random, so every constraint shows: unconstrained
# it never writes JSON. EOS stays on (no ignore_eos) so that a complete value can end.
PERSON_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 8},
        "age": {"type": "integer"},
        "ok": {"type": "boolean"},
        "color": {"enum": ["red", "green", "blue"]},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 3}, "maxItems": 2},
        "note": {"type": ["string", "null"], "maxLength": 5},
    },
    "required": ["name", "age", "ok", "color"],
    "additionalProperties": False,
}
PERSON_FORMAT = {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON_SCHEMA}}
# Nudges toward ',' ']' '}' (ids 11, 60, 92 in the tiny vocabulary) so that integers and
# arrays end within max_tokens; the grammar still decides where each may appear.
CLOSE_BIAS = {"11": 3, "60": 3, "92": 3}


def check_person(text):
    """Validates `text` against PERSON_SCHEMA by hand (jsonschema is not a test dependency)."""
    value = json.loads(text)
    assert isinstance(value, dict), text
    keys = list(value)
    order = list(PERSON_SCHEMA["properties"])
    assert keys == sorted(keys, key=order.index), text  # schema order
    assert set(PERSON_SCHEMA["required"]) <= set(keys) <= set(order), text
    assert isinstance(value["name"], str) and len(value["name"]) <= 8, text
    assert isinstance(value["age"], int) and not isinstance(value["age"], bool), text
    assert isinstance(value["ok"], bool), text
    assert value["color"] in ("red", "green", "blue"), text
    if "tags" in value:
        assert isinstance(value["tags"], list) and len(value["tags"]) <= 2, text
        assert all(isinstance(t, str) and len(t) <= 3 for t in value["tags"]), text
    if "note" in value:
        assert value["note"] is None or (isinstance(value["note"], str)
                                         and len(value["note"]) <= 5), text
    return value


def structured_chat(client, **kw):
    kw.setdefault("max_tokens", 300)
    kw.setdefault("seed", 1)
    return client.chat.completions.create(model=MODEL_NAME, messages=CHAT, **kw)


def test_json_schema_response_format(client):
    for seed in range(4):
        r = structured_chat(client, seed=seed, response_format=PERSON_FORMAT,
                            logit_bias=CLOSE_BIAS)
        choice = r.choices[0]
        assert choice.finish_reason == "stop", choice.message.content
        check_person(choice.message.content)


def test_json_schema_streamed(client):
    plain = structured_chat(client, seed=5, response_format=PERSON_FORMAT, logit_bias=CLOSE_BIAS)
    chunks = list(structured_chat(client, seed=5, response_format=PERSON_FORMAT,
                                  logit_bias=CLOSE_BIAS, stream=True))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert chunks[-1].choices[0].finish_reason == "stop"
    check_person(text)
    assert text == plain.choices[0].message.content  # same seed, same constrained text


def test_json_schema_n_and_completions(client):
    r = client.completions.create(model=MODEL_NAME, prompt="Hello", max_tokens=300, seed=3, n=3,
                                  logit_bias=CLOSE_BIAS,
                                  extra_body={"response_format": PERSON_FORMAT})
    assert len(r.choices) == 3
    for choice in r.choices:
        assert choice.finish_reason == "stop"
        check_person(choice.text)


def test_json_object(client):
    # A bias toward '"' and '}' (ids 1 and 92 in the tiny vocabulary) keeps objects short;
    # unconstrained, the same bias gives a run of braces and quotes that is not JSON.
    bias = {"1": 4, "92": 6}
    for seed in range(4):
        r = structured_chat(client, seed=seed, logit_bias=bias,
                            response_format={"type": "json_object"})
        text = r.choices[0].message.content
        assert r.choices[0].finish_reason == "stop", text
        assert isinstance(json.loads(text), dict), text
    free = structured_chat(client, seed=0, logit_bias=bias, max_tokens=20)
    with pytest.raises(ValueError):
        json.loads(free.choices[0].message.content)


def test_json_object_streamed(client):
    chunks = list(structured_chat(client, seed=2, logit_bias={"1": 4, "92": 6}, stream=True,
                                  response_format={"type": "json_object"}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert isinstance(json.loads(text), dict), text


def test_structured_outputs_choice(client):
    choices = ["yes", "no", "maybe so"]
    seen = set()
    for seed in range(6):
        r = client.completions.create(model=MODEL_NAME, prompt="Well?", max_tokens=20, seed=seed,
                                      extra_body={"structured_outputs": {"choice": choices}})
        assert r.choices[0].text in choices
        assert r.choices[0].finish_reason == "stop"
        seen.add(r.choices[0].text)
    chat_r = structured_chat(client, extra_body={"structured_outputs": {"choice": choices}})
    assert chat_r.choices[0].message.content in choices
    assert len(seen) > 1  # the choice is sampled, not fixed


def test_structured_outputs_json(client):
    r = client.completions.create(
        model=MODEL_NAME, prompt="Hello", max_tokens=300, seed=4, logit_bias=CLOSE_BIAS,
        extra_body={"structured_outputs": {"json": PERSON_SCHEMA}})
    assert r.choices[0].finish_reason == "stop"
    check_person(r.choices[0].text)


# Regexes whose every sentence is short, so that a random model finishes them.
REGEXES = [
    r"^(yes|no|[0-9]{1,3}-[a-z]{2})$",
    r"[A-Z][a-z]{1,6} (is|was) \d{2}\.",
    r"(?P<word>[\u03b1-\u03c9]{2,4})-[^\x00-\x7f]?\w{1,3}",
]


def test_structured_outputs_regex(client):
    for pattern in REGEXES:
        for seed in range(3):
            r = client.completions.create(
                model=MODEL_NAME, prompt="Hello", max_tokens=60, seed=seed,
                extra_body={"structured_outputs": {"regex": pattern}})
            text = r.choices[0].text
            assert r.choices[0].finish_reason == "stop", (pattern, text)
            assert re.fullmatch(pattern, text), (pattern, text)
        free = client.completions.create(model=MODEL_NAME, prompt="Hello", max_tokens=20, seed=0)
        assert not re.fullmatch(pattern, free.choices[0].text)
    chunks = list(structured_chat(client, stream=True,
                                  extra_body={"structured_outputs": {"regex": REGEXES[1]}}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert re.fullmatch(REGEXES[1], text), text


# Nested parentheses around one x, with optional single spaces: not a regular language, and
# the rule `ws` can match the empty string.
NESTED_GRAMMAR = """
root  ::= "(" ws inner ws ")"   # at least one pair
inner ::= "x" | "(" ws inner ws ")"
ws    ::= " "?
"""


def in_nested_language(text):
    pos = 0

    def eat(c):
        nonlocal pos
        if text.startswith(c, pos):
            pos += 1
            return True
        return False

    def group():
        if not eat("("):
            return False
        eat(" ")
        if not (eat("x") or group()):
            return False
        eat(" ")
        return eat(")")

    return group() and pos == len(text)


def test_structured_outputs_grammar(client):
    assert in_nested_language("( (x))") and not in_nested_language("((x)")
    depths = set()
    for seed in range(5):
        r = client.completions.create(
            model=MODEL_NAME, prompt="Hello", max_tokens=200, seed=seed,
            extra_body={"structured_outputs": {"grammar": NESTED_GRAMMAR}})
        text = r.choices[0].text
        assert r.choices[0].finish_reason == "stop", text
        assert in_nested_language(text), text
        depths.add(text.count("("))
    chat_r = structured_chat(client, extra_body={"structured_outputs": {"grammar": NESTED_GRAMMAR}})
    assert in_nested_language(chat_r.choices[0].message.content)
    assert len(depths) > 1  # the nesting is sampled, not fixed


# structural_tag (vLLM's structures-and-triggers form): free text until the trigger "<", then
# one of the structures, then free text again. A bias toward "<" makes the random model reach
# it often; every "<" outside a call must then begin a complete, schema-valid call.
# (Multi-byte and overlapping triggers are unit-tested.)
CALL_TAG = {
    "type": "structural_tag",
    "structures": [
        {"begin": "<call=add>", "end": "</call>",
         "schema": {"type": "object", "properties": {"a": {"type": "integer"},
                                                      "b": {"type": "integer"}},
                    "required": ["a", "b"], "additionalProperties": False}},
        {"begin": "<call=echo>", "end": "</call>",
         "schema": {"type": "object", "properties": {"text": {"type": "string", "maxLength": 6}},
                    "required": ["text"], "additionalProperties": False}},
    ],
    "triggers": ["<"],
}


def check_calls(text, finished):
    """The calls in `text`; each must be complete unless the output was cut by max_tokens."""
    decoder = json.JSONDecoder()
    calls, pos = [], 0
    while (start := text.find("<", pos)) >= 0:
        rest = text[start:]
        name = next((n for n in ("add", "echo") if rest.startswith(f"<call={n}>")), None)
        if name is None:
            assert not finished and any(f"<call={n}>".startswith(rest) for n in ("add", "echo")), text
            return calls
        body = rest[len(f"<call={name}>"):]
        try:
            value, end = decoder.raw_decode(body)
        except ValueError:
            assert not finished, text
            return calls
        assert set(value) == ({"a", "b"} if name == "add" else {"text"}), text
        if name == "add":
            assert all(type(value[k]) is int for k in ("a", "b")), text
        else:
            assert isinstance(value["text"], str) and len(value["text"]) <= 6, text
        if not body[end:].startswith("</call>"):
            assert not finished and "</call>".startswith(body[end:]), text
            return calls
        calls.append((name, value))
        pos = start + len(f"<call={name}>") + end + len("</call>")
    return calls


def test_structural_tag(engine, client):
    ids = requests.post(engine.url + "/tokenize", json={"model": MODEL_NAME, "prompt": "<",
                                                       "add_special_tokens": False},
                        timeout=10).json()["tokens"]
    bias = {str(ids[0]): 3, **CLOSE_BIAS}
    total = 0
    for seed in range(4):
        r = structured_chat(client, seed=seed, max_tokens=120, logit_bias=bias,
                            response_format=CALL_TAG)
        choice = r.choices[0]
        total += len(check_calls(choice.message.content, choice.finish_reason == "stop"))
    # vLLM's other spelling: structured_outputs.structural_tag as a JSON string, completions.
    r = client.completions.create(model=MODEL_NAME, prompt="Hello", max_tokens=120, seed=7, n=2,
                                  logit_bias=bias,
                                  extra_body={"structured_outputs": {
                                      "structural_tag": json.dumps(CALL_TAG)}})
    for choice in r.choices:
        total += len(check_calls(choice.text, choice.finish_reason == "stop"))
    assert total >= 3  # the bias makes calls common; unconstrained, none would parse
    free = structured_chat(client, seed=0, max_tokens=120, logit_bias=bias)
    with pytest.raises(AssertionError):
        check_calls(free.choices[0].message.content, True)


def test_structural_tag_errors(engine):
    cases = [
        ({"response_format": {"type": "structural_tag"}}, "response_format",
         "structures is required"),
        ({"response_format": {**CALL_TAG, "triggers": ["<tool"]}}, "response_format",
         "does not start with any trigger"),
        ({"structured_outputs": {"structural_tag": "{}"}}, "structured_outputs.structural_tag",
         "structures is required"),
        ({"structured_outputs": {"structural_tag": json.dumps(
            {"type": "structural_tag", "format": {"type": "any_text"}})}},
         "structured_outputs.structural_tag", "not `format`"),
    ]
    for extra, param, fragment in cases:
        r = requests.post(engine.base_url + "/chat/completions", timeout=30,
                          json={"model": MODEL_NAME, "messages": CHAT, "max_tokens": 5, **extra})
        assert r.status_code == 400, (extra, r.text)
        body = r.json()["error"]
        assert body["param"] == param and fragment in body["message"], (extra, r.text)


def test_structured_outputs_regex_and_grammar_errors(client):
    cases = [
        ({"regex": "(a)\\1"}, "structured_outputs.regex", "backreferences"),
        ({"regex": "[abc"}, "structured_outputs.regex", "unterminated character set"),
        ({"grammar": "root ::= item\nitem ::= [a-z"}, "structured_outputs.grammar",
         "unterminated character class (at line 2, column 10)"),
        ({"grammar": 'start ::= "a"'}, "structured_outputs.grammar", "no 'root' rule"),
        ({"grammar": "root ::= a\na ::= b \"x\"\nb ::= \" \"* a"}, "structured_outputs.grammar",
         "left recursion"),
    ]
    for structured, param, fragment in cases:
        with pytest.raises(openai.BadRequestError) as err:
            client.completions.create(model=MODEL_NAME, prompt="x", max_tokens=5,
                                      extra_body={"structured_outputs": structured})
        body = err.value.response.json()["error"]
        assert body["code"] == 400 and body["type"] == "BadRequestError", body
        assert body["param"] == param, body
        assert fragment in body["message"], body


def test_structured_output_max_tokens_cut(client):
    r = structured_chat(client, max_tokens=3, response_format=PERSON_FORMAT)
    choice = r.choices[0]
    assert choice.finish_reason == "length"
    assert r.usage.completion_tokens == 3
    # Cut short, the text is the start of a valid object (as in vLLM, not a whole one).
    assert choice.message.content.startswith("{")


def test_structured_output_errors(client, engine):
    with pytest.raises(openai.BadRequestError) as err:
        structured_chat(client, response_format={
            "type": "json_schema",
            "json_schema": {"name": "x", "schema": {"type": "string", "pattern": "^a+$"}}})
    body = err.value.response.json()["error"]
    assert body["code"] == 400 and body["type"] == "BadRequestError"
    assert body["param"] == "response_format.json_schema.schema"
    assert "'pattern'" in body["message"]
    cases = [
        ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {
            "type": "integer", "minimum": 3}}}}, "'minimum'"),
        ({"structured_outputs": {"json": {"$ref": "#/$defs/missing"}}}, "does not resolve"),
        ({"structured_outputs": {"choice": []}}, "choice"),
        ({"structured_outputs": {"choice": ["a"], "json_object": True}}, "only use one kind"),
        ({"structured_outputs": {"json_object": True},
          "response_format": {"type": "json_object"}}, "only use one kind"),
    ]
    for extra, fragment in cases:
        r = requests.post(engine.base_url + "/completions", timeout=30,
                          json={"model": MODEL_NAME, "prompt": "x", "max_tokens": 5, **extra})
        assert r.status_code == 400, (extra, r.text)
        assert fragment in r.json()["error"]["message"], (extra, r.text)
    # The server keeps serving.
    assert complete(client).choices[0].text
