"""Sliding-window KV memory, end to end: `switchyard engine` serving tiny-mistral-swa (window
24, blocks of 16) from a KV cache of 5 blocks. A reference prompt (83-95 tokens) plus its 64
greedy tokens needs 10 blocks at full attention; under the window a sequence holds at most
the blocks of the window and one 16-token step (4), so the engine must hand the blocks that
leave the window back to the pool. The greedy text equals transformers' (the references
tests/data/reference/ keeps, detokenized by the engine) and a large cache's, with no
preemption for requests served one at a time; two at once share the 5 blocks."""
import concurrent.futures
import json
import pathlib

import openai
import pytest
import requests

from conftest import MODELS_DIR
from engine_server import MODEL_NAME, EngineServer

REFERENCE = pathlib.Path(__file__).resolve().parents[1] / "data" / "reference"
MODEL = MODELS_DIR / "tiny-mistral-swa"
SMALL_CACHE = 5
FLAGS = ["--max-num-batched-tokens", "16", "--max-num-seqs", "4", "--threads", "2"]


def reference_prompts():
    return json.loads((REFERENCE / "tiny-mistral-swa.json").read_text())["prompts"]


@pytest.fixture(scope="module")
def small():
    with EngineServer("--num-gpu-blocks-override", SMALL_CACHE, *FLAGS, model=MODEL) as server:
        yield server
        server.wait_idle()


@pytest.fixture(scope="module")
def large():
    with EngineServer("--num-gpu-blocks-override", 256, *FLAGS, model=MODEL) as server:
        yield server
        server.wait_idle()


def greedy_text(server, ids, max_tokens):
    with openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0,
                       timeout=120) as client:
        out = client.completions.create(model=MODEL_NAME, prompt=ids, max_tokens=max_tokens,
                                        temperature=0, extra_body={"ignore_eos": True})
    choice = out.choices[0]
    assert choice.finish_reason == "length"
    assert out.usage.completion_tokens == max_tokens
    return choice.text


def detokenize(server, ids):
    response = requests.post(f"{server.url}/detokenize", json={"model": MODEL_NAME, "tokens": ids},
                             timeout=10)
    response.raise_for_status()
    return response.json()["prompt"]


def reference_text(server, prompt):
    """The text the engine writes for the reference tokens after the prompt (a token's
    leading space shows only after other text)."""
    full = detokenize(server, prompt["ids"] + prompt["f32_greedy"])
    head = detokenize(server, prompt["ids"])
    assert full.startswith(head)
    return full[len(head):]


def test_small_cache_serves_generations_longer_than_it_holds(small, large):
    for prompt in reference_prompts():
        blocks_at_full_attention = -(-(len(prompt["ids"]) + len(prompt["f32_greedy"])) // 16)
        assert blocks_at_full_attention > SMALL_CACHE
        text = greedy_text(small, prompt["ids"], len(prompt["f32_greedy"]))
        assert text == reference_text(small, prompt)
        assert text == greedy_text(large, prompt["ids"], len(prompt["f32_greedy"]))
    assert small.metrics()["vllm:num_preemptions_total"] == 0


def test_concurrent_requests_share_the_small_cache(small):
    prompts = reference_prompts()
    with concurrent.futures.ThreadPoolExecutor(len(prompts)) as pool:
        texts = list(pool.map(lambda p: greedy_text(small, p["ids"], len(p["f32_greedy"])),
                              prompts))
    for prompt, text in zip(prompts, texts):
        assert text == reference_text(small, prompt)
    small.wait_idle()


def test_full_attention_needs_the_whole_length():
    """The same cache is refused for a model without a window: its context (max_model_len
    2048 = 128 blocks) could not fit."""
    server = EngineServer("--num-gpu-blocks-override", SMALL_CACHE, *FLAGS,
                          model=MODELS_DIR / "tiny-mistral")
    with pytest.raises(AssertionError, match="needs more KV blocks"):
        server.start()


def test_interleaved_global_layers_keep_every_block():
    """tiny-gemma3 has five sliding layers (window 24) and one global layer, which reads the
    whole prefix: the engine must keep every block (dropping those that leave the window
    would feed the global layer freed blocks), and its greedy text equals transformers'."""
    model = MODELS_DIR / "tiny-gemma3"
    prompts = json.loads((REFERENCE / "tiny-gemma3.json").read_text())["prompts"]
    with EngineServer("--num-gpu-blocks-override", 256, *FLAGS, model=model) as server:
        for prompt in prompts:
            text = greedy_text(server, prompt["ids"], len(prompt["f32_greedy"]))
            assert text == reference_text(server, prompt)
        assert server.metrics()["vllm:num_preemptions_total"] == 0
        server.wait_idle()
