#!/usr/bin/env python3
"""Reference outputs for the forward-pass parity tests (tests/e2e/test_forward_parity.py).

Runs Hugging Face transformers (torch, CPU) on every bundled tiny model and writes, per model,
tests/data/reference/<model>.json (prompts, ids, greedy continuations, top-2 margins) and
tests/data/reference/<model>.npz (logits, float32):

  f32_logits / bf16_logits  [prompts, steps + 1, vocab]: the logits at the last prompt position
      and after each of the first `steps` greedy tokens (teacher-forced with the f32 greedy
      tokens, so both dtypes see the same inputs).
  f32 greedy: model.generate(do_sample=False, max_new_tokens=64) with EOS disabled, so every run
      produces 64 tokens; `f32_margins` is the top-1 minus top-2 logit at each greedy step, so a
      test can tell a real mismatch from a near tie.
  bf16 greedy: the same on model.to(torch.bfloat16).

With --llamacpp, llama-cpp-python (when importable) adds the llama.cpp logits and greedy tokens
for model-q8_0.gguf under "llamacpp_q8_0"; without the package it says so and skips that part.
tiny-mistral-swa gets none: llama.cpp's `llama` architecture ignores `attention.sliding_window`
(its `gemma3` one applies it, so tiny-gemma3 gets one). For models with a window the script
first checks that transformers applies it (check_window_applied).

torch is not in the main venv: use the reference venv (tools/requirements-reference.txt):
  .venv-ref/bin/python tools/gen_reference_outputs.py
"""
import argparse
import json
import pathlib
import sys

import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[1]
MODELS = ["tiny-llama3", "tiny-qwen2", "tiny-qwen3", "tiny-mistral", "tiny-mistral-swa",
          "tiny-gemma3", "tiny-qwen3-moe"]
NEW_TOKENS = 64
STEPS = 4  # decode positions whose logits are kept, after the prompt's last position

# Long enough (40-100 tokens with the tiny tokenizers) that a 16-token prefill chunk needs
# several chunks.
PROMPTS = [
    "The switchyard sorts freight cars onto tracks by destination. Each morning the crew checks "
    "the signals, oils the points and writes the schedule on the board by the station door.",
    "def fib(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\n\n"
    "print([fib(i) for i in range(12)])  # 0 1 1 2 3 5 8 13",
]


def margins_of(scores):
    out = []
    for s in scores:
        top = np.sort(s[0].float().numpy())[-2:]
        out.append(float(top[1] - top[0]))
    return out


def run_torch(model_dir, dtype_name, prompt_ids, teacher_tokens):
    import torch
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32,
                                                 attn_implementation="eager")
    if dtype_name == "bf16":
        model = model.to(torch.bfloat16)
    model.eval()
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    results = []
    for i, ids in enumerate(prompt_ids):
        x = torch.tensor([ids], dtype=torch.long)
        with torch.no_grad():
            gen = model.generate(x, attention_mask=torch.ones_like(x), do_sample=False,
                                 max_new_tokens=NEW_TOKENS, min_new_tokens=0, num_beams=1,
                                 output_scores=True, return_dict_in_generate=True,
                                 temperature=None, top_p=None, top_k=None,
                                 repetition_penalty=None)
        greedy = gen.sequences[0, len(ids):].tolist()
        forced = teacher_tokens[i] if teacher_tokens is not None else greedy
        full = torch.tensor([ids + forced[:STEPS]], dtype=torch.long)
        with torch.no_grad():
            logits = model(full).logits[0].float().numpy()
        rows = logits[len(ids) - 1:len(ids) + STEPS]
        results.append({"greedy": greedy, "margins": margins_of(gen.scores), "logits": rows})
    return results


