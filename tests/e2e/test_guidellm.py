"""guidellm (the vLLM project's load generator, 0.8.1 from PyPI) as a client nobody here wrote,
against `switchyard up --sim 2` out of the box: a short synchronous benchmark over its
openai_http backend, one run per request format (chat streamed, completions not streamed),
and its own JSON report must count every request successful, none errored or incomplete.

guidellm first checks GET /health and then sends its requests on the same keep-alive
connection (issue 18: a server that leaves that connection hanging after its bodiless answer
never answers the first request; with the backend's timeout=10 used here that request errors
after 10 s; guidellm's default has no read timeout, so out of the box it waits forever).

Offline: HF_HUB_OFFLINE=1 (no hub); its tokenizer is models/tiny-llama3, the local directory
of the model `up` serves (--tokenizer kind=huggingface_auto,model=DIR: transformers'
AutoTokenizer reads its tokenizer.json); its synthetic_text data needs no download. guidellm
lives in .venv-guidellm (scripts/test.sh, tools/requirements-guidellm.txt: torch is
heavy), or where SWITCHYARD_GUIDELLM points."""
import json
import os
import pathlib
import subprocess

import pytest

from conftest import MODELS_DIR, REPO
from test_up import Up

# Needs guidellm: a peer_tools test (conftest.py).
pytestmark = pytest.mark.peer_tools

GUIDELLM = pathlib.Path(os.environ.get("SWITCHYARD_GUIDELLM",
                                       REPO / ".venv-guidellm" / "bin" / "guidellm"))
REQUESTS = 20
OUTPUT_TOKENS = 8


@pytest.fixture(scope="module")
def up():
    fleet = Up("--sim", 2)
    try:
        yield fleet
    finally:
        fleet.stop()


def run_guidellm(target, model, request_format, stream, out_json, timeout=240):
    if not GUIDELLM.exists():
        pytest.fail(f"guidellm not found at {GUIDELLM}: run scripts/test.sh "
                    f"(tools/requirements-guidellm.txt) or set SWITCHYARD_GUIDELLM")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "HF_DATASETS_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1",
           "GUIDELLM__LOGGING__CONSOLE_LOG_LEVEL": "WARNING"}
    backend = (f"kind=openai_http,target={target},model={model},"
               f"request_format={request_format},stream={str(stream).lower()},timeout=10")
    args = [str(GUIDELLM), "run", "--backend", backend,
            "--profile", "kind=synchronous",
            "--constraint", f"kind=max_requests,count={REQUESTS}",
            "--data", f"kind=synthetic_text,prompt_tokens=32,output_tokens={OUTPUT_TOKENS}",
            "--tokenizer", f"kind=huggingface_auto,model={MODELS_DIR / 'tiny-llama3'}",
            "--output", f"kind=json,path={out_json}",
            "--disable-console-interactive"]
    try:
        proc = subprocess.run(args, capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired as err:
        raise AssertionError(f"guidellm did not finish in {timeout} s: "
                             f"{(err.stdout or '')[-3000:]} {(err.stderr or '')[-3000:]}")
    log = (proc.stdout + proc.stderr)[-6000:]
    assert proc.returncode == 0, f"guidellm exited {proc.returncode}:\n{log}"
    assert out_json.exists(), f"guidellm wrote no report:\n{log}"
    return json.loads(out_json.read_text()), log


@pytest.mark.parametrize("request_format,stream", [("/v1/chat/completions", True),
                                                   ("/v1/completions", False)])
def test_guidellm_completes_every_request(up, tmp_path, request_format, stream):
    report, log = run_guidellm(up.url, up.name, request_format, stream, tmp_path / "report.json")
    benchmarks = report["benchmarks"]
    assert len(benchmarks) == 1, [b.get("config") for b in benchmarks]
    totals = benchmarks[0]["metrics"]["request_totals"]
    # Every request guidellm sent succeeded. Its max_requests constraint may stop the run one
    # request short on a slow (sanitizer) build: seen 19 sent, 19 successful, none errored.
    assert (totals["errored"] == 0 and totals["incomplete"] == 0 and
            totals["successful"] == totals["total"] >= REQUESTS - 1), (
        f"guidellm ({request_format}, stream={stream}) counted {totals} of {REQUESTS} "
        f"requests; its errors: {errors_of(benchmarks[0])}\n{log}")
    done = benchmarks[0]["requests"]["successful"]
    tokens = sorted({r["output_tokens"] for r in done})
    assert tokens == [OUTPUT_TOKENS], f"output tokens per request: {tokens}"


def errors_of(benchmark):
    """The first few errored requests' error messages from a guidellm report."""
    errored = benchmark.get("requests", {}).get("errored", [])
    return [r.get("info", {}).get("error") or r.get("error") for r in errored[:5]]
