"""Sixteen simulated engines (`--backend sim`) on one machine at once, as fleet tests run
them: each answers several concurrent requests, the same prompt gives the same text on every
engine (the simulated forward pass is deterministic), and every engine exits cleanly."""
import concurrent.futures

import pytest
import requests

from engine_server import MODEL_NAME, EngineServer

NUM_ENGINES = 16
PROMPTS = ["The yard", "Switch the points to track four", "1 2 3 4 5 6 7 8"]


def ask(engine, kind, prompt, **fields):
    body = {"model": MODEL_NAME, "max_tokens": 12, "temperature": 0, "ignore_eos": True, **fields}
    if kind == "chat":
        body["messages"] = [{"role": "user", "content": prompt}]
        path = "/v1/chat/completions"
    else:
        body["prompt"] = prompt
        path = "/v1/completions"
    r = requests.post(engine.url + path, json=body, timeout=60)
    assert r.status_code == 200, r.text
    choice = r.json()["choices"][0]
    assert choice["finish_reason"] == "length"
    return choice["message"]["content"] if kind == "chat" else choice["text"]


@pytest.fixture(scope="module")
def fleet():
    # Alternate two latency settings: none, and a small one.
    engines = [EngineServer("--backend", "sim", "--sim-latency",
                            "zero" if i % 2 == 0 else "zero,overhead_ms=1,decode_ms_per_seq=0.2",
                            "--http-threads", 1)
               for i in range(NUM_ENGINES)]
    try:
        for e in engines:
            e.spawn()
        for e in engines:
            e.wait_ready()
        yield engines
    finally:
        # SIGTERM to all first, then each must exit 0.
        errors = []
        for stop in [e.terminate for e in engines] + [e.stop for e in engines]:
            try:
                stop()
            except AssertionError as err:
                errors.append(str(err))
        assert not errors, errors


def test_sixteen_engines_agree(fleet):
    assert len({e.port for e in fleet}) == NUM_ENGINES
    jobs = [(e, kind, p, extra) for e in fleet for p in PROMPTS for kind in ("cmpl", "chat")
            for extra in ({}, {"temperature": 1.0, "seed": 7})]
    with concurrent.futures.ThreadPoolExecutor(max_workers=32) as pool:
        texts = list(pool.map(lambda job: ask(job[0], job[1], job[2], **job[3]), jobs))
    answers = {}
    for (engine, kind, prompt, extra), text in zip(jobs, texts):
        answers.setdefault((kind, prompt, bool(extra)), {})[engine.port] = text
    for key, by_engine in answers.items():
        assert len(by_engine) == NUM_ENGINES
        assert len(set(by_engine.values())) == 1, (key, by_engine)
    # Different prompts give different text.
    greedy = {answers[("cmpl", p, False)][fleet[0].port] for p in PROMPTS}
    assert len(greedy) == len(PROMPTS)
    for e in fleet:
        m = e.wait_idle()
        assert m["vllm:num_requests_running"] == 0


def test_prompt_logprobs_are_deterministic(fleet):
    """The simulated logits give each row one chosen token (logit 20, others 0): prompt
    logprobs rank it first at every position, and every engine gives the same ones."""
    body = {"model": MODEL_NAME, "prompt": PROMPTS[1], "max_tokens": 1, "ignore_eos": True,
            "prompt_logprobs": 1}
    got = [requests.post(e.url + "/v1/completions", json=body, timeout=60).json()
           for e in fleet[:2]]
    plp = got[0]["choices"][0]["prompt_logprobs"]
    assert plp == got[1]["choices"][0]["prompt_logprobs"]
    assert plp[0] is None and len(plp) == got[0]["usage"]["prompt_tokens"]
    for entry in plp[1:]:
        for value in entry.values():
            # exp(20) outweighs the rest of the vocabulary: ~0 for the chosen, ~-20 otherwise.
            if value["rank"] == 1:
                assert value["logprob"] > -0.01
            else:
                assert -20.01 < value["logprob"] < -19.99
