#!/usr/bin/env python3
"""Model execution speed: `switchyard generate` vs llama.cpp (llama-cpp-python), side by side.

For each bench model (models/bench/bench-135m, bench-1b; make them with
`.venv/bin/python tools/gen_models.py --out models --only bench-135m|bench-1b`) and each
weight format (bf16: model.gguf and the HF directory; q8_0 and the other quantized types:
model-<format>.gguf), and each standalone GGUF named by --gguf-files (a real model, e.g. the
SmolLM2-135M-Instruct Q4_1 that scripts fetch into .cache/models/: its prompt comes from its
own vocabulary), it runs, in one invocation and alternating run by run:
  - llama.cpp: llama_cpp.Llama(model_path=gguf, n_threads=T, n_threads_batch=T, n_batch=512,
    n_ubatch=512, n_ctx=2048), in a fresh worker process under the llama.cpp venv
    (.venv-ref). Prefill: one eval() of the prompt ids; decode: N-1 single-token eval()s,
    greedy (numpy argmax of the last logits), EOS ignored. Timed by wall clock around the
    eval calls (so sampling is included, as it is in ours) and also by llama.cpp's own
    counters (llama_perf_context: t_p_eval_ms / t_eval_ms, sampling excluded); the ratio
    uses the faster of the two, i.e. the stricter comparison for us.
  - ours: `switchyard generate --model M --prompt TEXT -n N --threads T --ignore-eos
    --prefill-chunk 512` (a fresh process too), which runs the engine loop a server runs
    (EngineCore: scheduler, KV cache manager, sampler, detokenizer over the model runner); it
    prints prefill and decode tokens/s on stderr, timed inside the process from the request's
    submission to its updates (model load excluded on both sides). Both sides see the same
    512 prompt ids (checked) and generate N tokens: the first from the prefill's logits (one
    forward step of the whole prompt), then N-1 decode steps.
Reports medians of --runs runs and ours/llama.cpp (above 1.0: we are faster), and the median
of the per-run ratios (run i of ours over run i of llama.cpp, which ran just before it), the
steadier figure when the machine's load drifts during an invocation.

Decode roofline, same invocation: read bandwidth from bench/sy_bench_runtime_matmul's
BM_StreamRead (all cores sum a 512 MiB array; median of 5, measured before and after the
model runs), bytes read per decoded token = every weight tensor as stored in the file
(a tied embedding is read whole as lm_head; plus one embedding row) + the KV cache read by
attention at the mean decode context (F16 K/V on both sides), the implied ceiling
bandwidth / bytes and each side's percentage of it.

Batch scaling (--batch-sizes 1,4,16,32): needs `switchyard generate --batch B` (one request
with n = B: B copies of the prompt as B sequences, decoded together, B tokens per step; the
stderr "decode: M tokens" counts all sequences' tokens), run with --prefill-chunk B x 512 so
that all B prompts are prefilled in the first step and every later step is a decode step.
Reported per sequence: M / B / seconds.

usage: .venv/bin/python bench/model_speed_bench.py [--bin PATH] [--threads 2] [--runs 3]
           [--models bench-135m,bench-1b] [--formats bf16,q8_0] [-n 64]
           [--batch-sizes 1,4,16,32] [--json-out FILE]
"""
import argparse
import json
import os
import pathlib
import re
import statistics
import subprocess
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
PROMPT_TOKENS = 512
OUR_KV_BYTES = 2  # LlamaModelOptions' default KV dtype for bf16/Q8_0 weights is F16
LLAMACPP_KV_BYTES = 2  # llama.cpp's default cache type is F16

# Plain English words that are single tokens after a space in the Llama-3 vocabulary, so the
# prompt's token count is easy to pin at exactly PROMPT_TOKENS.
WORDS = ("the model reads every weight once per token and the cache grows with each step "
         "while the scheduler keeps many requests in flight so that memory bandwidth stays "
         "busy and the answer arrives on time for the user who asked a simple question about "
         "rivers mountains cities music history science and the weather of next week").split()


