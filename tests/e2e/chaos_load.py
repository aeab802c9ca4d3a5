"""Concurrent OpenAI traffic for the chaos tests (test_chaos.py), and what every request must
end with.

A Request is one call through the `openai` client (AsyncOpenAI, no client retries):
completions or chat, streamed or not, `ignore_eos` with MAX_TOKENS tokens, a unique prompt and
a unique x-request-id. The engine names its response after that id ("cmpl-ID",
"chatcmpl-ID"), so a response that belongs to another request, or that no engine made, shows.
Each request runs under a wall-clock bound (asyncio.wait_for): a hang ends as outcome "hung",
never as a blocked test.

Outcomes (Request.kind):
  ok           a full answer: finish_reason "length", usage.completion_tokens == MAX_TOKENS,
               the response id and x-request-id are the request's (a stream: every chunk's
               id, and the usage chunk that comes just before [DONE])
  clean-error  an HTTP 4xx/5xx whose body is an OpenAI error object (openai.APIStatusError),
               or, for a stream, an SSE error event (openai.APIError raised mid-stream)
  bad          anything else: a connection error, a client timeout, a stream that ended without
               its finish (cut), a JSON decode error in the client, a wrong id, a 200 with the
               wrong content: each says what it was in Request.detail
  hung         not done within the bound"""
import asyncio
import inspect
import json
import time
import uuid

import openai

from engine_server import MODEL_NAME, parse_metrics

MAX_TOKENS = 20


class Request:
    def __init__(self, i, chat, stream, tag="chaos"):
        self.i, self.chat, self.stream = i, chat, stream
        self.rid = f"{tag}-{i}-{uuid.uuid4().hex[:12]}"
        self.prompt = f"{tag} request {i} {self.rid}: tell me about switchyards."
        self.endpoint = None      # x-switchyard-endpoint of the answer
        self.status = None        # HTTP status of the head
        self.chunks = 0
        self.finish = None
        self.tokens = None
        self.kind = None          # ok | clean-error | bad | hung
        self.detail = ""
        self.error = None
        self.started = self.first_chunk = self.ended = None  # time.monotonic()

    @property
    def what(self):
        return (f"#{self.i} {self.rid} {'chat' if self.chat else 'cmpl'} "
                f"{'stream' if self.stream else 'json'} endpoint={self.endpoint} "
                f"status={self.status} chunks={self.chunks} finish={self.finish} "
                f"tokens={self.tokens} after {self.elapsed_s:.1f} s -> {self.kind}: "
                f"{self.detail}")

    @property
    def elapsed_s(self):
        if self.started is None:
            return 0.0
        return (self.ended or time.monotonic()) - self.started

    def _ids(self):
        return {f"cmpl-{self.rid}", f"chatcmpl-{self.rid}"}


def mixed(n, tag="chaos", streams_only=False):
    """n requests: completions and chat, streamed and not (every other one streamed)."""
    return [Request(i, chat=i % 4 >= 2, stream=streams_only or i % 2 == 1, tag=tag)
            for i in range(n)]


def client_for(url, timeout=60):
    return openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0,
                              timeout=timeout)


async def _call(client, r):
    kw = dict(model=MODEL_NAME, max_tokens=MAX_TOKENS, temperature=0, stream=r.stream,
              extra_headers={"x-request-id": r.rid}, extra_body={"ignore_eos": True})
    if r.chat:
        call = client.chat.completions.with_raw_response.create
        kw["messages"] = [{"role": "user", "content": r.prompt}]
    else:
        call = client.completions.with_raw_response.create
        kw["prompt"] = r.prompt
    if r.stream:
        kw["stream_options"] = {"include_usage": True}
    raw = await call(**kw)
    r.status = raw.status_code
    r.endpoint = raw.headers.get("x-switchyard-endpoint")
    echoed = raw.headers.get("x-request-id")
    out = raw.parse()  # not a coroutine in openai 3.x's async client
    if inspect.isawaitable(out):
        out = await out
    if not r.stream:
        r.finish = out.choices[0].finish_reason
        r.tokens = out.usage.completion_tokens if out.usage else None
        ids = {out.id}
    else:
        ids = set()
        async for chunk in out:
            r.first_chunk = r.first_chunk or time.monotonic()
            r.chunks += 1
            ids.add(chunk.id)
            for c in chunk.choices:
                r.finish = c.finish_reason or r.finish
            if chunk.usage is not None:
                r.tokens = chunk.usage.completion_tokens
    problems = []
    if echoed != r.rid:
        problems.append(f"x-request-id {echoed!r} is not the request's")
    if not ids <= r._ids():
        problems.append(f"response ids {sorted(ids)} are not the request's")
    if r.finish != "length" or r.tokens != MAX_TOKENS:
        problems.append("the answer ended without its finish and usage (a cut stream, or a "
                        "200 that is not a full completion)")
    return problems