def check_window_applied(model_dir, ids):
    """Fails unless transformers (eager) really applies the config's sliding window W: the
    logits must equal those of the same weights without a window at positions < W, where
    every token still sees the whole prefix, and differ from them past W."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(model_dir)
    window = config.sliding_window
    rows = []
    # A window as long as the prompt is no window (Gemma 3's cache cannot take None).
    for w in (window, len(ids)):
        config.sliding_window = w
        model = AutoModelForCausalLM.from_pretrained(model_dir, config=config,
                                                     dtype=torch.float32,
                                                     attn_implementation="eager")
        with torch.no_grad():
            rows.append(model(torch.tensor([ids], dtype=torch.long)).logits[0].numpy())
    inside = np.abs(rows[0][:window] - rows[1][:window]).max()
    past = np.abs(rows[0][window:] - rows[1][window:]).max(axis=-1)
    if inside > 1e-6 or past.min() <= 1e-4:
        raise SystemExit(f"{model_dir}: sliding window {window} not applied as expected: "
                         f"max |diff| inside {inside:.2e}, min row diff past it {past.min():.2e}")
    print(f"{model_dir.name}: window {window} applied (inside max |diff| {inside:.1e}, past it "
          f"min row diff {past.min():.1e})")


def run_llamacpp(gguf_path, prompt_ids):
    try:
        from llama_cpp import Llama
    except ImportError:
        print("llama-cpp-python is not importable: skipping llama.cpp references", file=sys.stderr)
        return None
    llm = Llama(model_path=str(gguf_path), n_ctx=512, n_batch=512, logits_all=True, verbose=False,
                seed=0)
    results = []
    for ids in prompt_ids:
        llm.reset()
        llm.eval(ids)
        first = np.array(llm.scores[len(ids) - 1], dtype=np.float32)
        greedy = []
        for _ in range(NEW_TOKENS):
            tok = int(np.argmax(llm.scores[llm.n_tokens - 1]))
            greedy.append(tok)
            llm.eval([tok])
        results.append({"greedy": greedy, "logits": first})
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default=str(REPO / "models"))
    parser.add_argument("--out", default=str(REPO / "tests" / "data" / "reference"))
    parser.add_argument("--only", nargs="*", default=MODELS)
    parser.add_argument("--llamacpp", action="store_true",
                        help="also record llama.cpp outputs for model-q8_0.gguf")
    args = parser.parse_args()

    import torch
    import transformers
    from transformers import AutoConfig, AutoTokenizer

    torch.set_num_threads(1)
    out_dir = pathlib.Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in args.only:
        model_dir = pathlib.Path(args.models) / name
        tok = AutoTokenizer.from_pretrained(model_dir)
        prompt_ids = [tok(p, add_special_tokens=True)["input_ids"] for p in PROMPTS]
        config = AutoConfig.from_pretrained(model_dir)
        windowed = bool(config.sliding_window)
        # llama.cpp's `llama` architecture (Mistral's GGUF) ignores the window; gemma3 has it.
        llamacpp_windowless = windowed and config.model_type == "mistral"
        if windowed:
            check_window_applied(model_dir, prompt_ids[0])
        f32 = run_torch(model_dir, "f32", prompt_ids, None)
        teacher = [r["greedy"] for r in f32]
        bf16 = run_torch(model_dir, "bf16", prompt_ids, teacher)
        meta = {
            "model": name,
            "generator": "tools/gen_reference_outputs.py",
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "new_tokens": NEW_TOKENS,
            "steps": STEPS,
            "prompts": [{
                "text": text,
                "ids": ids,
                "f32_greedy": f["greedy"],
                "f32_margins": [round(m, 6) for m in f["margins"]],
                "bf16_greedy": b["greedy"],
            } for text, ids, f, b in zip(PROMPTS, prompt_ids, f32, bf16)],
        }
        arrays = {
            "f32_logits": np.stack([r["logits"] for r in f32]).astype(np.float32),
            "bf16_logits": np.stack([r["logits"] for r in bf16]).astype(np.float32),
        }
        if args.llamacpp and llamacpp_windowless:
            print(f"{name}: no llama.cpp reference: its llama architecture ignores the sliding "
                  "window", file=sys.stderr)
        elif args.llamacpp:
            lc = run_llamacpp(model_dir / "model-q8_0.gguf", prompt_ids)
            if lc is not None:
                meta["llamacpp_q8_0"] = [{"greedy": r["greedy"]} for r in lc]
                arrays["llamacpp_q8_0_logits"] = np.stack([r["logits"] for r in lc])
        (out_dir / f"{name}.json").write_text(json.dumps(meta, indent=1) + "\n")
        np.savez(out_dir / f"{name}.npz", **arrays)
        lens = [len(i) for i in prompt_ids]
        print(f"{name}: prompt tokens {lens}, min f32 margin "
              f"{min(min(f['margins']) for f in f32):.2e}")


if __name__ == "__main__":
    main()
