"""Bad input against `switchyard engine` (shared/reference/reliability.md, issue 4): malformed
and deeply nested JSON, wrong types, non-finite and out-of-range numbers, fan-out and length
limits, prompts over the context, invalid UTF-8, oversized headers and bodies, unknown routes
and methods, unsupported features, slow clients, and clients that leave mid-stream or in the
queue. Every case checks the status, the OpenAI error body
{"error": {"message", "type", "param", "code"}} with code == status, and that the server
still answers a good request; at the end no request and no KV block may be left behind."""
import http.client
import json
import socket
import time

import openai
import pytest
import requests

from engine_server import MODEL_NAME, EngineServer

MAX_MODEL_LEN = 256
MAX_BODY_BYTES = 1 << 20     # --max-request-body-bytes (default 4 MiB)
MAX_HEADER_BYTES = 16 << 10  # net::HttpServerOptions::max_header_bytes
HEADER_TIMEOUT_S = 1         # --http-header-timeout (default 10 s), also the body stall limit
VOCAB = 1024                 # models/tiny-llama3


@pytest.fixture(scope="module")
def engine():
    with EngineServer("--max-model-len", MAX_MODEL_LEN, "--num-gpu-blocks-override", 256,
                      "--max-request-body-bytes", MAX_BODY_BYTES,
                      "--http-header-timeout", HEADER_TIMEOUT_S) as e:
        yield e
        e.wait_idle()


# --- helpers -------------------------------------------------------------------------------

def check_error(status, body, expected_status, param=None):
    """The OpenAI error shape, code == status, a message that is valid UTF-8 JSON text."""
    assert status == expected_status, body[:500]
    doc = json.loads(body)  # strict: bytes must be UTF-8
    assert list(doc) == ["error"], doc
    err = doc["error"]
    assert set(err) == {"message", "type", "param", "code"}, err
    assert err["code"] == expected_status
    assert isinstance(err["message"], str) and err["message"]
    assert isinstance(err["type"], str) and err["type"].endswith("Error")
    assert err["param"] is None or isinstance(err["param"], str)
    if param is not None:
        assert err["param"] == param, err
    return err


def assert_serves(engine):
    r = requests.post(f"{engine.url}/v1/completions",
                      json={"model": MODEL_NAME, "prompt": "still there?", "max_tokens": 2},
                      timeout=30)
    assert r.status_code == 200, r.text
    assert r.json()["usage"]["completion_tokens"] >= 1


def raw_exchange(port, data, read_timeout=10):
    """Sends `data` as is and reads one HTTP response; returns (status, body bytes)."""
    with socket.create_connection(("127.0.0.1", port), timeout=read_timeout) as s:
        try:
            s.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server may answer and close before it read everything
        response = http.client.HTTPResponse(s)
        response.begin()
        return response.status, response.read()


def post_bytes(port, path, body):
    head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
    return raw_exchange(port, head + body)


def cmpl(**fields):
    return {"model": MODEL_NAME, "prompt": "hi", "max_tokens": 2, **fields}


