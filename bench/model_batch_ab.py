"""Batched decode, two binaries A/B: `switchyard generate --batch B` (model_speed_bench.py's
run_ours: the bench's 512-token prompt, 2 threads) for binary A then binary B, run by run, for
each weight format and batch size; prints median decode tok/s per sequence and in total, the
median of the per-run B/A ratios, and median prefill tok/s.

With --gguf-files, standalone GGUFs (e.g. the real SmolLM2 file) run too, on a prompt built
from their own vocabulary.

usage: .venv/bin/python bench/model_batch_ab.py --a OLD_BIN --b NEW_BIN [--runs 5] [-n 32]
           [--batches 1,4,16,32] [--formats bf16,q8_0] [--model models/bench/bench-135m]
           [--gguf-files F1,F2]
"""
import argparse
import pathlib
import statistics
import sys
import types

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import model_speed_bench as msb
ap = argparse.ArgumentParser()
ap.add_argument("--a"); ap.add_argument("--b")
ap.add_argument("--model", default=str(msb.REPO / "models/bench/bench-135m"))
ap.add_argument("--formats", default="bf16,q8_0"); ap.add_argument("--batches", default="1,4,16,32")
ap.add_argument("--runs", type=int, default=3); ap.add_argument("-n", type=int, default=64)
ap.add_argument("--gguf-files", default="", help="standalone GGUFs to A/B too")
a = ap.parse_args()
mdir = pathlib.Path(a.model)
def args_for(bin_):
    return types.SimpleNamespace(bin=bin_, n=a.n, threads=2, timeout=1800)
runs = []  # (label, gguf, prompt text)
if a.formats:
    text, ids = msb.make_prompt(mdir / "tokenizer.json")
    for fmt in a.formats.split(","):
        runs.append((f"{mdir.name} {fmt}",
                     mdir / ("model.gguf" if fmt == "bf16" else f"model-{fmt}.gguf"), text))
for f in filter(None, a.gguf_files.split(",")):
    gguf = pathlib.Path(f)
    runs.append((gguf.name, gguf, msb.gguf_prompt_and_shape(gguf)[0]))
for label, gguf, text in runs:
    for b in [int(x) for x in a.batches.split(",")]:
        ra, rb = [], []
        for _ in range(a.runs):
            ra.append(msb.run_ours(args_for(a.a), gguf, text, batch=b))
            rb.append(msb.run_ours(args_for(a.b), gguf, text, batch=b))
        da = [r["decode_tps"] for r in ra]; db = [r["decode_tps"] for r in rb]
        pa = [r["prefill_tps"] for r in ra]; pb = [r["prefill_tps"] for r in rb]
        ratio = statistics.median([y / x for x, y in zip(da, db)])
        print(f"{label} B={b}: decode/seq A {statistics.median(da):.2f} B {statistics.median(db):.2f} "
              f"(total A {statistics.median(da)*b:.1f} B {statistics.median(db)*b:.1f}) paired B/A {ratio:.3f}; "
              f"prefill A {statistics.median(pa):.0f} B {statistics.median(pb):.0f}; load {ra[-1]['load']:.1f}", flush=True)
