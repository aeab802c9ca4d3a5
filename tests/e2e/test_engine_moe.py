"""The mixture-of-experts model served end to end: `switchyard engine` on tiny-qwen3-moe (8
experts, 2 per token) answers both parity prompts at once, so prefill chunks and decode
tokens of two sequences share each step's expert GEMMs, and each greedy text equals
transformers' (tests/data/reference/, detokenized by the engine). The comparison stops
before a reference token past the tokenizer's 1008 tokens (an embedding padding row, which
transformers' argmax may pick but no tokenizer can turn into text)."""
import concurrent.futures
import json
import pathlib

import openai
import requests

from tokenizers import Tokenizer

from conftest import MODELS_DIR
from engine_server import MODEL_NAME, EngineServer

REFERENCE = pathlib.Path(__file__).resolve().parents[1] / "data" / "reference"
MODEL = MODELS_DIR / "tiny-qwen3-moe"


def greedy_text(server, ids, max_tokens):
    with openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0,
                       timeout=120) as client:
        out = client.completions.create(model=MODEL_NAME, prompt=ids, max_tokens=max_tokens,
                                        temperature=0, extra_body={"ignore_eos": True, "repetition_penalty": 1.0})
    assert out.usage.completion_tokens == max_tokens
    return out.choices[0].text


def detokenize(server, ids):
    response = requests.post(f"{server.url}/detokenize", json={"model": MODEL_NAME, "tokens": ids},
                             timeout=10)
    assert response.ok, response.text
    return response.json()["prompt"]


def test_concurrent_requests_match_transformers():
    prompts = json.loads((REFERENCE / "tiny-qwen3-moe.json").read_text())["prompts"]
    vocab = Tokenizer.from_file(str(MODEL / "tokenizer.json")).get_vocab_size()
    for prompt in prompts:
        greedy = prompt["f32_greedy"]
        prompt["expected"] = greedy[:next((i for i, t in enumerate(greedy) if t >= vocab),
                                          len(greedy))]
    assert all(len(p["expected"]) >= 16 for p in prompts)
    with EngineServer("--max-num-batched-tokens", "24", "--max-num-seqs", "4", "--threads", "2",
                      model=MODEL) as server:
        with concurrent.futures.ThreadPoolExecutor(len(prompts)) as pool:
            texts = list(pool.map(
                lambda p: greedy_text(server, p["ids"], len(p["expected"])), prompts))
        for prompt, text in zip(prompts, texts):
            head = detokenize(server, prompt["ids"])
            full = detokenize(server, prompt["ids"] + prompt["expected"])
            assert text == full[len(head):]
        server.wait_idle()
