"""`switchyard engine` served to the official `openai` Python client: completions and chat
(plain and streamed), n > 1, stop strings, logprobs, seeds, usage and cached tokens, echo,
batched prompts, the tokenizer routes, the info routes and --api-key. One engine (CPU backend,
the bundled tiny model, random weights: its text is gibberish but greedy is deterministic)
serves the whole module."""
import json

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
    assert raw["data"][0]["max_model_len"] == 2048
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


@pytest.fixture(scope="module")
def keyed_engine():
    with EngineServer("--api-key", "sekret") as server:
        yield server


def test_api_key(keyed_engine):
    url = keyed_engine.url
    for path in ("/v1/models", "/version", "/metrics"):
        r = requests.get(url + path, timeout=10)
        assert r.status_code == 401, path
        assert r.json()["error"]["code"] == 401
        for header, status in (("Bearer wrong", 401), ("sekret", 401), ("Bearer sekret", 200)):
            r = requests.get(url + path, headers={"Authorization": header}, timeout=10)
            assert r.status_code == status, (path, header)
    assert requests.get(url + "/health", timeout=10).status_code == 200
    assert requests.post(url + "/tokenize", json={"prompt": "x"}, timeout=10).status_code == 401
    with openai.OpenAI(base_url=keyed_engine.base_url, api_key="wrong", max_retries=0,
                       timeout=30) as bad:
        with pytest.raises(openai.AuthenticationError):
            bad.completions.create(model=MODEL_NAME, prompt="x", max_tokens=1)
    with openai.OpenAI(base_url=keyed_engine.base_url, api_key="sekret", max_retries=0,
                       timeout=30) as good:
        r = good.completions.create(model=MODEL_NAME, prompt="x", max_tokens=2)
        assert r.usage.completion_tokens >= 1
        assert [m.id for m in good.models.list().data] == [MODEL_NAME]
