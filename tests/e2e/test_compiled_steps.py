"""Compiled steps (issue 24): `--compilation-config` runs the steps that fit a token bucket as
recorded step programs, the rest eagerly, and answers exactly as `--enforce-eager` does:
`switchyard generate` on every dense family and a quantized file, and `switchyard engine`
under concurrent streams through the openai client. Bad configs are refused by name; a
mixture-of-experts model says it runs eagerly."""
import concurrent.futures
import json
import os
import pty
import re
import subprocess

import openai
import pytest
import requests

from conftest import MODELS_DIR, switchyard_bin
from engine_server import EngineServer, sample, start_engines
from redis_server import RedisServer

PROMPT = "Once upon a time there was"


def generate(switchyard, model, *flags):
    proc = switchyard("generate", "--model", model, "--prompt", PROMPT, "-n", "24",
                      "--ignore-eos", "--json", "--batch", "4", "--prefill-chunk", "5",
                      "--no-compile-cache", *flags)
    return json.loads(proc.stdout)["batch_tokens"]


@pytest.mark.parametrize("model", ["tiny-llama3", "tiny-qwen2", "tiny-qwen3", "tiny-gemma3",
                                   "tiny-mistral-swa", "tiny-llama3/model-q8_0.gguf"])
def test_generate_compiled_matches_eager(switchyard, model):
    # Prefill chunks of 5 tokens run eagerly (the largest bucket is 4); the decode steps of
    # the four sequences run in the 4-token bucket.
    eager = generate(switchyard, MODELS_DIR / model, "--enforce-eager")
    compiled = generate(switchyard, MODELS_DIR / model, "--compilation-config", "{}")
    assert compiled == eager
    # One 5-token bucket: the prefill chunks fill it, the decode steps are padded into it.
    padded = generate(switchyard, MODELS_DIR / model, "--compilation-config",
                      '{"compile_sizes": [5]}')
    assert padded == eager


def run_on_a_terminal(argv):
    """Runs argv with stderr on a pseudo-terminal (stdout piped); returns (rc, stdout,
    what the terminal showed)."""
    controller, follower = pty.openpty()
    proc = subprocess.Popen([str(a) for a in argv], stdout=subprocess.PIPE, stderr=follower,
                            stdin=subprocess.DEVNULL)
    os.close(follower)
    shown = b""
    while True:
        try:
            chunk = os.read(controller, 4096)
        except OSError:  # EIO: every writer has closed the terminal
            break
        if not chunk:
            break
        shown += chunk
    os.close(controller)
    stdout = proc.stdout.read()
    return proc.wait(timeout=120), stdout, shown.decode(errors="replace")


def test_a_progress_bar_counts_the_buckets_on_a_terminal_only(switchyard):
    flags = ["generate", "--model", MODELS_DIR / "tiny-llama3", "--prompt", PROMPT, "-n", "4",
             "--batch", "4", "--no-compile-cache", "--compilation-config",
             '{"compile_sizes": [1, 2, 4]}']
    rc, _, shown = run_on_a_terminal([switchyard_bin(), *flags])
    assert rc == 0, shown
    # Redrawn in place: one line per bucket, each from a carriage return, the last ended.
    for built in (1, 2, 3):
        assert re.search(rf"\rcompiling steps \[[#-]{{20}}\] {built}/3  \d+ tokens: compiled, ",
                         shown), shown
    assert "compiling steps [####################] 3/3  4 tokens: compiled" in shown, shown
    # Piped, the same run draws nothing.
    assert b"compiling steps" not in switchyard(*flags).stderr


@pytest.mark.parametrize("config, says", [
    ('{"compile_sizes": [0]}', "compile_sizes[0]: 0 tokens"),
    ('{"level": 3}', "level: unknown key"),
    ("[1]", "expected an object"),
    ('{"compile_sizes": [1', "--compilation-config"),
])
def test_bad_compilation_configs_are_refused(switchyard, config, says):
    proc = switchyard("generate", "--model", MODELS_DIR / "tiny-llama3", "--prompt", "x",
                      "--compilation-config", config, check=False)
    assert proc.returncode != 0
    assert says.encode() in proc.stderr, proc.stderr


def test_mixture_of_experts_runs_eagerly():
    engine = EngineServer("--compilation-config", "{}", "--no-compile-cache",
                          model=MODELS_DIR / "tiny-qwen3-moe", log_level="info")
    engine.start()
    try:
        assert "every step runs eagerly" in engine.log()
        client = openai.OpenAI(base_url=engine.base_url, api_key="x")
        out = client.completions.create(model=engine.name, prompt=PROMPT, max_tokens=8)
        assert out.usage.completion_tokens == 8
    finally:
        engine.stop()


def test_engine_serves_compiled_steps_as_eager_ones(tmp_path):
    prompts = [f"{PROMPT} {i}" * (1 + i % 3) for i in range(12)]

    def answers(engine):
        client = openai.OpenAI(base_url=engine.base_url, api_key="x")

        def one(prompt):
            stream = client.completions.create(model=engine.name, prompt=prompt, max_tokens=12,
                                               temperature=0, stream=True)
            return "".join(chunk.choices[0].text for chunk in stream if chunk.choices)
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            return list(pool.map(one, prompts))

    compiled = EngineServer("--max-num-seqs", "8", "--compilation-config", "{}",
                            "--compile-cache-dir", tmp_path, log_level="info")
    eager = EngineServer("--max-num-seqs", "8", log_level="info")
    for e in (compiled, eager):
        e.start()
    try:
        assert "compiled steps of 1,2,4,8 tokens" in compiled.log()
        assert "compiled steps: none (every step eager)" in eager.log()
        assert answers(compiled) == answers(eager)
    finally:
        for e in (compiled, eager):
            e.stop()


