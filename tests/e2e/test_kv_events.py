"""KV events end to end: `switchyard kv-events-demo` runs a KV cache manager and publishes its
events over ZeroMQ; this test subscribes with pyzmq, decodes with msgpack, and checks the
frames, the sequence numbers, the event layout vLLM uses, the block hashes against vLLM's
sha256_cbor rule, and the replay socket."""
import json
import subprocess

import msgpack
import pytest
import zmq

from conftest import switchyard_bin
from kv_wire import END_SEQ, as_dict, vllm_block_hashes, wire_hash

TOPIC = b"kv@127.0.0.1:8000@tiny"
BLOCK_SIZE = 4
SEED = "0"


class Demo:
    def __init__(self, layout, hashes, count):
        self.proc = subprocess.Popen(
            [str(switchyard_bin()), "kv-events-demo", "--endpoint", "tcp://127.0.0.1:*",
             "--replay-endpoint", "tcp://127.0.0.1:*", "--topic", TOPIC.decode(),
             "--layout", layout, "--hashes", hashes, "--count", str(count),
             "--hash-seed", SEED],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.endpoints = json.loads(self.proc.stdout.readline())

    def send(self, command):
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def close(self):
        self.proc.stdin.close()
        assert self.proc.wait(timeout=30) == 0


@pytest.fixture
def context():
    ctx = zmq.Context()
    yield ctx
    ctx.destroy(linger=0)


@pytest.mark.parametrize("layout", ["array", "map"])
@pytest.mark.parametrize("hashes", ["int", "bytes"])
def test_kv_events_over_zmq(context, layout, hashes):
    if not switchyard_bin().exists():
        pytest.fail(f"switchyard binary not found at {switchyard_bin()}")
    count = 4
    demo = Demo(layout, hashes, count)
    try:
        sub = context.socket(zmq.SUB)
        sub.setsockopt(zmq.SUBSCRIBE, TOPIC)
        sub.connect(demo.endpoints["endpoint"])
        # PUB/SUB drops messages sent before the subscription arrives: probe until one lands.
        probes = 0
        while True:
            demo.send("probe")
            probes += 1
            if sub.poll(100):
                break
            assert probes < 100, "no probe batch arrived"
        demo.send("run")
        published = json.loads(demo.proc.stdout.readline())["published"]

        batches = []
        while len(batches) < published:
            assert sub.poll(5000), "timed out waiting for KV events"
            topic, seq, payload = sub.recv_multipart()
            assert topic == TOPIC
            assert len(seq) == 8
            batch = msgpack.unpackb(payload)
            if batch[1]:  # skip probes still in flight
                batches.append((int.from_bytes(seq, "big"), batch))
        seqs = [s for s, _ in batches]
        assert seqs == list(range(probes, probes + published))

        events = []
        for _, (ts, batch_events, dp_rank) in batches:
            assert isinstance(ts, float) and ts > 1.6e9
            assert dp_rank == 0
            for e in batch_events:
                assert isinstance(e, dict) == (layout == "map")
                events.append(as_dict(e))

        stored = [e for e in events if e["type"] == "BlockStored"]
        assert len(stored) == count
        for i, e in enumerate(stored):
            tokens = [i * 100 + t for t in range(9)]
            assert e["block_hashes"] == [wire_hash(h, hashes) for h in vllm_block_hashes(tokens, BLOCK_SIZE, SEED)]
            assert e["parent_block_hash"] is None
            assert e["token_ids"] == tokens[:8]
            assert e["block_size"] == BLOCK_SIZE
            assert e["medium"] == "GPU"
            assert e["lora_id"] is None and e["lora_name"] is None
            if layout == "map":  # defaulted fields are omitted
                assert "group_idx" not in e and "extra_keys" not in e
        removed = {h for e in events if e["type"] == "BlockRemoved" for h in e["block_hashes"]}
        assert removed, "admissions past the cache's size must evict"
        assert removed <= {h for e in stored for h in e["block_hashes"]}
        assert events[-1] == {"type": "AllBlocksCleared"}

        # Replay from 0 as llm-d asks for it: a DEALER sends ["", seq].
        dealer = context.socket(zmq.DEALER)
        dealer.connect(demo.endpoints["replay_endpoint"])
        dealer.send_multipart([b"", (0).to_bytes(8, "big")])
        replayed = []
        while True:
            assert dealer.poll(5000), "replay timed out"
            empty, seq, payload = dealer.recv_multipart()
            assert empty == b""
            if seq == END_SEQ:
                assert payload == b""
                break
            replayed.append((int.from_bytes(seq, "big"), payload))
        assert [s for s, _ in replayed] == list(range(probes + published))
        assert [msgpack.unpackb(p) for s, p in replayed if s >= probes] == [b for _, b in batches]
    finally:
        demo.close()
