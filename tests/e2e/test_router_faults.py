"""The router facing upstreams that fail, through the real openai client: an engine that dies
mid-event (a clean APIError, never a JSONDecodeError), a JSON answer to a stream that dies
(a JSON error, not SSE in a JSON body), a stream without [DONE] (a failure in the metrics), no
healthy endpoint (503 with Retry-After, not 429), upstreams that answer garbage or resets or
500s while their /metrics scrape fine (outlier detection ejects them), a request queued
longer than the first-byte timeout in a healthy upstream (served, not dropped), a queued
stream kept alive by keep-alive comments (which the client does not see), one whose engine
dies after them (retried), and a SIGSTOPped engine with a request in flight (retried
elsewhere within seconds)."""
import signal
import threading
import time

import openai
import pytest
import requests

from engine_server import MODEL_NAME, EngineServer
from fault_upstream import FaultUpstream
from peer_servers import free_port
from router_server import Router, member_name, metric_sum


def client_of(router, timeout=30):
    # No client retries: each call is one request through the router.
    return openai.OpenAI(base_url=f"{router.url}/v1", api_key="x", timeout=timeout,
                         max_retries=0)


@pytest.fixture(scope="module")
def engine():
    e = EngineServer("--backend", "sim", "--sim-latency", "zero")
    e.start()
    yield e
    e.stop()


def test_an_engine_dying_mid_event_gives_an_api_error():
    with FaultUpstream("cut-stream") as dying:
        router = Router([dying])
        try:
            with pytest.raises(openai.APIError) as raised:
                for _ in client_of(router).completions.create(
                        model=MODEL_NAME, prompt="hi", max_tokens=4, stream=True):
                    pass
            assert member_name(dying) in str(raised.value)
            text = router.metrics()
            assert metric_sum(text, "switchyard_router_requests_total", code="error") == 1
            assert metric_sum(text, "switchyard_router_requests_total", code="200") == 0
        finally:
            router.stop()


def test_a_stream_without_done_is_a_failure():
    with FaultUpstream("no-done") as cut:
        router = Router([cut])
        try:
            with pytest.raises(openai.APIError):
                for _ in client_of(router).completions.create(
                        model=MODEL_NAME, prompt="hi", max_tokens=4, stream=True):
                    pass
            text = router.metrics()
            assert metric_sum(text, "switchyard_router_requests_total", code="error") == 1
            assert metric_sum(text, "switchyard_router_requests_total", code="200") == 0
        finally:
            router.stop()


def test_a_json_answer_to_a_stream_that_dies_is_a_json_error():
    with FaultUpstream("json-for-stream") as dying:
        router = Router([dying])
        try:
            r = requests.post(f"{router.url}/v1/completions", timeout=30,
                              json={"model": MODEL_NAME, "prompt": "hi", "stream": True})
            assert r.status_code == 503, r.text
            assert r.headers["content-type"] == "application/json"
            assert "data:" not in r.text
            assert r.json()["error"]["code"] == 503
        finally:
            router.stop()


def test_no_healthy_endpoint_is_503_with_retry_after_not_429():
    class Nothing:  # a member nobody listens on
        engine_kind = "vllm"
        port = free_port()

    router = Router([Nothing()], wait_fresh=[])
    try:
        deadline = time.monotonic() + 10
        while any(e["healthy"] for e in router.endpoints()):
            assert time.monotonic() < deadline, router.endpoints()
            time.sleep(0.05)
        with pytest.raises(openai.APIStatusError) as raised:
            client_of(router).completions.create(model=MODEL_NAME, prompt="hi", max_tokens=2)
        assert not isinstance(raised.value, openai.RateLimitError)
        assert raised.value.status_code == 503
        assert raised.value.response.headers["retry-after"] == "1"
        assert raised.value.body["type"] == "ServiceUnavailableError"
    finally:
        router.stop()


@pytest.mark.parametrize("mode", ["garbage", "reset", "http500"])
def test_an_upstream_failing_every_request_is_ejected(engine, mode):
    """It scrapes fine and looks idle, so without outlier detection it would take (about)
    every first attempt; after five failures in a row it is out for 30 s."""
    with FaultUpstream(mode) as bad:
        router = Router([bad, engine])
        try:
            client = client_of(router)
            served = 0
            for i in range(40):
                try:
                    client.completions.create(model=MODEL_NAME, prompt=f"p{i}", max_tokens=2)
                    served += 1
                except openai.InternalServerError:
                    assert mode == "http500"  # a 500 is not retried: the client sees it
            assert bad.hits == 5
            assert served == 40 - (5 if mode == "http500" else 0)
            text = router.metrics()
            name = member_name(bad)
            assert metric_sum(text, "switchyard_router_endpoint_ejections_total",
                              endpoint=name) == 1
            assert metric_sum(text, "switchyard_router_endpoint_ejected", endpoint=name) == 1
            assert metric_sum(text, "switchyard_router_endpoint_healthy", endpoint=name) == 1
            debug = {e["name"]: e for e in router.endpoints()}
            assert debug[name]["outlier"]["ejected"] is True
            assert debug[name]["outlier"]["ejected_for_s"] > 20
            assert debug[member_name(engine)]["outlier"]["ejected"] is False
        finally:
            router.stop()


