"""The health of a KV event stream, as the router shows it. A real ZeroMQ publisher (pyzmq)
feeds the router's precise prefix index for one engine; its replay socket takes the
router's requests but does not answer, so a gap cannot be filled: the stream goes stale
(its index cleared, no prefix credit) and /debug/endpoints and the metrics say so. When the
replay socket answers, the stream is back in order and fresh again."""
import struct
import time

import msgpack
import pytest
import zmq

from engine_server import EngineServer
from kv_wire import END_SEQ
from router_server import Router, member_name, metric_sum
from test_router_precise import PRECISE_PROFILE


def wait_for(predicate, timeout=20):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


@pytest.fixture
def sockets():
    ctx = zmq.Context()
    pub = ctx.socket(zmq.PUB)
    pub.bind("tcp://127.0.0.1:*")
    replay = ctx.socket(zmq.ROUTER)
    replay.bind("tcp://127.0.0.1:*")
    yield pub, replay
    pub.close(linger=0)
    replay.close(linger=0)
    ctx.term()


def publish(pub, seq):
    pub.send_multipart([b"kv-events", struct.pack(">Q", seq), msgpack.packb([time.time(), []])])


def test_unreplayable_gap_is_stale_and_visible_until_resynchronised(sockets):
    pub, replay = sockets
    with EngineServer("--backend", "sim", "--sim-latency", "zero") as engine:
        engine.kv_endpoint = pub.getsockopt_string(zmq.LAST_ENDPOINT)
        engine.kv_replay_endpoint = replay.getsockopt_string(zmq.LAST_ENDPOINT)
        router = Router([engine], scheduling=PRECISE_PROFILE)
        name = member_name(engine)

        def kv():
            return next(e for e in router.endpoints() if e["name"] == name)["kv_events"]

        def stale_gauge():
            return metric_sum(router.metrics(), "switchyard_router_endpoint_kv_events_stale",
                              endpoint=name)

        try:
            # Seq 0 until the router has it (ZeroMQ's slow joiner).
            def joined():
                publish(pub, 0)
                return kv()["batches"] >= 1
            wait_for(joined)
            assert not kv()["stale"] and stale_gauge() == 0
            publish(pub, 5)  # 1..4 never arrive: the router asks the replay socket for them
            frames = replay.recv_multipart()
            assert frames[1:] == [b"", struct.pack(">Q", 1)], frames
            # ... which never answers: the replay times out and the stream is stale.
            state = wait_for(lambda: kv() if kv()["stale"] else None)
            assert "replay timed out" in state["stale_reason"], state
            assert state["losses"] == 1
            assert stale_gauge() == 1
            # The router starts over from seq 0; answered (an empty buffer), it is fresh.
            frames = replay.recv_multipart()
            assert frames[1:] == [b"", struct.pack(">Q", 0)], frames
            replay.send_multipart([frames[0], b"", END_SEQ, b""])
            wait_for(lambda: not kv()["stale"])
            assert stale_gauge() == 0
            text = router.metrics()
            assert "switchyard_router_kv_event_subscriber_restarts_total 0" in text
        finally:
            router.stop()
