"""Token-id and decode parity between `switchyard tokenize` and HF `tokenizers`.

For each tokenizer, HF is loaded once and one switchyard process (batch JSONL mode) answers
every encode and decode request; the encode and decode tests read the shared result, so a
large tokenizer is loaded only once per side. Invalid UTF-8 inputs are compared against HF
on the errors="replace"-decoded text, which is switchyard's documented policy.
"""
import base64
import functools
import json
import pathlib
import random

import pytest
from tokenizers import Tokenizer

from conftest import MODELS_DIR, npm_tokenizer_dir
from tokenizer_corpus import CASES

NPM_TOKENIZERS = ["llama3", "llama3_1", "qwen3", "llama2", "gemma3", "deepseek_v3", "gptoss"]


def _tokenizer_paths():
    params = [pytest.param(npm_tokenizer_dir(n) / "tokenizer.json", id=f"npm-{n}")
              for n in NPM_TOKENIZERS]
    for path in sorted(MODELS_DIR.glob("*/tokenizer.json")):
        params.append(pytest.param(path, id=path.parent.name))
    return params


def _run_jsonl(switchyard, path, requests):
    payload = "".join(json.dumps(r) + "\n" for r in requests).encode()
    proc = switchyard("tokenize", "--model", path, "--jsonl", input=payload, timeout=600)
    # Not splitlines(): replies may hold U+2028 and other characters it also splits on.
    lines = proc.stdout.decode().split("\n")[:-1]
    assert len(lines) == len(requests), proc.stderr.decode(errors="replace")
    return [json.loads(line) for line in lines]


def _report(mismatches, what):
    shown = "\n".join(mismatches[:10])
    return f"{len(mismatches)} {what} mismatches, first ones:\n{shown}"


def _decode_sequences(hf):
    sequences = []
    for case in CASES:
        text = case.decode("utf-8", errors="replace") if isinstance(case, bytes) else case
        sequences.append(hf.encode(text, add_special_tokens=True).ids)
    # Random id sequences: arbitrary tokens, byte tokens split mid-character, added tokens.
    rng = random.Random(7)
    vocab_size = hf.get_vocab_size(with_added_tokens=True)
    added = sorted(hf.get_added_tokens_decoder())
    for _ in range(150):
        sequences.append([rng.randrange(vocab_size) for _ in range(rng.randint(0, 12))])
    for _ in range(30):
        sequences.append([rng.choice(added) if added and rng.random() < 0.3 else
                          rng.randrange(vocab_size) for _ in range(rng.randint(1, 8))])
    for seq in list(sequences[:100]):
        if len(seq) > 2:
            sequences.append(seq[1:-1])
    return sequences


@functools.lru_cache(maxsize=None)
def _parity(switchyard, path):
    """(encode mismatches, decode mismatches) of one tokenizer over the whole corpus."""
    hf = Tokenizer.from_file(str(path))
    requests, expected = [], []
    for case in CASES:
        raw = case if isinstance(case, bytes) else case.encode()
        text = raw.decode("utf-8", errors="replace")
        for add in (True, False):
            requests.append({"text_b64": base64.b64encode(raw).decode(), "add_special_tokens": add})
            expected.append(("encode", f"{text!r} add_special={add}",
                             hf.encode(text, add_special_tokens=add).ids))
    for ids in _decode_sequences(hf):
        for skip in (True, False):
            requests.append({"ids": ids, "skip_special_tokens": skip})
            expected.append(("decode", f"{ids} skip={skip}",
                             hf.decode(ids, skip_special_tokens=skip)))
    replies = _run_jsonl(switchyard, path, requests)
    mismatches = {"encode": [], "decode": []}
    for (kind, what, want), got in zip(expected, replies):
        if got.get("ids" if kind == "encode" else "text") != want:
            mismatches[kind].append(f"{what}: hf={want!r} ours={got}")
    return mismatches["encode"], mismatches["decode"]


@pytest.mark.parametrize("path", _tokenizer_paths())
def test_encode_parity(switchyard, path):
    encode_mismatches, _ = _parity(switchyard, path)
    assert not encode_mismatches, _report(encode_mismatches, "encode")


@pytest.mark.parametrize("path", _tokenizer_paths())
def test_decode_parity(switchyard, path):
    _, decode_mismatches = _parity(switchyard, path)
    assert not decode_mismatches, _report(decode_mismatches, "decode")


