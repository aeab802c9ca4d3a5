"""One spelling for dtypes across commands: `generate` and `engine` take vLLM's --dtype and
--kv-cache-dtype names, with f32/f16/bf16 as aliases, parsed by one function; unknown names
and the fp8 KV caches vLLM has and we do not are usage errors (exit 2) naming the accepted
values."""
import json
import re

import pytest
import requests

from conftest import MODELS_DIR
from engine_server import EngineServer

MODEL = MODELS_DIR / "tiny-llama3"  # F32 weights: the default KV cache is F32 too


def first_logits(switchyard, *flags):
    out = json.loads(switchyard("generate", "--model", MODEL, "--prompt", "Once upon a time",
                                "-n", "2", "--json", "--dump-logits", "1", *flags).stdout)
    return out["logits"][0]


@pytest.mark.parametrize("names", [("float32", "float", "f32"), ("float16", "half", "f16"),
                                   ("bfloat16", "bf16")])
def test_generate_names_are_aliases(switchyard, names):
    weights = [first_logits(switchyard, "--dtype", n) for n in names]
    assert all(w == weights[0] for w in weights)
    cache = [first_logits(switchyard, "--kv-cache-dtype", n) for n in names]
    assert all(c == cache[0] for c in cache)
    assert first_logits(switchyard, "--kv-dtype", names[-1]) == cache[0]


def test_generate_dtypes_take_effect(switchyard):
    as_stored = first_logits(switchyard)
    assert first_logits(switchyard, "--dtype", "float32") == as_stored
    assert first_logits(switchyard, "--kv-cache-dtype", "auto") == as_stored
    # Rounding the weights or the cache to 16 bits moves the logits, a little.
    for flags in (["--dtype", "half"], ["--dtype", "bfloat16"], ["--kv-cache-dtype", "half"],
                  ["--kv-cache-dtype", "bfloat16"]):
        moved = first_logits(switchyard, *flags)
        worst = max(abs(a - b) for a, b in zip(moved, as_stored))
        assert 0 < worst < 0.1, (flags, worst)


@pytest.mark.parametrize("command", ["generate", "engine"])
@pytest.mark.parametrize("flag,value,why", [
    ("--dtype", "fp16", b"--dtype must be auto, float32 (float, f32), float16 (half, f16) or "
                        b"bfloat16 (bf16), got 'fp16'"),
    ("--dtype", "fp8", b"--dtype must be"),
    ("--kv-cache-dtype", "int8", b"--kv-cache-dtype must be auto, float32"),
    ("--kv-cache-dtype", "fp8_e4m3", b"--kv-cache-dtype fp8_e4m3: an fp8 KV cache is not "
                                     b"supported; use auto, float32"),
])
def test_unknown_and_unsupported_names_are_usage_errors(switchyard, command, flag, value, why):
    args = ["--prompt", "x"] if command == "generate" else ["--port", "0"]
    proc = switchyard(command, "--model", MODEL, *args, flag, value, check=False)
    assert proc.returncode == 2, proc.stderr
    assert why in proc.stderr, proc.stderr


def cache_config_info(engine):
    text = requests.get(f"{engine.url}/metrics", timeout=5).text
    line = next(line for line in text.splitlines() if line.startswith("vllm:cache_config_info{"))
    return dict(re.findall(r'(\w+)="([^"]*)"', line))


def test_engine_takes_the_same_names():
    memory = ["--kv-cache-memory-bytes", str(1 << 20)]
    with EngineServer(*memory) as f32_cache:
        default = cache_config_info(f32_cache)
    # A 16-bit cache holds twice the blocks of an F32 one in the same memory.
    with EngineServer(*memory, "--dtype", "half", "--kv-cache-dtype", "bfloat16") as engine:
        info = cache_config_info(engine)
        r = requests.post(f"{engine.url}/v1/completions",
                          json={"model": engine.name, "prompt": "Hello", "max_tokens": 4},
                          timeout=60)
        assert r.status_code == 200, r.text
    assert default["cache_dtype"] == "auto"
    assert info["cache_dtype"] == "bfloat16"
    assert int(info["num_gpu_blocks"]) == 2 * int(default["num_gpu_blocks"])


def cpu_has_bf16_dot():
    flags = next(line for line in open("/proc/cpuinfo") if line.startswith("flags")).split()
    return all(f in flags for f in ("avx512f", "avx512bw", "avx512vl", "avx512_bf16"))


def test_bf16_matrices_are_packed_once_for_matmul():
    """Where the CPU has bf16 dot products, BF16 matrices are laid out as the GEMM's panels
    at load (the startup report counts the copies); elsewhere none are kept."""
    with EngineServer("--dtype", "bfloat16", log_level="info") as engine:
        weights = requests.get(f"{engine.url}/debug/startup", timeout=5).json()["weights"]
        r = requests.post(f"{engine.url}/v1/completions",
                          json={"model": engine.name, "prompt": "Hello", "max_tokens": 8,
                                "temperature": 0}, timeout=60)
        assert r.status_code == 200, r.text
        log = engine.log()
    if cpu_has_bf16_dot():
        # Every matrix but the (untied) embedding table, at most one panel of 32 rows
        # of padding each.
        assert 0 < weights["packed_bytes"] < weights["converted_bytes"]
        assert f"{weights['packed_bytes'] / 2**20:.1f} more packed for MatMul" in log
    else:
        assert weights["packed_bytes"] == 0
