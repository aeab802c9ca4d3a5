#!/usr/bin/env python3
"""The shape of the router's ext_proc answers next to lwepp's (the Gateway API Inference
Extension's lightweight endpoint picker) for the same request streams: what each answers,
message by message (header mutations, dynamic metadata, body chunk sizes and end_of_stream,
immediate responses, the stream's gRPC status), printed as JSON lines, one per picker and
case. Needs what `bench/ext_proc_bench.py --peer lwepp` needs.

    SWITCHYARD_BIN=build/release/src/cli/switchyard .venv/bin/python bench/ext_proc_shapes.py
"""
import json
import os
import queue
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "e2e"))

import grpc  # noqa: E402
from envoy.config.core.v3 import base_pb2  # noqa: E402
from envoy.service.ext_proc.v3 import external_processor_pb2 as ep  # noqa: E402
from envoy.service.ext_proc.v3 import external_processor_pb2_grpc as ep_grpc  # noqa: E402
from google.protobuf.json_format import MessageToDict  # noqa: E402

from conftest import wait_until  # noqa: E402
from engine_server import EngineServer  # noqa: E402
from ext_proc_bench import routed  # noqa: E402
from lwepp_server import Lwepp, lwepp_missing  # noqa: E402
from router_server import Router  # noqa: E402
from test_router_ext_proc import (body_messages, completion_body, grpc_ports,  # noqa: E402
                                  headers_message)


def summary(response):
    """One answer, with bodies replaced by their sizes."""
    d = MessageToDict(response, preserving_proto_field_name=True)
    for side in ("request_body", "response_body"):
        streamed = (d.get(side, {}).get("response", {}).get("body_mutation", {})
                    .get("streamed_response"))
        if streamed is not None:
            body = getattr(response, side).response.body_mutation.streamed_response.body
            streamed["body"] = f"<{len(body)} bytes>"
    if "immediate_response" in d and "body" in d["immediate_response"]:
        d["immediate_response"]["body"] = response.immediate_response.body[:80].decode(
            errors="replace")
    return d


def exchange(port, sends, expect):
    """Sends `sends` on one stream, left open as Envoy leaves it; reads answers until
    `expect` came, the stream ends, or 3 s pass."""
    outbox = queue.Queue()
    for m in sends:
        outbox.put(m)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    call = ep_grpc.ExternalProcessorStub(channel).Process(iter(outbox.get, None), timeout=3)
    answers, status = [], "OK (still open)"
    try:
        while len(answers) < expect:
            answers.append(summary(next(call)))
    except grpc.RpcError as e:
        status = f"{e.code().name}: {e.details()}"
    except StopIteration:
        status = "OK (ended)"
    call.cancel()
    outbox.put(None)
    channel.close()
    return {"answers": answers, "grpc_status": status}


def cases():
    small = completion_body("Say hello.")
    large = completion_body("The quick brown fox jumps over the lazy dog. " * 6700)
    response_headers = ep.ProcessingRequest(response_headers=ep.HttpHeaders(
        headers=base_pb2.HeaderMap(headers=[
            base_pb2.HeaderValue(key=":status", raw_value=b"200"),
            base_pb2.HeaderValue(key="content-type", raw_value=b"application/json")])))
    response_body = ep.ProcessingRequest(response_body=ep.HttpBody(
        body=b'{"choices":[{"text":"hi"}],"usage":{"completion_tokens":1}}',
        end_of_stream=True))
    return {
        "small body, one message": ([headers_message(), *body_messages(small, 1)], 2),
        "300 KB body in 7 messages": ([headers_message(), *body_messages(large, 7)], 9),
        "headers end the stream (no body)": ([headers_message(end_of_stream=True)], 2),
        "then the response passes": ([headers_message(), *body_messages(small, 1),
                                      response_headers, response_body], 5),
    }


def main():
    missing = lwepp_missing()
    if missing:
        sys.exit(f"needs {missing} (scripts/setup_kube.sh, scripts/build_lwepp.sh)")
    engines = [EngineServer("--backend", "sim", "--sim-latency", "zero") for _ in range(2)]
    for e in engines:
        e.spawn()
    for e in engines:
        e.wait_ready()
    router = Router(engines, args=("--ext-proc-port", 0))
    lwepp = None
    try:
        lwepp = Lwepp([e.port for e in engines], routed)
        pickers = {"switchyard": grpc_ports(router)[0], "lwepp": lwepp.port}
        for case, (sends, expect) in cases().items():
            for name, port in pickers.items():
                print(json.dumps({"case": case, "picker": name,
                                  **exchange(port, sends, expect)}))
        # No endpoint: every engine gone (ours) / every pod unready (lwepp's).
        for e in engines:
            e.stop()
        for i in range(len(engines)):
            lwepp.cluster.set_pod_status(f"engine-{i}", "127.0.0.1", ready=False)
        sends = [headers_message(), *body_messages(completion_body("anyone?"), 1)]
        for name, port in pickers.items():
            def refused():
                got = exchange(port, sends, 2)
                first = got["answers"][0] if got["answers"] else {}
                return got if "request_headers" not in first else None
            print(json.dumps({"case": "no endpoint", "picker": name,
                              **wait_until(refused, f"{name} to refuse", timeout=30,
                                           interval=0.3)}))
    finally:
        if lwepp is not None:
            lwepp.stop()
        router.stop()
        for e in engines:
            e.stop()


if __name__ == "__main__":
    main()
