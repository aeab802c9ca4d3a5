"""`switchyard up`: a local fleet in one process (simulated engines with --sim N, CPU engines
on the bundled tiny model by default), answering the openai client, stopped cleanly by
Ctrl-C (SIGINT)."""
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import tempfile

import openai
import pytest
import requests

from conftest import MODELS_DIR, switchyard_bin, wait_until

_ROUTER = re.compile(r"router serving (\S+) on (http://\S+:\d+)")
_ENGINE = re.compile(r"engine \d+ \((\w+)\) on (http://\S+:\d+)")
THE = 276  # " the" in tiny-llama3's vocabulary; biased by +100 it is every token sampled


class Up:
    """Runs `switchyard up --model models/tiny-llama3 --port 0 ARGS` and waits for its
    router line; `name` and `url` are the router's, `engines` lists (kind, url) as printed."""

    def __init__(self, *args, start_timeout=60, model=MODELS_DIR / "tiny-llama3"):
        self.out = tempfile.TemporaryFile("w+")
        self.proc = subprocess.Popen(
            [str(switchyard_bin()), "up", "--model", str(model), "--port", "0",
             *map(str, args)], stdout=self.out, stderr=subprocess.STDOUT)

        def ready():
            assert self.proc.poll() is None, self.text()
            return _ROUTER.search(self.text())

        m = wait_until(ready, f"the router line: {self.text()}", timeout=start_timeout)
        self.name, self.url = m.group(1), m.group(2)
        self.engines = _ENGINE.findall(self.text())
        self.client = openai.OpenAI(base_url=f"{self.url}/v1", api_key="x", timeout=30,
                                    max_retries=0)

    def text(self):
        self.out.seek(0)
        return self.out.read()

    def stop(self):
        """Ctrl-C; requires exit code 0 within 30 s and the "stopped" line."""
        self.proc.send_signal(signal.SIGINT)
        code = self.proc.wait(timeout=30)
        assert code == 0, self.text()
        assert "switchyard up: stopped" in self.text()


def child_pids(pid):
    """The processes whose parent is `pid`, from /proc."""
    children = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:  # it exited meanwhile
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:  # field 4, after "(comm)"
            children.append(int(entry))
    return children


def refuses_connections(url):
    try:
        requests.get(f"{url}/health", timeout=5)
    except requests.ConnectionError:
        return True
    return False


def test_up_serves_and_stops_on_ctrl_c():
    up = Up("--sim", 3)
    try:
        assert [kind for kind, _ in up.engines] == ["sim"] * 3 and "curl " in up.text()
        reply = up.client.chat.completions.create(
            model=up.name, messages=[{"role": "user", "content": "hello"}], max_tokens=4)
        assert reply.choices[0].finish_reason == "length"
        eps = requests.get(f"{up.url}/debug/endpoints", timeout=5).json()["endpoints"]
        assert len(eps) == 3
    finally:
        up.stop()


def test_up_cpu_engines_serve_and_stop_on_ctrl_c():
    """The default fleet: CPU engines running the tiny model's forward pass. The bias makes
    the random-weight model's text predictable: " the" for every token, to max_tokens."""
    up = Up("--engines", 2)
    try:
        assert [kind for kind, _ in up.engines] == ["cpu"] * 2
        eps = requests.get(f"{up.url}/debug/endpoints", timeout=5).json()["endpoints"]
        assert sorted(f"http://{e['address']}" for e in eps) == sorted(u for _, u in up.engines)
        bias = {str(THE): 100}
        reply = up.client.chat.completions.create(
            model=up.name, messages=[{"role": "user", "content": "hello"}], max_tokens=4,
            temperature=0, logit_bias=bias)
        assert reply.choices[0].message.content == " the" * 4
        assert reply.choices[0].finish_reason == "length"
        chunks = list(up.client.completions.create(
            model=up.name, prompt="Once upon a time", max_tokens=6, temperature=0,
            logit_bias=bias, stream=True))
        assert "".join(c.choices[0].text for c in chunks if c.choices) == " the" * 6
        assert chunks[-1].choices[0].finish_reason == "length"
        # Today the engines run inside the `up` process (this list is empty); any process it
        # starts must be gone once it has exited.
        children = child_pids(up.proc.pid)
    finally:
        up.stop()
    assert not [pid for pid in children if os.path.exists(f"/proc/{pid}")], children
    # Nothing of the fleet is left serving: the engines' and the router's ports are closed.
    for url in [u for _, u in up.engines] + [up.url]:
        assert refuses_connections(url), url


def test_up_drains_its_router_on_sigterm():
    """SIGTERM to `up` with a stream in flight: the router drains (its /health answers 503,
    new requests 503) while the stream runs to its end on the engines; then it all exits 0."""
    up = Up("--sim", 2, "--shutdown-timeout", 30)
    stream = up.client.completions.create(model=up.name, prompt="Hello", max_tokens=150,
                                          stream=True)
    first = next(iter(stream))
    assert first.choices[0].finish_reason is None
    up.proc.send_signal(signal.SIGTERM)
    wait_until(lambda: "draining" in up.text(), "the draining line")
    assert requests.get(f"{up.url}/health", timeout=5).status_code == 503
    refused = requests.post(f"{up.url}/v1/completions", timeout=5,
                            json={"model": up.name, "prompt": "x", "max_tokens": 1})
    assert refused.status_code == 503 and "retry-after" in refused.headers
    chunks = list(stream)
    assert chunks[-1].choices[0].finish_reason == "length"
    assert sum(len(c.choices) for c in chunks) + 1 >= 150
    assert up.proc.wait(timeout=30) == 0, up.text()
    assert "switchyard up: stopped" in up.text()


