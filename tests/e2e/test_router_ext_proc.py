"""The router's Endpoint Picker Protocol (Envoy ext_proc over gRPC), driven by a client built
from Envoy's own protocol definitions (PyPI xds-protos' generated classes over grpcio), with
simulated engines behind the router: the pick comes back as the
x-gateway-destination-endpoint header mutation and envoy.lb dynamic metadata naming a real
engine, the request body comes back byte-identical in chunks of at most 62,000 bytes, the
response passes through, prefix-aware picks agree with the HTTP front's, a cancelled stream
leaves no request in flight, no endpoint is a 429 (as llm-d's EPP), a body that is not JSON
a 400, and the gRPC health service says SERVING."""
import concurrent.futures
import json
import queue
import re
import signal
import socket
import time

import grpc
import pytest
import requests
from envoy.config.core.v3 import base_pb2
from envoy.service.ext_proc.v3 import external_processor_pb2 as ep
from envoy.service.ext_proc.v3 import external_processor_pb2_grpc as ep_grpc

from engine_server import MODEL_NAME, EngineServer, start_engines
from router_server import Router

_PORTS = re.compile(r"ext_proc on \S+:(\d+), gRPC health on \S+:(\d+)")
DESTINATION = "x-gateway-destination-endpoint"
MAX_CHUNK = 62_000


def grpc_ports(router):
    m = _PORTS.search(router.output())
    assert m, router.output()
    return int(m.group(1)), int(m.group(2))


def headers_message(path="/v1/completions", end_of_stream=False, extra=()):
    pairs = [(":method", "POST"), (":path", path), (":authority", "gateway"),
             (":scheme", "http"), ("content-type", "application/json"), *extra]
    header_map = base_pb2.HeaderMap(
        headers=[base_pb2.HeaderValue(key=k, raw_value=v.encode()) for k, v in pairs])
    return ep.ProcessingRequest(
        request_headers=ep.HttpHeaders(headers=header_map, end_of_stream=end_of_stream))