def chat(**fields):
    return {"model": MODEL_NAME, "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 2, **fields}


def without(d, key):
    return {k: v for k, v in d.items() if k != key}


C, CH = "/v1/completions", "/v1/chat/completions"
LONG_PROMPT = list(range(100, 100 + MAX_MODEL_LEN + 44))  # 300 ids > max_model_len

# (id, path, body (dict -> JSON, bytes as is), status, param or None)
CASES = [
    # Malformed bodies.
    ("malformed_json", C, b'{"model": "tiny", "prompt": "x"', 400, None),
    ("trailing_garbage", C, b'{"prompt": "x"} xyz', 400, None),
    ("empty_body", C, b"", 400, None),
    ("body_is_array", C, b'["prompt"]', 400, None),
    ("body_is_string", CH, b'"hello"', 400, None),
    ("deep_array_100k", C, b"[" * 100_000, 400, None),
    ("deep_array_in_prompt", C,
     b'{"prompt": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", 400, None),
    ("deep_object", CH, b'{"a":' * 10_000 + b"1" + b"}" * 10_000, 400, None),
    ("duplicate_keys", C, b'{"prompt": "x", "prompt": "y"}', 400, None),
    ("invalid_utf8_prompt", C, b'{"model": "tiny", "prompt": "\xff\xfe\xc3("}', 400, None),
    ("invalid_utf8_model", C, b'{"model": "\xc3\x28\xa0", "prompt": "x"}', 400, None),
    ("invalid_utf8_message", CH,
     b'{"messages": [{"role": "user", "content": "\xed\xa0\x80"}]}', 400, None),
    ("nan_literal", C, b'{"prompt": "x", "temperature": NaN}', 400, None),
    ("infinity_literal", C, b'{"prompt": "x", "top_p": Infinity}', 400, None),
    ("minus_infinity_literal", CH,
     b'{"messages": [{"role": "user", "content": "x"}], "temperature": -Infinity}', 400, None),
    ("number_overflow", C, b'{"prompt": "x", "temperature": 1e400}', 400, "temperature"),
    # Valid JSON numbers beyond 64-bit integers or doubles name their field (issue 18, defect
    # 10), top-level or nested, for completions and chat.
    *[(f"number_fault_{kind}_{field}_{i}", path,
       (b'{"prompt": "x", ' if path == C else
        b'{"messages": [{"role": "user", "content": "x"}], ') + f'"{field}": {number}}}'.encode(),
       400, field)
      for i, number in enumerate(["1e309", "-1e309", "18446744073709551616",
                                  "-9223372036854775809"])
      for kind, path in (("cmpl", C), ("chat", CH))
      for field in ("max_tokens", "seed", "temperature", "top_p", "top_k", "min_p", "n",
                    "presence_penalty", "frequency_penalty", "repetition_penalty",
                    "min_tokens", "priority", "truncate_prompt_tokens", "best_of",
                    "length_penalty", "prompt_logprobs",
                    "logprobs" if path == C else "max_completion_tokens")],
    ("number_fault_logit_bias", CH,
     b'{"messages": [{"role": "user", "content": "x"}], "logit_bias": {"7": 1e309}}', 400,
     "logit_bias"),
    ("number_fault_prompt_ids", C, b'{"prompt": [1, 2, 18446744073709551616]}', 400, "prompt"),
    ("number_fault_top_logprobs", CH,
     b'{"messages": [{"role": "user", "content": "x"}], "logprobs": true, '
     b'"top_logprobs": 1e309}', 400, "top_logprobs"),
    ("number_fault_stop_token_ids", C, b'{"prompt": "x", "stop_token_ids": [1e309]}', 400,
     "stop_token_ids"),
    # Wrong types for the main fields.
    ("prompt_number", C, cmpl(prompt=42), 400, "prompt"),
    ("prompt_object", C, cmpl(prompt={"text": "x"}), 400, "prompt"),
    ("prompt_mixed_list", C, cmpl(prompt=["x", 5]), 400, "prompt"),
    ("prompt_missing", C, without(cmpl(), "prompt"), 400, "prompt"),
    ("model_number", C, cmpl(model=5), 400, "model"),
    ("messages_string", CH, chat(messages="hi"), 400, "messages"),
    ("messages_missing", CH, without(chat(), "messages"), 400, "messages"),
    ("message_not_object", CH, chat(messages=["hi"]), 400, "messages[0]"),
    ("message_no_role", CH, chat(messages=[{"content": "hi"}]), 400, "messages[0].role"),
    ("message_bad_role", CH, chat(messages=[{"role": "wizard", "content": "hi"}]), 400,
     "messages[0].role"),
    ("message_content_number", CH, chat(messages=[{"role": "user", "content": 7}]), 400,
     "messages[0].content"),
    ("content_part_image", CH,
     chat(messages=[{"role": "user", "content": [{"type": "image_url", "image_url": {
         "url": "http://169.254.169.254/"}}]}]), 400, "messages[0].content"),
    ("max_tokens_string", C, cmpl(max_tokens="10"), 400, "max_tokens"),
    ("max_tokens_float", C, cmpl(max_tokens=1.5), 400, "max_tokens"),
    ("temperature_string", C, cmpl(temperature="hot"), 400, "temperature"),
    ("stream_string", C, cmpl(stream="yes"), 400, "stream"),
    ("n_string", C, cmpl(n="2"), 400, "n"),
    ("seed_string", C, cmpl(seed="x"), 400, "seed"),
    ("stop_number", C, cmpl(stop=5), 400, "stop"),
    ("stop_list_of_numbers", CH, chat(stop=[1, 2]), 400, "stop"),
    ("logprobs_string", C, cmpl(logprobs="x"), 400, "logprobs"),
    ("logit_bias_list", C, cmpl(logit_bias=[1, 2]), 400, "logit_bias"),
    ("stream_options_string", C, cmpl(stream=True, stream_options="x"), 400, "stream_options"),
    ("echo_number", C, cmpl(echo=3), 400, "echo"),
    # Non-finite and out-of-range parameters.
    ("temperature_negative", C, cmpl(temperature=-0.5), 400, "temperature"),
    ("temperature_huge", CH, chat(temperature=1e308), 400, "temperature"),
    ("top_p_zero", C, cmpl(top_p=0), 400, "top_p"),
    ("top_p_over_one", CH, chat(top_p=1.5), 400, "top_p"),
    ("top_k_negative", C, cmpl(top_k=-5), 400, "top_k"),
    ("min_p_over_one", C, cmpl(min_p=2), 400, "min_p"),
    ("presence_penalty_big", C, cmpl(presence_penalty=5), 400, "presence_penalty"),
    ("frequency_penalty_negative", CH, chat(frequency_penalty=-3), 400, "frequency_penalty"),
    ("repetition_penalty_zero", C, cmpl(repetition_penalty=0), 400, "repetition_penalty"),
    ("n_zero", C, cmpl(n=0), 400, "n"),
    ("n_negative", CH, chat(n=-1), 400, "n"),
    ("n_huge", C, cmpl(n=1_000_000), 400, "n"),
    # Past 64 bits simdjson refuses the number itself (a 400 without a param).
    ("n_int64_overflow", C, cmpl(n=2**70), 400, None),
    ("n_uint64_max", C, cmpl(n=2**64 - 1), 400, "n"),
    ("best_of_below_n", C, cmpl(n=2, best_of=1), 400, "best_of"),
    # best_of is bounded as n is; its results cannot be streamed (vLLM V0, OpenAI).
    ("best_of_over_limit", C, cmpl(best_of=129), 400, "best_of"),
    ("best_of_huge", C, cmpl(best_of=10**9), 400, "best_of"),
    ("best_of_streamed", C, cmpl(n=2, best_of=3, stream=True), 400, "best_of"),
    ("best_of_streamed_chat", CH, chat(best_of=2, stream=True), 400, "best_of"),
    # Echoed prompt logprobs are prompt logprobs, which beam search does not compute.
    ("echo_logprobs_beam_search", C, cmpl(echo=True, logprobs=1, use_beam_search=True), 400,
     "echo"),
    ("max_tokens_zero_chat_echo", CH, chat(max_tokens=0, echo=True), 400, "max_tokens"),
    ("max_tokens_zero", C, cmpl(max_tokens=0), 400, "max_tokens"),
    ("max_tokens_negative", CH, chat(max_tokens=-1), 400, "max_tokens"),
    ("max_tokens_huge", C, cmpl(max_tokens=10**12), 400, "max_tokens"),
    ("max_tokens_over_context", C, cmpl(max_tokens=MAX_MODEL_LEN), 400, "max_tokens"),
    ("max_completion_tokens_zero", CH, chat(max_completion_tokens=0), 400,
     "max_completion_tokens"),
    ("min_tokens_over_max", C, cmpl(min_tokens=5, max_tokens=2), 400, "min_tokens"),
    ("seed_float", C, cmpl(seed=1.5), 400, "seed"),
    ("logprobs_too_many", C, cmpl(logprobs=21), 400, "logprobs"),
    ("logprobs_negative", C, cmpl(logprobs=-1), 400, "logprobs"),
    ("top_logprobs_too_many", CH, chat(logprobs=True, top_logprobs=21), 400, "top_logprobs"),
    ("top_logprobs_without_logprobs", CH, chat(top_logprobs=2), 400, "top_logprobs"),
    ("prompt_logprobs_too_many", C, cmpl(prompt_logprobs=21), 400, "prompt_logprobs"),
    ("prompt_logprobs_streamed", CH, chat(prompt_logprobs=1, stream=True), 400,
     "prompt_logprobs"),
    ("truncate_prompt_tokens_negative", C, cmpl(truncate_prompt_tokens=-5), 400,
     "truncate_prompt_tokens"),
    ("stream_options_without_stream", C, cmpl(stream_options={"include_usage": True}), 400,
     "stream_options"),
    ("generation_prompt_and_continue", CH,
     chat(add_generation_prompt=True, continue_final_message=True), 400,
     "continue_final_message"),
    ("chat_template_kwargs_list", CH, chat(chat_template_kwargs=[1]), 400,
     "chat_template_kwargs"),
    ("suffix", C, cmpl(suffix="tail"), 400, "suffix"),
    # Prompts: empty, over the context, token ids outside the vocabulary.
    ("empty_prompt", C, cmpl(prompt=""), 400, "prompt"),
    ("empty_prompt_list", C, cmpl(prompt=[]), 400, "prompt"),
    ("empty_prompt_in_batch", C, cmpl(prompt=["x", ""]), 400, "prompt"),
    ("empty_token_list_in_batch", C, cmpl(prompt=[[1, 2], []]), 400, "prompt"),
    ("empty_messages", CH, chat(messages=[]), 400, "messages"),
    ("prompt_over_context", C, cmpl(prompt=LONG_PROMPT), 400, "prompt"),
    ("prompt_text_over_context", C, cmpl(prompt="switchyard " * 300), 400, "prompt"),
    ("messages_over_context", CH,
     chat(messages=[{"role": "user", "content": "switchyard " * 300}]), 400, "messages"),
    ("too_many_prompts", C, cmpl(prompt=["x"] * 1025), 400, "prompt"),
    ("token_id_over_vocab", C, cmpl(prompt=[5, VOCAB]), 400, None),
    ("token_id_negative", C, cmpl(prompt=[-1]), 400, None),
    ("token_id_huge", C, cmpl(prompt=[2**40]), 400, "prompt"),
    ("logit_bias_id_over_vocab", C, cmpl(logit_bias={str(VOCAB + 5): 1}), 400, None),
    ("logit_bias_key_not_id", CH, chat(logit_bias={"abc": 1}), 400, "logit_bias"),
    ("logit_bias_value_range", C, cmpl(logit_bias={"5": 200}), 400, "logit_bias"),
    ("stop_token_ids_over_vocab", C, cmpl(stop_token_ids=[VOCAB * 10]), 400, None),
    ("too_many_stop_strings", C, cmpl(stop=[f"s{i}" for i in range(65)]), 400, "stop"),
    # Models, routes, methods.
    ("unknown_model", C, cmpl(model="gpt-4"), 404, None),
    ("unknown_model_chat", CH, chat(model="x" * 10_000), 404, None),
    ("unknown_model_tokenize", "/tokenize", {"model": "nope", "prompt": "x"}, 404, None),
    ("unknown_route", "/v1/embeddings", {"input": "x"}, 404, None),
    ("route_prefix_only", "/v1", cmpl(), 404, None),
    # Unsupported features: refused, not ignored.
    ("priority_without_scheduling", C, cmpl(priority=5), 400, "priority"),
    ("json_schema_unsupported_keyword", CH,
     chat(response_format={"type": "json_schema", "json_schema": {
         "name": "x", "schema": {"type": "string", "pattern": "a+"}}}),
     400, "response_format.json_schema.schema"),
    ("json_schema_unresolved_ref", CH,
     chat(response_format={"type": "json_schema", "json_schema": {
         "name": "x", "schema": {"$ref": "#/$defs/none"}}}),
     400, "response_format.json_schema.schema"),
    ("json_schema_without_schema", CH,
     chat(response_format={"type": "json_schema", "json_schema": {"name": "x"}}),
     400, "response_format.json_schema.schema"),
    ("json_schema_deep_recursion", C,
     cmpl(structured_outputs={"json": {"anyOf": [{"$ref": "#"}]}}), 400,
     "structured_outputs.json"),
    ("structured_outputs_two_kinds", C,
     cmpl(structured_outputs={"choice": ["a"], "json_object": True}), 400, "structured_outputs"),
    ("structured_outputs_empty_choice", C, cmpl(structured_outputs={"choice": []}), 400,
     "structured_outputs.choice"),
    ("structured_outputs_bad_regex", C, cmpl(structured_outputs={"regex": "(?=a)b"}), 400,
     "structured_outputs.regex"),
    ("structured_outputs_regex_huge_count", C, cmpl(structured_outputs={"regex": "a{99999}"}),
     400, "structured_outputs.regex"),
    ("structured_outputs_bad_grammar", C, cmpl(structured_outputs={"grammar": "root ::= x"}),
     400, "structured_outputs.grammar"),
    ("structured_outputs_left_recursive_grammar", CH,
     chat(structured_outputs={"grammar": 'root ::= root "a" | "a"'}), 400,
     "structured_outputs.grammar"),
    ("structured_outputs_structural_tag_empty", C,
     cmpl(structured_outputs={"structural_tag": "{}"}), 400, "structured_outputs.structural_tag"),
    ("structured_outputs_structural_tag_not_json", C,
     cmpl(structured_outputs={"structural_tag": "{\"structures\": ["}), 400,
     "structured_outputs.structural_tag"),
    ("response_format_structural_tag_no_structures", CH,
     chat(response_format={"type": "structural_tag"}), 400, "response_format"),
    ("response_format_structural_tag_bad_schema", CH,
     chat(response_format={"type": "structural_tag", "triggers": ["<"], "structures": [
         {"begin": "<", "end": ">", "schema": {"type": "integer", "minimum": 1}}]}), 400,
     "response_format"),
    ("response_format_bad_type", CH, chat(response_format={"type": "yaml"}), 400,
     "response_format.type"),
    ("beam_search_zero_beams", C, cmpl(use_beam_search=True, n=0), 400, "n"),
    ("beam_search_too_wide", CH, chat(use_beam_search=True, n=11), 400, "n"),
    ("beam_search_huge_n", C, cmpl(use_beam_search=True, n=1 << 20), 400, "n"),
    ("bad_words_blank", C, cmpl(bad_words=["the", "  "]), 400, "bad_words"),
    # The tokenizer routes.
    ("tokenize_prompt_number", "/tokenize", {"prompt": 5}, 400, None),
    ("detokenize_out_of_vocab", "/detokenize", {"tokens": [1, VOCAB]}, 400, "tokens"),
    ("detokenize_negative", "/detokenize", {"tokens": [-3]}, 400, None),
    ("detokenize_not_list", "/detokenize", {"tokens": "abc"}, 400, None),
]


@pytest.mark.parametrize("path,body,status,param", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_bad_request(engine, path, body, status, param):
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    got_status, got_body = post_bytes(engine.port, path, raw)
    check_error(got_status, got_body, status, param)
    assert_serves(engine)


def test_number_fault_messages(engine):
    """The issue's two bodies: 400s that name the field, with vLLM-like messages, and a
    number in a field the engine does not read is not echoed."""
    status, body = post_bytes(engine.port, C, b'{"prompt": "x", "max_tokens": 1e309}')
    err = check_error(status, body, 400, "max_tokens")
    assert err["message"] == "max_tokens must be a finite number."
    status, body = post_bytes(engine.port, CH, b'{"messages": [{"role": "user", "content": '
                                               b'"x"}], "seed": 18446744073709551616}')
    err = check_error(status, body, 400, "seed")
    assert err["message"] == "seed must be at most 9223372036854775807."
    status, body = post_bytes(engine.port, C, b'{"prompt": "x", "vendor_x": [1e309]}')
    err = check_error(status, body, 400)
    assert err["param"] is None and "vendor_x" not in err["message"]
    assert "not valid JSON" not in err["message"]


def test_wrong_method(engine):
    """405 with the path's methods in Allow, as the router answers."""
    for method, path, allowed in (("GET", C, "POST"), ("PUT", CH, "POST"),
                                  ("POST", "/v1/models", "GET"), ("DELETE", "/health", "GET"),
                                  ("POST", "/metrics", "GET"), ("GET", "/tokenize", "POST")):
        r = requests.request(method, engine.url + path, timeout=10)
        err = check_error(r.status_code, r.content, 405)
        assert "not allowed" in err["message"]
        assert err["message"] == f"Method {method} is not allowed on {path}; use {allowed}."
        assert r.headers["allow"] == allowed
    assert_serves(engine)


def test_unknown_route_get(engine):
    r = requests.get(engine.url + "/../../etc/passwd", timeout=10)
    check_error(r.status_code, r.content, 404)
    r = requests.get(engine.url + "/v1/models/../admin", timeout=10)
    assert r.status_code in (404, 400)
    assert_serves(engine)


def test_oversized_headers_431(engine):
    big = b"X-Big: " + b"a" * (MAX_HEADER_BYTES + 1024) + b"\r\n"
    status, body = raw_exchange(engine.port, b"GET /v1/models HTTP/1.1\r\nHost: x\r\n" + big +
                                b"\r\n")
    check_error(status, body, 431)
    # Many small headers add up the same way.
    many = b"".join(b"X-H%d: %s\r\n" % (i, b"v" * 100) for i in range(400))
    status, body = raw_exchange(engine.port, b"GET /health HTTP/1.1\r\nHost: x\r\n" + many +
                                b"\r\n")
    check_error(status, body, 431)
    assert_serves(engine)


def test_oversized_body_413(engine):
    # Decided on Content-Length, before the body is read: nothing follows the headers.
    head = (f"POST {C} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {MAX_BODY_BYTES + 1}\r\n\r\n").encode()
    status, body = raw_exchange(engine.port, head)
    check_error(status, body, 413)
    head = (f"POST {C} HTTP/1.1\r\nHost: x\r\nContent-Length: {10**15}\r\n\r\n").encode()
    check_error(*raw_exchange(engine.port, head), 413)
    # A chunked body that grows past the limit.
    chunk = b"a" * (1 << 20)
    data = (f"POST {C} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n").encode()
    data += (b"%x\r\n" % len(chunk) + chunk + b"\r\n") * 5
    check_error(*raw_exchange(engine.port, data), 413)
    # The whole body sent at once, through an ordinary client.
    r = requests.post(engine.url + C, data=b"{" + b" " * (MAX_BODY_BYTES + 10) + b"}",
                      headers={"Content-Type": "application/json"}, timeout=30)
    check_error(r.status_code, r.content, 413)
    assert_serves(engine)


def test_malformed_http(engine):
    for data in (b"NOT-HTTP\r\n\r\n",
                 b"POST /v1/completions HTTP/1.1\r\nContent-Length: abc\r\n\r\n",
                 b"POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"):
        check_error(*raw_exchange(engine.port, data), 400)
    assert_serves(engine)


def test_invalid_utf8_in_model_not_echoed(engine):
    status, body = post_bytes(engine.port, C,
                              b'{"model": "\xf0\x9f\x98", "prompt": "x", "max_tokens": 1}')
    check_error(status, body, 400)
    # An unknown but valid model name comes back escaped and bounded.
    status, body = post_bytes(engine.port, C, json.dumps(cmpl(model="<" * 5000)).encode())
    err = check_error(status, body, 404)
    assert len(err["message"]) < 1000


# --- slow clients --------------------------------------------------------------------------

def stall(port, data):
    """Sends `data` and then nothing; returns (status, body, seconds until the answer)."""
    start = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=HEADER_TIMEOUT_S + 10) as s:
        s.sendall(data)
        response = http.client.HTTPResponse(s)
        response.begin()
        return response.status, response.read(), time.monotonic() - start


@pytest.mark.parametrize("data", [
    b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n",  # headers never end
    b"GET /health HTTP/1.1\r",
    (f"POST {C} HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n").encode() + b'{"pro',
], ids=["headers", "request_line", "body"])
def test_slow_client_gets_408(engine, data):
    status, body, elapsed = stall(engine.port, data)
    check_error(status, body, 408)
    assert HEADER_TIMEOUT_S - 0.2 <= elapsed < HEADER_TIMEOUT_S + 5
    assert_serves(engine)


# --- clients that leave --------------------------------------------------------------------

@pytest.fixture(scope="module")
def slow_engine():
    """Simulated forward pass at 10 ms a step and one sequence at a time, so that requests
    are still running, or still queued, when their client leaves (or the prefix cache is
    reset: vLLM's development routes are on)."""
    with EngineServer("--backend", "sim", "--sim-latency", "zero,overhead_ms=10",
                      "--max-num-seqs", 1, "--num-gpu-blocks-override", 512,
                      env={"VLLM_SERVER_DEV_MODE": "1"}) as e:
        yield e
        e.wait_idle()


def open_stream(port, body):
    """Starts a streaming request; returns the socket after the first SSE event arrived."""
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    raw = json.dumps(body).encode()
    s.sendall((f"POST {C} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               f"Content-Length: {len(raw)}\r\n\r\n").encode() + raw)
    received = b""
    while b"data: " not in received:
        chunk = s.recv(65536)
        assert chunk, received
        received += chunk
    return s


def open_request(port, body):
    """Sends a request and returns the socket without reading anything."""
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    raw = json.dumps(body).encode()
    s.sendall((f"POST {C} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               f"Content-Length: {len(raw)}\r\n\r\n").encode() + raw)
    return s


def abort_count(engine):
    text = requests.get(f"{engine.url}/metrics", timeout=10).text
    for line in text.splitlines():
        if line.startswith("vllm:request_success_total{") and 'finished_reason="abort"' in line:
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError("no abort series in /metrics")


def wait_for(engine, predicate, what, timeout=10):
    deadline = time.monotonic() + timeout
    while True:
        m = engine.metrics()
        if predicate(m):
            return m
        assert time.monotonic() < deadline, f"timed out waiting for {what}: {m}"
        time.sleep(0.02)


LONG_RUN = {"model": MODEL_NAME, "prompt": list(range(100, 164)), "max_tokens": 1500,
            "ignore_eos": True, "temperature": 0}


def test_disconnect_mid_stream_frees_blocks(slow_engine):
    aborts = abort_count(slow_engine)
    s = open_stream(slow_engine.port, {**LONG_RUN, "stream": True})
    m = slow_engine.metrics()
    assert m["vllm:num_requests_running"] == 1
    assert m["vllm:kv_cache_usage_perc"] > 0
    s.close()
    slow_engine.wait_idle(timeout=5)
    assert abort_count(slow_engine) == aborts + 1
    assert_serves(slow_engine)


def test_disconnect_non_streaming_frees_blocks(slow_engine):
    aborts = abort_count(slow_engine)
    s = open_request(slow_engine.port, LONG_RUN)
    wait_for(slow_engine, lambda m: m["vllm:num_requests_running"] == 1, "running")
    s.close()
    slow_engine.wait_idle(timeout=5)
    assert abort_count(slow_engine) == aborts + 1


def test_disconnect_while_queued(slow_engine):
    aborts = abort_count(slow_engine)
    running = open_stream(slow_engine.port, {**LONG_RUN, "stream": True})
    queued = open_request(slow_engine.port, {**LONG_RUN, "prompt": list(range(300, 340))})
    wait_for(slow_engine, lambda m: m["vllm:num_requests_waiting"] == 1, "the queued request")
    queued.close()
    m = wait_for(slow_engine, lambda m: m["vllm:num_requests_waiting"] == 0, "the queue to empty")
    assert m["vllm:num_requests_running"] == 1  # the first one is untouched
    running.close()
    slow_engine.wait_idle(timeout=5)
    assert abort_count(slow_engine) == aborts + 2
    assert_serves(slow_engine)


def test_disconnect_fan_out(slow_engine):
    """n=4 (one running, three queued behind --max-num-seqs 1): every sequence is freed."""
    aborts = abort_count(slow_engine)
    s = open_stream(slow_engine.port, {**LONG_RUN, "n": 4, "stream": True, "temperature": 1.0})
    s.close()
    slow_engine.wait_idle(timeout=5)
    assert abort_count(slow_engine) >= aborts + 1
    assert_serves(slow_engine)


# --- the development route POST /reset_prefix_cache ---------------------------------------

def test_reset_prefix_cache_is_not_served_without_dev_mode(engine):
    r = requests.post(f"{engine.url}/reset_prefix_cache", timeout=10)
    check_error(r.status_code, r.content, 404)


def test_reset_prefix_cache_bad_query(slow_engine):
    for query, param in (("reset_running_requests=maybe", "reset_running_requests"),
                         ("reset_external=2", "reset_external"),
                         ("reset_running_requests=%zz", None)):
        r = requests.post(f"{slow_engine.url}/reset_prefix_cache?{query}", timeout=10)
        check_error(r.status_code, r.content, 400, param)
    r = requests.get(f"{slow_engine.url}/reset_prefix_cache", timeout=10)
    check_error(r.status_code, r.content, 405)
    assert r.headers["allow"] == "POST"


def test_reset_prefix_cache_while_a_request_runs(slow_engine):
    """Refused (409) while a request holds KV blocks, as vLLM refuses; with
    reset_running_requests=true the request is preempted, recomputed and still streams to
    its end; an idle engine resets at once and the next request is a miss."""
    client = openai.OpenAI(base_url=slow_engine.base_url, api_key="x", max_retries=0, timeout=60)
    prompt = list(range(500, 564))
    client.completions.create(model=MODEL_NAME, prompt=prompt, max_tokens=1)
    stream = client.completions.create(
        model=MODEL_NAME, prompt=prompt, max_tokens=300, temperature=0, stream=True,
        stream_options={"include_usage": True}, extra_body={"ignore_eos": True})
    chunks = iter(stream)
    next(chunks)  # running, holding blocks
    r = requests.post(f"{slow_engine.url}/reset_prefix_cache", timeout=10)
    err = check_error(r.status_code, r.content, 409)
    assert "in use" in err["message"]
    r = requests.post(f"{slow_engine.url}/reset_prefix_cache?reset_running_requests=true",
                      timeout=10)
    assert r.status_code == 200 and r.content == b"", r.content
    rest = list(chunks)
    assert [c.choices[0].finish_reason for c in rest if c.choices][-1] == "length"
    assert rest[-1].usage.completion_tokens == 300
    m = slow_engine.wait_idle(timeout=10)
    assert m["vllm:num_preemptions_total"] >= 1
    r = requests.post(f"{slow_engine.url}/reset_prefix_cache?reset_external=false", timeout=10)
    assert r.status_code == 200, r.text
    after = client.completions.create(model=MODEL_NAME, prompt=prompt, max_tokens=1)
    assert after.usage.prompt_tokens_details.cached_tokens == 0


def test_no_leaks_after_suite(engine):
    m = engine.wait_idle()
    assert m["vllm:num_requests_running"] == 0
    assert m["vllm:num_requests_waiting"] == 0
    assert m["vllm:kv_cache_usage_perc"] == 0
    assert_serves(engine)
    engine.wait_idle()