def _gguf_paths():
    return [pytest.param(p, id=p.parent.name) for p in sorted(MODELS_DIR.glob("*/model.gguf"))
            if (p.parent / "tokenizer.json").exists()]


@pytest.mark.parametrize("path", _gguf_paths())
def test_gguf_encode_parity(switchyard, path):
    """The tokenizer rebuilt from GGUF metadata (FromVocab) matches HF on tokenizer.json."""
    hf = Tokenizer.from_file(str(path.parent / "tokenizer.json"))
    requests, expected = [], []
    for case in CASES:
        text = case.decode("utf-8", errors="replace") if isinstance(case, bytes) else case
        for add in (True, False):
            requests.append({"text": text, "add_special_tokens": add})
            expected.append((text, add, hf.encode(text, add_special_tokens=add).ids))
    replies = _run_jsonl(switchyard, path, requests)
    mismatches = [f"{text!r} add_special={add}: hf={want} ours={got}"
                  for (text, add, want), got in zip(expected, replies) if got.get("ids") != want]
    assert not mismatches, _report(mismatches, "GGUF encode")


def _unicode16_probes():
    """One text per code point whose general-category class changed between Unicode 14.0 and
    16.0 (tools/gen_unicode_tables.py lists them), placed where pre-tokenizer regexes tell
    letters, marks, digits, punctuation and symbols apart; then the issue's examples."""
    doc = json.loads((pathlib.Path(__file__).parent / "unicode_category_changes.json").read_text())
    assert (doc["from"], doc["to"]) == ("14.0.0", "16.0.0")
    probes = []
    for first, last, _, _ in doc["runs"]:
        for cp in range(first, last + 1):
            ch = chr(cp)
            probes.append(f"a{ch}b {ch}1{ch}2 .{ch}! {ch}{ch}\n{ch}")
    probes += ["a \U0001F8B5", "a \U0001FA89", "a \U00031350", "a \u1C89", "a \U0001CCF0",
               "\U0001CCF0\U0001CCF1\U0001CCF2\U0001CCF3"]
    return probes


@pytest.mark.parametrize("path", _tokenizer_paths())
def test_unicode16_category_probes(switchyard, path):
    """Every character whose category changed in Unicode 15.0-16.0 splits as HF's does (HF's
    regex classes are Unicode 16.0)."""
    hf = Tokenizer.from_file(str(path))
    probes = _unicode16_probes()
    assert len(probes) > 10000
    expected = [e.ids for e in hf.encode_batch(probes, add_special_tokens=False)]
    replies = _run_jsonl(switchyard, path, [{"text": p, "add_special_tokens": False}
                                            for p in probes])
    mismatches = [f"U+{ord(p[1]):04X} {p!r}: hf={want} ours={got}"
                  for p, want, got in zip(probes, expected, replies) if got.get("ids") != want]
    assert not mismatches, _report(mismatches, "Unicode 16 probe")


def test_batch_mode_answers_a_bad_request_with_an_error_line(switchyard):
    """A bad request gets one {"error"} line naming the field, and the batch goes on."""
    path = MODELS_DIR / "tiny-llama3" / "tokenizer.json"
    cases = [
        ({"text": 5}, "request: text: expected a string"),
        ({"text_b64": "%%%"}, "request: text_b64: not valid base64"),
        ({}, "request: text: missing required field (or text_b64)"),
        ({"text": "hi", "add_special_tokens": "yes"},
         "request: add_special_tokens: expected a boolean"),
        ({"ids": "1"}, "request: ids: expected an array"),
        ({"ids": [1, 2.5]}, "request: ids[1]: expected an integer"),
        ({"ids": [2 ** 31]}, "request: ids[0]: out of the int32 range"),
        ({"ids": [1], "skip_special_tokens": 0},
         "request: skip_special_tokens: expected a boolean"),
    ]
    requests = [request for request, _ in cases] + [{"text": "hi"}, {"ids": []}]
    replies = _run_jsonl(switchyard, path, requests)
    for (request, message), reply in zip(cases, replies):
        assert reply == {"error": message}, request
    assert replies[-2]["ids"] and replies[-1] == {"text": ""}
    # A null flag is an absent one, as transformers reads it.
    assert _run_jsonl(switchyard, path, [{"text": "hi", "add_special_tokens": None}]) == \
        [replies[-2]]