def test_startup_report_names_the_three_caches(tmp_path):
    compiled = EngineServer("--max-num-seqs", "4", "--compilation-config", "{}",
                            "--compile-cache-dir", tmp_path, "--kv-offloading-size", "0.01",
                            log_level="info")
    sim = EngineServer("--backend", "sim", "--sim-latency", "zero")
    for e in (compiled, sim):
        e.start()
    try:
        report = requests.get(f"{compiled.url}/debug/startup", timeout=5).json()
        weights = report["weights"]
        assert weights["source"].endswith("tiny-llama3")
        assert weights["bytes"] > 0 and weights["seconds"] >= 0
        assert weights["bytes"] == (weights["mapped_bytes"] + weights["copied_bytes"]
                                    + weights["converted_bytes"])
        steps = report["compiled"]
        assert steps["mode"] == "compiled"
        assert [b["tokens"] for b in steps["buckets"]] == [1, 2, 4]
        assert all(b["source"] == "compiled" and len(b["digest"]) == 64 for b in steps["buckets"])
        assert len({b["digest"] for b in steps["buckets"]}) == 3
        # The generated kernels: built for the first bucket, shared by the others.
        assert [b["kernels"] for b in steps["buckets"]] == ["compiled", "memory", "memory"]
        assert all(b["fused_nodes"] > 0 for b in steps["buckets"])
        kv = report["kv_cache"]
        assert kv["pool_bytes"] > 0 and kv["dtype"] in ("F32", "F16", "BF16")
        assert [t["medium"] for t in kv["tiers"]] == ["GPU", "CPU"]
        assert sample(compiled.url, "switchyard:startup_compiled_buckets", source="compiled") == 3
        assert sample(compiled.url, "switchyard:startup_weights_bytes",
                      loaded="mapped") == weights["mapped_bytes"]
        assert sample(compiled.url, "switchyard:startup_weights_bytes",
                      loaded="packed") == weights["packed_bytes"]
        log = compiled.log()
        assert "engine: weights: " in log and "engine: KV cache: " in log
        assert "engine: compiled steps: 1 tokens (compiled, " in log

        # A simulated engine has no weights and no compiled steps.
        report = requests.get(f"{sim.url}/debug/startup", timeout=5).json()
        assert report["weights"] is None
        assert report["compiled"] == {"mode": "eager", "seconds": 0, "buckets": []}
    finally:
        for e in (compiled, sim):
            e.stop()


def startup_sources(engine, field="source"):
    report = requests.get(f"{engine.url}/debug/startup", timeout=5).json()
    return [b[field] for b in report["compiled"]["buckets"]]


def run_engine(*flags):
    engine = EngineServer("--max-num-seqs", "4", "--compilation-config", "{}", *flags)
    engine.start()
    try:
        return startup_sources(engine)
    finally:
        engine.stop()


def test_compiled_steps_come_from_the_host_cache_then_from_redis(switchyard, tmp_path):
    # Two engines on one host: the first measures and stores, the second loads.
    host = tmp_path / "host"
    assert run_engine("--compile-cache-dir", host) == ["compiled"] * 3
    assert run_engine("--compile-cache-dir", host) == ["host"] * 3
    listing = switchyard("cache", "ls", "--dir", host).stdout.decode()
    assert len([line for line in listing.splitlines() if "matmul_choices" in line]) == 3, listing
    # Two hosts sharing a signed Redis level: the second host's first start loads from it.
    redis = RedisServer()
    key = tmp_path / "signing.key"
    key.write_text("a-signing-key-of-32-bytes-000000")
    try:
        shared = ["--compile-cache-redis", f"127.0.0.1:{redis.port}",
                  "--compile-cache-redis-key-file", key]
        assert run_engine("--compile-cache-dir", tmp_path / "a", *shared) == ["compiled"] * 3
        assert run_engine("--compile-cache-dir", tmp_path / "b", *shared) == ["redis"] * 3
        assert run_engine("--compile-cache-dir", tmp_path / "b", *shared) == ["host"] * 3
        # Another signing key cannot read them: measured again, never loaded.
        other = tmp_path / "other.key"
        other.write_text("another-signing-key-of-32-bytes0")
        assert run_engine("--compile-cache-dir", tmp_path / "c", "--compile-cache-redis",
                          f"127.0.0.1:{redis.port}", "--compile-cache-redis-key-file",
                          other) == ["compiled"] * 3
    finally:
        redis.kill()


def test_redis_level_needs_its_key(switchyard):
    proc = switchyard("generate", "--model", MODELS_DIR / "tiny-llama3", "--prompt", "x",
                      "--compilation-config", "{}", "--compile-cache-redis", "127.0.0.1:1",
                      check=False)
    assert proc.returncode != 0
    assert b"--compile-cache-redis-key-file" in proc.stderr


def test_four_engines_started_together_compile_each_bucket_once(tmp_path):
    # One host directory, four engines from cold at once: single-flight lets one of them
    # measure each bucket while the others wait and load what it stored.
    engines = start_engines(4, "--max-num-seqs", "4", "--compilation-config", "{}",
                            "--compile-cache-dir", tmp_path)
    try:
        sources = [startup_sources(e) for e in engines]
        kernels = sorted(startup_sources(e, "kernels")[0] for e in engines)
    finally:
        for e in engines:
            e.stop()
    for bucket in range(3):
        column = sorted(s[bucket] for s in sources)
        assert column.count("compiled") == 1, sources
        assert set(column) <= {"compiled", "host"}, sources
    # The generated kernels too: one engine builds them, the others load its object.
    assert kernels == ["compiled", "host", "host", "host"], kernels