def body_messages(body, pieces):
    """`body` in `pieces` request_body messages, end_of_stream on the last."""
    step = max(1, -(-len(body) // pieces))
    cuts = [body[i:i + step] for i in range(0, len(body), step)] or [b""]
    return [ep.ProcessingRequest(request_body=ep.HttpBody(body=c, end_of_stream=i == len(cuts) - 1))
            for i, c in enumerate(cuts)]


class Stream:
    """One Process stream: send() messages, next() answers, close() half-closes, cancel()."""

    def __init__(self, port, channel=None):
        """`channel`: one to share (cancel() then leaves it open)."""
        self.own_channel = channel is None
        self.channel = channel or grpc.insecure_channel(f"127.0.0.1:{port}")
        self.outbox = queue.Queue()
        self.responses = ep_grpc.ExternalProcessorStub(self.channel).Process(self._messages())

    def _messages(self):
        while (m := self.outbox.get()) is not None:
            yield m

    def send(self, *messages):
        for m in messages:
            self.outbox.put(m)

    def next(self):
        return next(self.responses)

    def close(self):
        self.outbox.put(None)

    def cancel(self):
        self.responses.cancel()
        self.outbox.put(None)  # ends grpcio's request-iterator thread, else left waiting
        if self.own_channel:
            self.channel.close()


def completion_body(prompt, **extra):
    return json.dumps({"model": MODEL_NAME, "prompt": prompt, "max_tokens": 2, **extra}).encode()


def pick(port, body, pieces=3, path="/v1/completions", channel=None):
    """Sends a whole request; returns (stream, first answer, body chunks answered)."""
    s = Stream(port, channel)
    s.send(headers_message(path), *body_messages(body, pieces))
    first = s.next()
    chunks = []
    if first.HasField("request_headers"):
        while True:
            r = s.next()
            assert r.HasField("request_body"), r
            streamed = r.request_body.response.body_mutation.streamed_response
            chunks.append(streamed)
            if streamed.end_of_stream:
                break
    return s, first, chunks


def destination(first):
    mutation = first.request_headers.response.header_mutation
    values = {h.header.key: h.header.raw_value.decode() for h in mutation.set_headers}
    return values[DESTINATION], values


def in_flight(router, name):
    return next(e for e in router.endpoints() if e["name"] == name)["active_requests"]


def wait_in_flight(router, name, want, timeout=10):
    deadline = time.monotonic() + timeout
    while in_flight(router, name) != want:
        assert time.monotonic() < deadline, router.endpoints()
        time.sleep(0.02)


@pytest.fixture(scope="module")
def fleet():
    engines = start_engines(3, "--backend", "sim", "--sim-latency", "zero")
    router = Router(engines, args=("--ext-proc-port", 0, "--grpc-health-port", 0))
    yield router, engines
    router.stop()
    for e in engines:
        e.stop()


def test_pick_names_an_engine_and_the_body_comes_back_whole(fleet):
    router, engines = fleet
    port, _ = grpc_ports(router)
    body = completion_body("The quick brown fox jumps over the lazy dog. " * 6700)
    assert len(body) >= 300_000
    s, first, chunks = pick(port, body, pieces=7)
    endpoint, headers = destination(first)
    assert endpoint in {f"127.0.0.1:{e.port}" for e in engines}
    assert headers["content-length"] == str(len(body))
    assert first.request_headers.response.clear_route_cache
    lb = first.dynamic_metadata.fields["envoy.lb"].struct_value
    assert lb.fields[DESTINATION].string_value == endpoint
    assert all(len(c.body) <= MAX_CHUNK for c in chunks)
    assert all(len(c.body) == MAX_CHUNK for c in chunks[:-1])
    assert b"".join(c.body for c in chunks) == body
    assert [c.end_of_stream for c in chunks] == [False] * (len(chunks) - 1) + [True]
    wait_in_flight(router, endpoint, 1)
    # The response passes through unchanged, and its end ends the request.
    s.send(ep.ProcessingRequest(response_headers=ep.HttpHeaders(headers=base_pb2.HeaderMap(
        headers=[base_pb2.HeaderValue(key=":status", raw_value=b"200"),
                 base_pb2.HeaderValue(key="content-type", raw_value=b"application/json")]))))
    assert s.next().HasField("response_headers")
    answer = json.dumps({"choices": [{"text": " a b"}], "usage": {"completion_tokens": 2}})
    s.send(ep.ProcessingRequest(response_body=ep.HttpBody(body=answer.encode(),
                                                           end_of_stream=True)))
    echoed = s.next().response_body.response.body_mutation.streamed_response
    assert echoed.body == answer.encode() and echoed.end_of_stream
    wait_in_flight(router, endpoint, 0)
    s.close()


def test_prefix_aware_picks_agree_with_the_http_front(fleet):
    router, _ = fleet
    port, _ = grpc_ports(router)
    for i in range(4):
        prompt = f"Shared system prompt number {i}. " * 30
        r = requests.post(f"{router.url}/v1/completions", timeout=30,
                          json={"model": MODEL_NAME, "prompt": prompt + "http", "max_tokens": 2})
        assert r.status_code == 200, r.text
        s, first, _ = pick(port, completion_body(prompt + "grpc"))
        assert destination(first)[0] == r.headers["x-switchyard-endpoint"]
        s.cancel()
    # And the other way round: what ext_proc picked, the HTTP front's index knows.
    prompt = "Another long prompt that only ext_proc has seen so far. " * 30
    s, first, _ = pick(port, completion_body(prompt + "a"))
    s.cancel()
    r = requests.post(f"{router.url}/v1/completions", timeout=30,
                      json={"model": MODEL_NAME, "prompt": prompt + "b", "max_tokens": 2})
    assert r.headers["x-switchyard-endpoint"] == destination(first)[0]


def test_cancel_leaves_nothing_in_flight(fleet):
    router, _ = fleet
    port, _ = grpc_ports(router)
    s, first, _ = pick(port, completion_body("cancel me after the pick"))
    endpoint, _ = destination(first)
    wait_in_flight(router, endpoint, 1)
    s.cancel()
    wait_in_flight(router, endpoint, 0)
    # Cancelled mid-body: no pick was made, and nothing is left behind either.
    s = Stream(port)
    s.send(headers_message(), *body_messages(completion_body("x" * 5000), 4)[:2])
    time.sleep(0.2)
    s.cancel()
    time.sleep(0.2)
    assert all(e["active_requests"] == 0 for e in router.endpoints())


def test_garbage_body_is_a_400(fleet):
    router, _ = fleet
    port, _ = grpc_ports(router)
    s, first, _ = pick(port, b"this is not json {", pieces=2)
    assert first.HasField("immediate_response"), first
    assert first.immediate_response.status.code == 400
    assert "error" in json.loads(first.immediate_response.body)
    s.cancel()


SERVING, NOT_SERVING = b"\x08\x01", b"\x08\x02"


def health(port, service=b""):
    """grpc.health.v1.Health/Check on `port`: the HealthCheckResponse's bytes (SERVING is
    status 1: 08 01)."""
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        check = channel.unary_unary("/grpc.health.v1.Health/Check",
                                    request_serializer=lambda b: b,
                                    response_deserializer=lambda b: b)
        request = b"\x0a" + bytes([len(service)]) + service if service else b""
        return check(request, timeout=5)


def test_health_is_serving(fleet):
    router, _ = fleet
    ext_proc_port, health_port = grpc_ports(router)
    for port in (health_port, ext_proc_port):
        for service in (b"", b"readiness", b"envoy.service.ext_proc.v3.ExternalProcessor"):
            assert health(port, service) == SERVING


def test_concurrent_streams_on_several_threads():
    engines = start_engines(2, "--backend", "sim", "--sim-latency", "zero")
    router = Router(engines, extra="extProc: {port: 0, threads: 3}\n")
    try:
        port, _ = grpc_ports(router)
        names = {f"127.0.0.1:{e.port}" for e in engines}
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            def picks(worker):
                for i in range(20):
                    s, first, chunks = pick(port, completion_body(f"worker {worker} asks {i}"),
                                            pieces=2, channel=channel)
                    assert destination(first)[0] in names
                    assert chunks[-1].end_of_stream
                    if i % 2:
                        s.close()  # ends as Envoy ends one
                    else:
                        s.cancel()

            with concurrent.futures.ThreadPoolExecutor(8) as pool:
                list(pool.map(picks, range(8)))
        deadline = time.monotonic() + 10
        while any(e["active_requests"] for e in router.endpoints()):
            assert time.monotonic() < deadline, router.endpoints()
            time.sleep(0.05)
    finally:
        router.stop()
        for e in engines:
            e.stop()


def _health_request(service):
    """HealthCheckRequest{service}."""
    return b"\x0a" + bytes([len(service)]) + service if service else b""


def _raw(channel, method, streaming=False):
    make = channel.unary_stream if streaming else channel.unary_unary
    return make(method, request_serializer=lambda b: b, response_deserializer=lambda b: b)


def test_health_answers_unknown_services_and_methods(fleet):
    router, _ = fleet
    ext_proc_port, health_port = grpc_ports(router)
    for port in (health_port, ext_proc_port):
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            with pytest.raises(grpc.RpcError) as e:
                _raw(channel, "/grpc.health.v1.Health/Check")(_health_request(b"nope"), timeout=5)
            assert e.value.code() == grpc.StatusCode.NOT_FOUND
            # Watch: SERVICE_UNKNOWN (3) for a name it does not know, SERVING (1) for its own.
            watch = _raw(channel, "/grpc.health.v1.Health/Watch", streaming=True)
            unknown = watch(_health_request(b"nope"), timeout=5)
            assert next(unknown) == b"\x08\x03"
            unknown.cancel()
            serving = watch(_health_request(b"liveness"), timeout=5)
            assert next(serving) == b"\x08\x01"
            serving.cancel()
            with pytest.raises(grpc.RpcError) as e:
                _raw(channel, "/grpc.health.v1.Health/List")(b"", timeout=5)
            assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED
    # The health port serves nothing but health.
    with grpc.insecure_channel(f"127.0.0.1:{health_port}") as channel:
        with pytest.raises(grpc.RpcError) as e:
            pick(health_port, completion_body("wrong port"), channel=channel)
        assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_health_watch_sees_the_drain():
    engine = EngineServer("--backend", "sim", "--sim-latency", "zero")
    engine.spawn()
    engine.wait_ready()
    router = Router([engine], args=("--ext-proc-port", 0, "--grpc-health-port", 0))
    try:
        _, health_port = grpc_ports(router)
        with grpc.insecure_channel(f"127.0.0.1:{health_port}") as channel:
            watch = _raw(channel, "/grpc.health.v1.Health/Watch", streaming=True)(
                _health_request(b"readiness"), timeout=30)
            assert next(watch) == b"\x08\x01"
            router.proc.send_signal(signal.SIGTERM)
            assert next(watch) == b"\x08\x02"  # NOT_SERVING while it drains
            watch.cancel()
    finally:
        router.stop()
        engine.stop()


class _DeadMember:
    """A member nothing listens on."""
    engine_kind = "switchyard"

    def __init__(self):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]


def test_no_endpoint_is_a_429():
    router = Router([_DeadMember()], wait_fresh=[], args=("--ext-proc-port", 0))
    try:
        port, _ = grpc_ports(router)
        deadline = time.monotonic() + 10
        while True:
            s, first, _ = pick(port, completion_body("anyone there?"))
            s.cancel()
            if first.HasField("immediate_response"):
                break
            assert time.monotonic() < deadline, first
            time.sleep(0.1)
        assert first.immediate_response.status.code == 429
        headers = {h.header.key: h.header.raw_value.decode()
                   for h in first.immediate_response.headers.set_headers}
        assert headers["x-llm-d-request-dropped-reason"] == "no-endpoint"
    finally:
        router.stop()