def test_up_gives_engines_the_kv_cache_of_a_full_context(tmp_path):
    """A context whose one sequence needs more than the fleet's 64 MiB default (here 262144
    tokens x 512 bytes of F32 K and V: 128 MiB, as a real model's full context may): each
    engine gets that much, as `model inspect` estimates it, and starts (the engine refuses a
    cache that cannot hold one max_model_len sequence). --max-model-len shortens it."""
    model = tmp_path / "long-context"
    shutil.copytree(MODELS_DIR / "tiny-llama3", model)
    config = json.loads((model / "config.json").read_text())
    config["max_position_embeddings"] = 262144
    (model / "config.json").write_text(json.dumps(config))
    inspect = subprocess.run([str(switchyard_bin()), "model", "inspect", str(model), "--json"],
                             capture_output=True, check=True)
    memory = json.loads(inspect.stdout)["memory"]
    assert memory["kv_cache_bytes"] == 128 << 20 and memory["kv_blocks"] == 16384
    for args, blocks, max_model_len in (((), 16384, 262144),
                                        (("--max-model-len", 1024), (64 << 20) // 8192, 1024)):
        up = Up("--engines", 1, *args, model=model)
        try:
            eps = requests.get(f"{up.url}/debug/endpoints", timeout=5).json()["endpoints"]
            assert eps[0]["metrics"]["num_gpu_blocks"] == blocks
            engine_url = up.engines[0][1]
            card = requests.get(f"{engine_url}/v1/models", timeout=5).json()["data"][0]
            assert card["max_model_len"] == max_model_len
            reply = up.client.completions.create(model=up.name, prompt="hello", max_tokens=2)
            assert reply.choices[0].finish_reason == "length"
        finally:
            up.stop()


def test_up_on_a_gguf_routes_by_the_engines_tokens():
    """up on a .gguf file: the router cannot read a GGUF itself (router/ may not use model/),
    so up hands it the file's tokenizer; its precise prefix scoring then sees the engines'
    tokens. One engine is warmed directly with a text prompt; the router's picks for that
    prompt must then go to it, predicting its blocks cached. Probes are requests the engine
    refuses (temperature -1), so they cache nothing themselves."""
    up = Up("--engines", 2, model=MODELS_DIR / "tiny-llama3" / "model.gguf")
    try:
        prompt = " ".join(f"switch {i} of the yard" for i in range(12))  # several blocks
        _, warm_url = up.engines[1]
        requests.post(f"{warm_url}/v1/completions", timeout=30, json={
            "model": up.name, "prompt": prompt, "max_tokens": 1}).raise_for_status()

        def routed_to_warm():
            before = predicted(up.url)
            r = requests.post(f"{up.url}/v1/completions", timeout=30, json={
                "model": up.name, "prompt": prompt, "max_tokens": 1, "temperature": -1})
            assert r.status_code == 400, r.text
            return (f"http://{r.headers['x-switchyard-endpoint']}" == warm_url and
                    predicted(up.url) - before >= 32)

        wait_until(routed_to_warm, "the router to pick the warmed engine")
    finally:
        up.stop()


def predicted(url):
    """The router's switchyard_router_prefix_predicted_cached_tokens_total."""
    text = requests.get(f"{url}/metrics", timeout=5).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("switchyard_router_prefix_predicted_cached_tokens_total"))


def test_up_passes_tool_flags_to_its_engines():
    """--enable-auto-tool-choice and --tool-call-parser reach every engine: "auto" is served
    (a 400 without them) and the llama3_json call the output is constrained to comes back as
    tool_calls through the router."""
    up = Up("--engines", 1, "--enable-auto-tool-choice", "--tool-call-parser", "llama3_json")
    try:
        schema = {"type": "object", "properties": {
            "name": {"enum": ["f"]}, "parameters": {"type": "object", "properties": {}}},
            "required": ["name", "parameters"]}
        reply = up.client.chat.completions.create(
            model=up.name, messages=[{"role": "user", "content": "hello"}], max_tokens=30,
            temperature=0, tools=[{"type": "function", "function": {"name": "f"}}],
            tool_choice="auto", response_format={
                "type": "json_schema", "json_schema": {"name": "call", "schema": schema}})
        (call,) = reply.choices[0].message.tool_calls
        assert call.function.name == "f" and call.function.arguments == "{}"
        assert reply.choices[0].finish_reason == "tool_calls"
    finally:
        up.stop()


def test_up_with_the_example_tenants_and_flow_control():
    """The README's two-tenant example: keys name tenants, an unknown key is 401, flow control
    is on (/debug/flows), and batch work is team-b's only objective."""
    example = pathlib.Path(__file__).resolve().parents[2] / "examples" / "two-tenants.yaml"
    up = Up("--sim", 2, "--tenants", example, "--flow-control")
    try:
        for key in ("sk-team-a-example", "sk-team-b-example"):
            client = openai.OpenAI(base_url=f"{up.url}/v1", api_key=key, max_retries=0)
            reply = client.completions.create(model=up.name, prompt="hi", max_tokens=2)
            assert reply.usage.completion_tokens == 2
        with pytest.raises(openai.AuthenticationError):
            up.client.completions.create(model=up.name, prompt="hi", max_tokens=2)
        team_b = openai.OpenAI(base_url=f"{up.url}/v1", api_key="sk-team-b-example",
                               max_retries=0)
        with pytest.raises(openai.PermissionDeniedError):
            team_b.completions.create(model=up.name, prompt="hi", max_tokens=2,
                                      extra_headers={"x-llm-d-inference-objective": "interactive"})
        flows = requests.get(f"{up.url}/debug/flows", timeout=5).json()
        assert flows["enabled"] and flows["dispatched_total"] == 2
    finally:
        up.stop()