# ---------------------------------------------------------------- llama.cpp worker (.venv-ref)

def llamacpp_worker(args):
    """One fresh-process llama.cpp run; prints one JSON object on stdout."""
    import numpy as np
    import llama_cpp

    ids = json.loads(pathlib.Path(args.worker_ids).read_text())
    llm = llama_cpp.Llama(model_path=args.worker_gguf, n_threads=args.threads,
                          n_threads_batch=args.threads, n_batch=512, n_ubatch=512, n_ctx=2048,
                          verbose=False)
    own_ids = llm.tokenize(args.worker_text.encode("utf-8"), add_bos=False, special=False)
    ctx = llm._ctx.ctx
    perf = getattr(llama_cpp, "llama_perf_context", None)
    if perf is not None:
        llama_cpp.llama_perf_context_reset(ctx)
    n_vocab = llm.n_vocab()

    def last_argmax():
        row = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx, -1), shape=(n_vocab,))
        return int(np.argmax(row))

    llm.reset()
    t0 = time.perf_counter()
    llm.eval(ids)
    token = last_argmax()
    t1 = time.perf_counter()
    generated = [token]
    for _ in range(args.n - 1):
        llm.eval([token])
        token = last_argmax()
        generated.append(token)
    t2 = time.perf_counter()
    out = {
        "prompt_tokens": len(ids),
        "own_tokenization_matches": list(own_ids) == list(ids),
        "decode_steps": args.n - 1,
        "prefill_ms_wall": (t1 - t0) * 1e3,
        "decode_ms_wall": (t2 - t1) * 1e3,
        "tokens": generated,
        "llama_cpp_version": getattr(llama_cpp, "__version__", "?"),
        "system_info": llama_cpp.llama_print_system_info().decode("utf-8", "replace"),
    }
    if perf is not None:
        data = perf(ctx)
        out.update(prefill_ms_internal=data.t_p_eval_ms, prefill_n_internal=data.n_p_eval,
                   decode_ms_internal=data.t_eval_ms, decode_n_internal=data.n_eval)
    print(json.dumps(out))


# ---------------------------------------------------------------- driver (.venv)

def load_avg():
    return os.getloadavg()


def make_prompt(tokenizer_json):
    """Text of exactly PROMPT_TOKENS tokens (no BOS: the bench models add none) and its ids."""
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(tokenizer_json))
    words = [WORDS[(i * 7) % len(WORDS)] for i in range(PROMPT_TOKENS + 64)]
    text = "Once upon a time " + " ".join(words)
    enc = tok.encode(text, add_special_tokens=False)
    text = text[:enc.offsets[PROMPT_TOKENS - 1][1]]
    ids = tok.encode(text, add_special_tokens=False).ids
    if len(ids) != PROMPT_TOKENS:
        sys.exit(f"prompt is {len(ids)} tokens, wanted {PROMPT_TOKENS}")
    return text, ids


def weight_bytes(gguf_path):
    """Bytes of weights read per decoded token, from the GGUF's tensor table."""
    from gguf import GGUFReader
    reader = GGUFReader(str(gguf_path))
    names = {t.name: t for t in reader.tensors}
    total = sum(int(t.n_bytes) for t in reader.tensors)
    embd = names["token_embd.weight"]
    rows = int(embd.shape[-1])
    total += int(embd.n_bytes) // rows  # the embedding row looked up, besides lm_head
    return total