def test_a_request_queued_past_the_first_byte_timeout_is_served():
    """A healthy upstream that holds a non-streamed request for 3 s (as a busy engine's queue
    does) with a 1 s first-byte timeout: the wait is the request timeout's, not a liveness
    check, so the request is neither dropped nor sent again."""
    with FaultUpstream("slow", delay=3.0) as busy:
        router = Router([busy], extra="proxy: {firstByteTimeoutMs: 1000}\n")
        try:
            out = client_of(router).completions.create(model=MODEL_NAME, prompt="hi",
                                                       max_tokens=2)
            assert out.choices[0].text == "late"
            assert busy.hits == 1
            assert metric_sum(router.metrics(), "switchyard_router_upstream_retries_total") == 0
        finally:
            router.stop()


def test_keepalive_comments_keep_a_queued_stream_alive_and_stay_in_the_router():
    """A stream queued for 3 s behind a 1 s idle timeout: the keep-alive comments reset it
    (the engine is alive), and the client sees only the events."""
    with FaultUpstream("keepalive-then-stream", delay=3.0) as queued:
        router = Router([queued], extra="proxy: {idleTimeoutMs: 1000}\n")
        try:
            r = requests.post(f"{router.url}/v1/completions", timeout=30, stream=True,
                              json={"model": MODEL_NAME, "prompt": "hi", "stream": True})
            assert r.status_code == 200
            body = r.content.decode()
            assert "keep-alive" not in body
            assert body.endswith("data: [DONE]\n\n") and '"queued"' in body
            assert queued.hits == 1
            assert metric_sum(router.metrics(), "switchyard_router_upstream_retries_total") == 0
        finally:
            router.stop()


def test_a_queued_stream_whose_engine_dies_after_keepalives_is_retried(engine):
    """Keep-alive comments before the first event are not passed on: the client has nothing
    yet, so the router retries on the engine."""
    with FaultUpstream("keepalive-then-close") as dying:
        # Both look idle: ties go either way, so the dying one is picked for some of them.
        router = Router([dying, engine])
        try:
            client = client_of(router)
            for i in range(20):
                chunks = list(client.completions.create(model=MODEL_NAME, prompt=f"q{i}",
                                                        max_tokens=3, stream=True))
                assert chunks[-1].choices[0].finish_reason == "length"
            assert dying.hits >= 1
            assert metric_sum(router.metrics(), "switchyard_router_upstream_retries_total",
                              endpoint=member_name(dying)) == dying.hits
        finally:
            router.stop()


@pytest.mark.parametrize("stream", [False, True])
def test_a_request_on_a_frozen_engine_is_retried_elsewhere(stream):
    """SIGSTOP the engine a request is waiting on (in its prefill: nothing has reached the
    client): once the router's scrapes of it fail (about 3 s), the request is cancelled there
    and served by the other engine, well before any timeout. Then SIGCONT: the frozen engine
    finds the request gone."""
    slow = "zero,prefill_us_per_token=16000"  # a 300-token prompt: ~5 s to its first token
    prompt = [5] * 300
    engines = [EngineServer("--backend", "sim", "--sim-latency", slow) for _ in range(2)]
    for e in engines:
        e.start()
    router = Router(engines)
    frozen = None
    try:
        result = {}

        def call():
            client = client_of(router, timeout=40)
            start = time.monotonic()
            if stream:
                raw = client.completions.with_raw_response.create(
                    model=MODEL_NAME, prompt=prompt, max_tokens=8, stream=True)
                result["endpoint"] = raw.headers["x-switchyard-endpoint"]
                result["chunks"] = list(raw.parse())
            else:
                raw = client.completions.with_raw_response.create(
                    model=MODEL_NAME, prompt=prompt, max_tokens=8)
                result["endpoint"] = raw.headers["x-switchyard-endpoint"]
                result["completion"] = raw.parse()
            result["seconds"] = time.monotonic() - start

        thread = threading.Thread(target=call)
        thread.start()
        # Where the request went: the endpoint with one request in flight.
        deadline = time.monotonic() + 10
        while frozen is None:
            busy = [e["name"] for e in router.endpoints() if e["active_requests"] > 0]
            if busy:
                frozen = next(e for e in engines if member_name(e) == busy[0])
            assert time.monotonic() < deadline
            time.sleep(0.01)
        frozen.proc.send_signal(signal.SIGSTOP)
        stopped_at = time.monotonic()
        thread.join(timeout=40)
        assert not thread.is_alive()
        other = next(e for e in engines if e is not frozen)
        assert result["endpoint"] == member_name(other)
        if stream:
            assert result["chunks"][-1].choices[0].finish_reason is not None
        else:
            assert result["completion"].usage.completion_tokens > 0
        # About 3.3 s to notice the frozen engine, then the prefill on the other one (~5 s);
        # the old router waited for its 60 s timeout.
        assert time.monotonic() - stopped_at < 20
        text = router.metrics()
        assert metric_sum(text, "switchyard_router_upstream_retries_total",
                          endpoint=member_name(frozen), reason="unhealthy") == 1
    finally:
        if frozen is not None:
            frozen.proc.send_signal(signal.SIGCONT)
        router.stop()
        for e in engines:
            e.stop()
