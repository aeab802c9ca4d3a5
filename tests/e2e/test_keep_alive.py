"""One client connection reused for every route, as guidellm and other pooled clients use it.

Before, a response with an empty body (`GET /health`, `/ping`) never finished on the server,
so the next request on that connection was never answered (curl's second request timed out,
guidellm completed 0 requests). Each test walks every route of the engine or the router on
one `http.client` connection, several times, including HEAD requests and error answers, and
checks that the connection stayed the same socket throughout."""
import http.client
import json

import pytest

from engine_server import EngineServer
from router_server import Router

COMPLETION = json.dumps({"model": "tiny", "prompt": "hello", "max_tokens": 3})
CHAT = json.dumps({"model": "tiny", "messages": [{"role": "user", "content": "hi"}],
                   "max_tokens": 3})
STREAM = json.dumps({"model": "tiny", "prompt": "hello", "max_tokens": 3, "stream": True})

# (method, path, body, the status wanted)
ENGINE_ROUTES = [
    ("GET", "/health", None, 200),
    ("GET", "/ping", None, 200),
    ("HEAD", "/health", None, 405),
    ("GET", "/version", None, 200),
    ("GET", "/metrics", None, 200),
    ("GET", "/v1/models", None, 200),
    ("POST", "/tokenize", json.dumps({"model": "tiny", "prompt": "hi"}), 200),
    ("POST", "/detokenize", json.dumps({"model": "tiny", "tokens": [1, 2]}), 200),
    ("POST", "/v1/completions", COMPLETION, 200),
    ("POST", "/v1/completions", STREAM, 200),
    ("POST", "/v1/chat/completions", CHAT, 200),
    ("POST", "/v1/completions", "{not json", 400),
    ("GET", "/v1/completions", None, 405),
    ("GET", "/no/such/route", None, 404),
    ("HEAD", "/v1/models", None, 405),
]

ROUTER_ROUTES = [
    ("GET", "/health", None, 200),
    ("HEAD", "/health", None, 405),
    ("GET", "/debug/endpoints", None, 200),
    ("GET", "/metrics", None, 200),
    ("GET", "/v1/models", None, 200),
    ("POST", "/v1/completions", COMPLETION, 200),
    ("POST", "/v1/completions", STREAM, 200),
    ("POST", "/v1/chat/completions", CHAT, 200),
    ("POST", "/v1/completions", "{not json", 400),
    ("GET", "/v1/completions", None, 405),
    ("GET", "/no/such/route", None, 404),
]


def walk_routes(port, routes, rounds=3):
    """Sends every route `rounds` times on one connection; fails on a wrong status, a
    response that does not arrive within 10 s, or a reconnect."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.connect()
    sock = conn.sock
    for round_ in range(rounds):
        for method, path, body, want in routes:
            headers = {"content-type": "application/json"} if body is not None else {}
            conn.request(method, path, body=body, headers=headers)
            response = conn.getresponse()
            data = response.read()
            assert response.status == want, (round_, method, path, response.status, data[:200])
            assert response.getheader("connection") != "close", (method, path)
            if method == "HEAD":
                assert data == b""
            assert conn.sock is sock, f"reconnected after {method} {path}"
    conn.close()


@pytest.fixture(scope="module")
def engine():
    with EngineServer("--backend", "sim", "--sim-latency", "zero") as server:
        yield server


def test_engine_serves_every_route_on_one_connection(engine):
    walk_routes(engine.port, ENGINE_ROUTES)


def test_router_serves_every_route_on_one_connection(engine):
    router = Router([engine])
    try:
        walk_routes(int(router.url.rsplit(":", 1)[1]), ROUTER_ROUTES)
    finally:
        router.stop()