def gguf_prompt_and_shape(path):
    """For a standalone GGUF (a real model, no HF directory): a prompt of exactly
    PROMPT_TOKENS tokens in its own vocabulary (llama-cpp-python's tokenizer, vocab only),
    its ids, KV elements per context token, and its file type's name (e.g. Q4_1)."""
    import llama_cpp
    from gguf import GGUFReader, LlamaFileType
    llm = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
    words = [WORDS[(i * 7) % len(WORDS)] for i in range(2 * PROMPT_TOKENS)]
    ids = llm.tokenize(("Once upon a time " + " ".join(words)).encode(), add_bos=False,
                       special=False)[:PROMPT_TOKENS]
    text = llm.detokenize(ids).decode("utf-8")
    if llm.tokenize(text.encode(), add_bos=False, special=False) != ids:
        sys.exit(f"{path}: the prompt does not round-trip through its tokenizer")
    fields = GGUFReader(str(path)).fields
    def value(key):
        f = fields[key]
        return f.parts[f.data[0]][0]
    arch = bytes(fields["general.architecture"].parts[-1]).decode()
    heads = int(value(f"{arch}.attention.head_count"))
    head_dim = int(value(f"{arch}.embedding_length")) // heads
    kv_tok = int(value(f"{arch}.block_count")) * 2 * int(value(f"{arch}.attention.head_count_kv")) * head_dim
    fmt = LlamaFileType(int(value("general.file_type"))).name.removeprefix("MOSTLY_")
    return text, ids, kv_tok, fmt


def kv_bytes_per_context_token(config):
    heads = config["num_attention_heads"]
    head_dim = config.get("head_dim") or config["hidden_size"] // heads
    return config["num_hidden_layers"] * 2 * config["num_key_value_heads"] * head_dim


def stream_bandwidth(bench_bin):
    """Median BM_StreamRead bytes/s of 5 repetitions, or None without the binary."""
    if not bench_bin.exists():
        return None
    out = subprocess.run([str(bench_bin), "--benchmark_filter=BM_StreamRead",
                          "--benchmark_repetitions=5", "--benchmark_format=json"],
                         check=True, capture_output=True, text=True).stdout
    rates = [b["bytes_per_second"] for b in json.loads(out)["benchmarks"]
             if b.get("run_type") == "iteration"]
    return statistics.median(rates)


GEN_RE = re.compile(r"prefill: (\d+) tokens in ([\d.]+) ms \([\d.]+ tok/s\); "
                    r"decode: (\d+) tokens in ([\d.]+) ms")