def _is_openai_error_body(response):
    try:
        doc = json.loads(response.text)
    except ValueError:
        return False
    err = doc.get("error") if isinstance(doc, dict) else None
    return isinstance(err, dict) and isinstance(err.get("message"), str)


async def run_one(client, r, bound_s):
    r.started = time.monotonic()
    try:
        problems = await asyncio.wait_for(_call(client, r), bound_s)
        r.kind, r.detail = ("bad", "; ".join(problems)) if problems else ("ok", "")
    except asyncio.TimeoutError:
        r.kind, r.detail = "hung", f"no end within {bound_s} s"
    except openai.APIStatusError as e:
        r.error, r.status = e, e.status_code
        r.endpoint = r.endpoint or e.response.headers.get("x-switchyard-endpoint")
        if e.status_code >= 400 and _is_openai_error_body(e.response):
            r.kind, r.detail = "clean-error", f"{e.status_code} {e.message[:200]}"
        else:
            r.kind, r.detail = "bad", (f"{e.status_code} without an OpenAI error body: "
                                       f"{e.response.text[:200]!r}")
    except (openai.APIConnectionError, openai.APITimeoutError) as e:
        r.error = e
        r.kind, r.detail = "bad", f"{type(e).__name__}: {e} (cause: {e.__cause__!r})"
    except openai.APIError as e:
        # Raised by the client's SSE decoder for an error event: a clean end of a stream.
        r.error = e
        if r.stream and type(e) is openai.APIError:
            r.kind, r.detail = "clean-error", f"SSE error event: {e.message[:200]}"
        else:
            r.kind, r.detail = "bad", f"{type(e).__name__}: {e}"
    except Exception as e:  # noqa: BLE001 - a JSONDecodeError in the client, among others
        r.error = e
        r.kind, r.detail = "bad", f"{type(e).__name__} in the openai client: {e}"
    r.ended = time.monotonic()
    return r


async def run_all(client, requests, bound_s, concurrency=None):
    """Runs every request (at most `concurrency` at once; None: all at once)."""
    if concurrency is None:
        return await asyncio.gather(*(run_one(client, r, bound_s) for r in requests))
    gate = asyncio.Semaphore(concurrency)

    async def gated(r):
        async with gate:
            return await run_one(client, r, bound_s)

    return await asyncio.gather(*(gated(r) for r in requests))


def summary(requests):
    counts = {}
    for r in requests:
        counts[r.kind] = counts.get(r.kind, 0) + 1
    return counts


def assert_all_ok(requests, why):
    """Every request got its full answer."""
    failed = [r.what for r in requests if r.kind != "ok"]
    assert not failed, (f"{len(failed)} of {len(requests)} requests did not get a full answer "
                        f"({why}): {summary(requests)}\n  " + "\n  ".join(failed[:40]))


def assert_clean(requests, why):
    """Every request ended with a full answer or a clean error."""
    failed = [r.what for r in requests if r.kind not in ("ok", "clean-error")]
    assert not failed, (f"{len(failed)} of {len(requests)} requests ended neither with a full "
                        f"answer nor a clean error ({why}): {summary(requests)}\n  "
                        + "\n  ".join(failed[:40]))


# --- engine-side accounting ------------------------------------------------------------------

def successes(engine):
    """vllm:request_success_total over finished_reason stop and length on `engine`'s
    /metrics (an aborted request is not a success)."""
    import requests as http
    text = http.get(f"{engine.url}/metrics", timeout=5).text
    total = 0.0
    for line in text.splitlines():
        if line.startswith("vllm:request_success_total{") and (
                'finished_reason="length"' in line or 'finished_reason="stop"' in line):
            total += parse_metrics(line)["vllm:request_success_total"]
    return int(total)


def assert_served_once(engines, baseline, requests, names, timeout=10):
    """Each full answer the clients got from `engines` was made once: the engines' success
    counters rose by exactly the number of answers whose x-switchyard-endpoint is one of them
    (polled: an engine counts a request when it ends, which may come just after the client
    has its answer). `baseline`: successes(e) per engine before the load; `names`: each
    engine's name in the router."""
    want = {names[e]: sum(1 for r in requests if r.kind == "ok" and r.endpoint == names[e])
            for e in engines}
    deadline = time.monotonic() + timeout
    while True:
        got = {names[e]: successes(e) - baseline[names[e]] for e in engines}
        if got == want or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert got == want, (f"engines counted {got} successful requests, the clients got {want} "
                         f"full answers from them: a request was served twice (or an answer "
                         f"the client got was never counted)")


def assert_kv_back_to_baseline(engines, names, timeout=15):
    """Nothing runs or waits and no KV block is held on each engine (their baseline: the sim
    engines hold none when idle)."""
    for e in engines:
        try:
            e.wait_idle(timeout=timeout)
        except AssertionError as err:
            raise AssertionError(f"{names[e]}: {err}") from None
