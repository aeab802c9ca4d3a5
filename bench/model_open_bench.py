#!/usr/bin/env python3
"""Time to open and validate a ~500 MB safetensors checkpoint and its GGUF twin.

Generates (in a temp dir, never the repo) a Llama-shaped model directory with one
model.safetensors of about --mb megabytes, and a GGUF file holding the same tensors, then
times, warm page cache, median of --runs runs:

  switchyard  `switchyard model inspect --json` (process start, mmap, full header/offset
              validation, config, summary) on the directory and on the .gguf
  peers       Python safetensors `safe_open` listing every tensor's dtype and shape, and
              gguf-py `GGUFReader` (parses metadata and tensor infos, memory maps data),
              each as a fresh `python -c` process like ours, and also in-process

and prints each median with the ratio peer / switchyard (above 1: switchyard is faster).
Usage: .venv/bin/python bench/model_open_bench.py [--bin PATH] [--mb 500] [--runs 5]
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

import numpy as np
from gguf import GGUFReader, GGUFWriter
from safetensors import safe_open
from safetensors.numpy import save_file

REPO = pathlib.Path(__file__).resolve().parents[1]
HIDDEN = 1024


def make_tensors(total_mb):
    """Llama-like layer tensors in F32 until about total_mb megabytes."""
    rng = np.random.default_rng(0)
    tensors = {"model.embed_tokens.weight": rng.standard_normal((8192, HIDDEN), np.float32)}
    size = tensors["model.embed_tokens.weight"].nbytes
    layer = 0
    while size < total_mb * 1e6:
        for name, shape in (("self_attn.q_proj", (HIDDEN, HIDDEN)),
                            ("self_attn.k_proj", (HIDDEN // 4, HIDDEN)),
                            ("self_attn.v_proj", (HIDDEN // 4, HIDDEN)),
                            ("self_attn.o_proj", (HIDDEN, HIDDEN)),
                            ("mlp.gate_proj", (2816, HIDDEN)),
                            ("mlp.up_proj", (2816, HIDDEN)),
                            ("mlp.down_proj", (HIDDEN, 2816))):
            t = rng.standard_normal(shape, np.float32)
            tensors[f"model.layers.{layer}.{name}.weight"] = t
            size += t.nbytes
        for norm in ("input_layernorm", "post_attention_layernorm"):
            tensors[f"model.layers.{layer}.{norm}.weight"] = np.ones(HIDDEN, np.float32)
        layer += 1
    tensors["model.norm.weight"] = np.ones(HIDDEN, np.float32)
    return tensors, layer


def write_files(out, tensors, layers):
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
              "hidden_size": HIDDEN, "intermediate_size": 2816, "num_hidden_layers": layers,
              "num_attention_heads": 16, "num_key_value_heads": 4, "vocab_size": 8192,
              "max_position_embeddings": 4096, "rms_norm_eps": 1e-5,
              "tie_word_embeddings": True}
    (out / "config.json").write_text(json.dumps(config))
    save_file(tensors, str(out / "model.safetensors"))
    writer = GGUFWriter(str(out / "model.gguf"), "llama")
    writer.add_context_length(4096)
    writer.add_embedding_length(HIDDEN)
    writer.add_block_count(layers)
    writer.add_feed_forward_length(2816)
    writer.add_head_count(16)
    writer.add_head_count_kv(4)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(8192)
    for name, t in tensors.items():
        writer.add_tensor(name, t)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def median_seconds(fn, runs):
    fn()  # warm the page cache and imports
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", default=os.environ.get(
        "SWITCHYARD_BIN", str(REPO / "build/dev/src/cli/switchyard")))
    parser.add_argument("--mb", type=float, default=500)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="sy_model_bench_") as tmp:
        out = pathlib.Path(tmp)
        tensors, layers = make_tensors(args.mb)
        write_files(out, tensors, layers)
        del tensors
        st_mb = (out / "model.safetensors").stat().st_size / 1e6
        gguf_mb = (out / "model.gguf").stat().st_size / 1e6

        def ours(path):
            return lambda: subprocess.run([args.bin, "model", "inspect", "--json", str(path)],
                                          check=True, capture_output=True)

        def peer_safetensors():
            with safe_open(str(out / "model.safetensors"), framework="numpy") as f:
                for key in f.keys():
                    sl = f.get_slice(key)
                    sl.get_dtype(), sl.get_shape()

        def peer_gguf():
            reader = GGUFReader(str(out / "model.gguf"))
            for t in reader.tensors:
                t.shape, t.tensor_type

        def peer_process(code):
            return lambda: subprocess.run([sys.executable, "-c", code], check=True)

        st_code = (f"from safetensors import safe_open\n"
                   f"with safe_open({str(out / 'model.safetensors')!r}, framework='numpy') as f:\n"
                   f"    [(f.get_slice(k).get_dtype(), f.get_slice(k).get_shape()) for k in f.keys()]")
        gguf_code = (f"from gguf import GGUFReader\n"
                     f"r = GGUFReader({str(out / 'model.gguf')!r})\n"
                     f"[(t.shape, t.tensor_type) for t in r.tensors]")

        rows = [
            ("safetensors", st_mb, median_seconds(ours(out), args.runs),
             "safetensors.safe_open, own process", median_seconds(peer_process(st_code), args.runs),
             median_seconds(peer_safetensors, args.runs)),
            ("gguf", gguf_mb, median_seconds(ours(out / "model.gguf"), args.runs),
             "gguf.GGUFReader, own process", median_seconds(peer_process(gguf_code), args.runs),
             median_seconds(peer_gguf, args.runs)),
        ]
        print(f"{layers} layers of F32; warm page cache; median of {args.runs} runs. Both sides "
              f"run as a fresh process (start-up and imports included); the last column is the "
              f"peer inside an already-running interpreter.")
        print(f"{'format':12} {'MB':>7} {'switchyard ms':>14} {'peer':36} {'peer ms':>9} "
              f"{'peer/ours':>9} {'peer in-process ms':>19}")
        for fmt, mb, ours_s, peer, peer_s, peer_inproc_s in rows:
            print(f"{fmt:12} {mb:7.1f} {ours_s * 1e3:14.2f} {peer:36} {peer_s * 1e3:9.2f} "
                  f"{peer_s / ours_s:9.2f} {peer_inproc_s * 1e3:19.2f}")


if __name__ == "__main__":
    main()