def run_ours(args, model, text, batch=None):
    # A step budget that holds every sequence's prompt: prefill is one step, decode the rest.
    cmd = [str(args.bin), "generate", "--model", str(model), "--prompt", text,
           "-n", str(args.n), "--threads", str(args.threads), "--ignore-eos",
           "--prefill-chunk", str(PROMPT_TOKENS * (batch or 1))]
    if batch is not None:
        cmd += ["--batch", str(batch)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:3])}... failed: {proc.stderr.strip()[-500:]}")
    found = GEN_RE.findall(proc.stderr)
    if not found:
        raise RuntimeError(f"no throughput line in: {proc.stderr[-500:]}")
    p_tokens, p_ms, d_tokens, d_ms = found[-1]
    if int(p_tokens) != PROMPT_TOKENS * (batch or 1):
        raise RuntimeError(f"{model}: prompt ran as {p_tokens} tokens, not {PROMPT_TOKENS}")
    return {"prefill_tps": int(p_tokens) / float(p_ms) * 1e3,
            "decode_tps": int(d_tokens) / float(d_ms) * 1e3 / (batch or 1),
            "decode_steps": int(d_tokens) // (batch or 1), "load": load_avg()[0]}


def run_llamacpp(args, gguf, text, ids_file, wait_policy):
    env = dict(os.environ, OMP_WAIT_POLICY=wait_policy)
    cmd = [str(args.llamacpp_python), str(pathlib.Path(__file__).resolve()), "--llamacpp-worker",
           "--worker-gguf", str(gguf), "--worker-ids", str(ids_file), "--worker-text", text,
           "--threads", str(args.threads), "-n", str(args.n)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"llama.cpp worker failed: {proc.stderr.strip()[-800:]}")
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    res = {"prefill_tps_wall": PROMPT_TOKENS / r["prefill_ms_wall"] * 1e3,
           "decode_tps_wall": r["decode_steps"] / r["decode_ms_wall"] * 1e3,
           "own_tokenization_matches": r["own_tokenization_matches"],
           "version": r["llama_cpp_version"], "system_info": r["system_info"],
           "load": load_avg()[0]}
    if "prefill_ms_internal" in r and r["prefill_ms_internal"] > 0:
        res["prefill_tps_internal"] = r["prefill_n_internal"] / r["prefill_ms_internal"] * 1e3
        res["decode_tps_internal"] = r["decode_n_internal"] / r["decode_ms_internal"] * 1e3
    res["prefill_tps"] = max(res["prefill_tps_wall"], res.get("prefill_tps_internal", 0))
    res["decode_tps"] = max(res["decode_tps_wall"], res.get("decode_tps_internal", 0))
    return res


def best_llamacpp(row, key):
    """Highest median over the OpenMP wait policies tried, and that policy."""
    found = [(median(runs, key), p) for p, runs in row["llamacpp"].items()]
    return max(found) if found else (float("nan"), "-")


def paired_ratios(row, runs, key):
    """ours / llama.cpp per run (llama.cpp at the better wait policy of that run): runs i of
    both sides ran back to back, so their ratio sees the same machine load."""
    ratios = []
    for i, ours in enumerate(runs):
        peers = [r[i][key] for r in row["llamacpp"].values() if i < len(r) and key in r[i]]
        if peers and key in ours:
            ratios.append(ours[key] / max(peers))
    return ratios


def median(runs, key):
    vals = [r[key] for r in runs if key in r]
    return statistics.median(vals) if vals else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", type=pathlib.Path, default=REPO / "build/bench-rel/src/cli/switchyard")
    ap.add_argument("--stream-bin", type=pathlib.Path,
                    default=REPO / "build/bench-rel/bench/sy_bench_runtime_matmul")
    ap.add_argument("--llamacpp-python", type=pathlib.Path, default=REPO / ".venv-ref/bin/python")
    ap.add_argument("--models-dir", type=pathlib.Path, default=REPO / "models/bench")
    ap.add_argument("--models", default="bench-135m,bench-1b")
    ap.add_argument("--formats", default="bf16,q8_0",
                    help="bench model files: bf16 (model.gguf) or model-<format>.gguf, e.g. q4_k")
    ap.add_argument("--gguf-files", default="",
                    help="standalone GGUFs to run too, e.g. .cache/models/SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("-n", type=int, default=64, help="tokens generated per run")
    ap.add_argument("--batch-sizes", default="",
                    help="e.g. 1,4,16,32: our per-sequence decode tok/s (needs generate --batch)")
    ap.add_argument("--skip-llamacpp", action="store_true")
    ap.add_argument("--omp-wait-policies", default="active,passive",
                    help="OMP_WAIT_POLICY values to run llama.cpp under; it is compared at its best")
    ap.add_argument("--skip-ours", action="store_true")
    ap.add_argument("--no-hf", action="store_true", help="bf16: skip our HF-directory run")
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--json-out", type=pathlib.Path)
    ap.add_argument("--llamacpp-worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--worker-gguf", help=argparse.SUPPRESS)
    ap.add_argument("--worker-ids", help=argparse.SUPPRESS)
    ap.add_argument("--worker-text", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.llamacpp_worker:
        return llamacpp_worker(args)

    print(f"threads {args.threads}, runs {args.runs}, prompt {PROMPT_TOKENS} tokens, "
          f"{args.n} generated ({args.n - 1} decode steps); load avg at start "
          f"{'/'.join(f'{x:.1f}' for x in load_avg())}", flush=True)
    bw_before = stream_bandwidth(args.stream_bin)
    results = {"threads": args.threads, "runs": args.runs, "n": args.n, "rows": [],
               "batch": [], "load_start": load_avg()}
    ids_file = pathlib.Path("/tmp") / f"sy_speed_bench_ids_{os.getpid()}.json"
    jobs = []  # (model name, [(format, gguf, HF dir or None)], prompt text, ids, KV bytes/token)
    for name in [m for m in args.models.split(",") if m]:
        mdir = args.models_dir / name
        config = json.loads((mdir / "config.json").read_text())
        text, ids = make_prompt(mdir / "tokenizer.json")
        forms = [(fmt, mdir / ("model.gguf" if fmt == "bf16" else f"model-{fmt}.gguf"),
                  mdir if fmt == "bf16" and not args.no_hf else None)
                 for fmt in args.formats.split(",")]
        jobs.append((name, forms, text, ids, kv_bytes_per_context_token(config)))
    for path in [pathlib.Path(p) for p in args.gguf_files.split(",") if p]:
        text, ids, kv_tok, fmt = gguf_prompt_and_shape(path)
        jobs.append((path.stem, [(fmt, path, None)], text, ids, kv_tok))
    for name, forms, text, ids, kv_per_token in jobs:
        ids_file.write_text(json.dumps(ids))
        for fmt, gguf, hf_dir in forms:
            ours_forms = [("gguf", gguf)]
            if hf_dir is not None:
                ours_forms.append(("hf", hf_dir))
            policies = [] if args.skip_llamacpp else args.omp_wait_policies.split(",")
            lc_runs = {p: [] for p in policies}
            our_runs = {form: [] for form, _ in ours_forms}
            for run in range(args.runs):
                for policy in policies:
                    r = run_llamacpp(args, gguf, text, ids_file, policy)
                    lc_runs[policy].append(r)
                    print(f"  {name} {fmt} run {run} llama.cpp[OMP {policy}]: "
                          f"{r['prefill_tps']:.1f} / {r['decode_tps']:.2f} tok/s (load "
                          f"{r['load']:.1f})", flush=True)
                if not args.skip_ours:
                    for form, path in ours_forms:
                        our_runs[form].append(run_ours(args, path, text))
                        print(f"  {name} {fmt} run {run} ours[{form}]: "
                              f"{our_runs[form][-1]['prefill_tps']:.1f} / "
                              f"{our_runs[form][-1]['decode_tps']:.2f} tok/s (load "
                              f"{our_runs[form][-1]['load']:.1f})", flush=True)
            wbytes = weight_bytes(gguf)
            mean_ctx = PROMPT_TOKENS + (args.n - 1) / 2
            kv_tok = kv_per_token * mean_ctx
            row = {"model": name, "format": fmt, "gguf": str(gguf),
                   "weight_bytes_per_token": wbytes,
                   "our_bytes_per_token": wbytes + kv_tok * OUR_KV_BYTES,
                   "llamacpp_bytes_per_token": wbytes + kv_tok * LLAMACPP_KV_BYTES,
                   "llamacpp": lc_runs, "ours": our_runs}
            if policies:
                first = lc_runs[policies[0]][0]
                row["llamacpp_version"] = first["version"]
                row["llamacpp_system_info"] = first["system_info"]
                row["llamacpp_own_tokenization_matches"] = first["own_tokenization_matches"]
            results["rows"].append(row)
        for b in [int(x) for x in args.batch_sizes.split(",") if x]:
            for fmt, gguf, _ in forms:
                runs = [run_ours(args, gguf, text, batch=b) for _ in range(args.runs)]
                results["batch"].append({"model": name, "format": fmt, "batch": b,
                                         "decode_tps_per_seq": median(runs, "decode_tps"),
                                         "runs": runs})
                print(f"  {name} {fmt} batch {b}: {results['batch'][-1]['decode_tps_per_seq']:.2f}"
                      f" tok/s per sequence", flush=True)
    ids_file.unlink(missing_ok=True)
    bw_after = stream_bandwidth(args.stream_bin)
    bws = [b for b in (bw_before, bw_after) if b]
    results["bandwidth_bytes_per_s"] = {"before": bw_before, "after": bw_after}
    results["load_end"] = load_avg()
    bw = max(bws) if bws else None
    report(results, bw)
    if args.json_out:
        args.json_out.write_text(json.dumps(results, indent=1))


def report(results, bw):
    print()
    b = results["bandwidth_bytes_per_s"]
    fmt_bw = lambda x: f"{x / 1e9:.1f} GB/s" if x else "n/a"  # noqa: E731
    print(f"read bandwidth (BM_StreamRead, median of 5): before {fmt_bw(b['before'])}, "
          f"after {fmt_bw(b['after'])}; roofline uses the higher")
    print(f"load avg: start {'/'.join(f'{x:.1f}' for x in results['load_start'])}, "
          f"end {'/'.join(f'{x:.1f}' for x in results['load_end'])}")
    print()
    print("| model | weights | llama.cpp prefill tok/s | ours prefill tok/s | ratio "
          "| llama.cpp decode tok/s | ours decode tok/s | ratio |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for row in results["rows"]:
        lp, ld = best_llamacpp(row, "prefill_tps")[0], best_llamacpp(row, "decode_tps")[0]
        for form, runs in (row["ours"].items() or [("gguf", [])]):
            op, od = median(runs, "prefill_tps"), median(runs, "decode_tps")
            label = f"{row['format']} ({'GGUF' if form == 'gguf' else 'HF safetensors'})"
            print(f"| {row['model']} | {label} | {lp:.1f} | {op:.1f} | {op / lp:.2f}x "
                  f"| {ld:.2f} | {od:.2f} | {od / ld:.2f}x |")
    print()
    print("Paired ratios (each run's ours / the same run's llama.cpp at its better policy): "
          "median [min, max]")
    for row in results["rows"]:
        for form, runs in row["ours"].items():
            parts = []
            for key in ("prefill_tps", "decode_tps"):
                r = paired_ratios(row, runs, key)
                if r:
                    parts.append(f"{key.split('_')[0]} {statistics.median(r):.2f}x "
                                 f"[{min(r):.2f}, {max(r):.2f}]")
            print(f"  {row['model']} {row['format']} {form}: {'; '.join(parts)}")
    print()
    print("llama.cpp medians by OMP_WAIT_POLICY (prefill / decode tok/s):")
    for row in results["rows"]:
        parts = [f"{p}: {median(r, 'prefill_tps'):.1f} / {median(r, 'decode_tps'):.2f}"
                 for p, r in row["llamacpp"].items()]
        print(f"  {row['model']} {row['format']}: {'; '.join(parts)}")
    print()
    print("| model | weights | weight MB/token | KV MB/token (ours / llama.cpp) "
          "| ceiling tok/s (ours / llama.cpp) | ours % of ceiling | llama.cpp % of ceiling |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for row in results["rows"]:
        w = row["weight_bytes_per_token"]
        ob, lb = row["our_bytes_per_token"], row["llamacpp_bytes_per_token"]
        ld = best_llamacpp(row, "decode_tps")[0]
        od = median(row["ours"].get("gguf", []), "decode_tps")
        if bw:
            oc, lc = bw / ob, bw / lb
            print(f"| {row['model']} | {row['format']} (GGUF) | {w / 1e6:.1f} "
                  f"| {(ob - w) / 1e6:.1f} / {(lb - w) / 1e6:.1f} | {oc:.1f} / {lc:.1f} "
                  f"| {100 * od / oc:.0f}% | {100 * ld / lc:.0f}% |")
    if results["batch"]:
        print()
        print("| model | weights | batch | ours decode tok/s per sequence | total tok/s |")
        print("| --- | --- | ---: | ---: | ---: |")
        for r in results["batch"]:
            print(f"| {r['model']} | {r['format']} | {r['batch']} | {r['decode_tps_per_seq']:.2f} "
                  f"| {r['decode_tps_per_seq'] * r['batch']:.1f} |")
    for row in results["rows"]:
        if "llamacpp_version" in row:
            print(f"\nllama-cpp-python {row['llamacpp_version']}; its tokenization of the prompt "
                  f"matches: {row['llamacpp_own_tokenization_matches']}\n"
                  f"{row['llamacpp_system_info']}")
            break


if __name__ == "__main__":
    sys.exit(main())
