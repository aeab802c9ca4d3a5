"""KV events from a serving `switchyard engine` (--kv-events-config): subscribe with pyzmq,
send completions, decode the three-frame messages with msgpack, check the BlockStored
events of the prompt's full blocks (block hashes by vLLM's sha256_cbor rule, token ids,
block size 16), the replay socket, and the three event layouts ("map", vLLM 0.32/0.33 and
our default; "array", early vLLM and llm-d-kv-cache's decoder; "map_batch", vLLM main), each
byte for byte against vLLM's msgspec structs (vllm_kv_structs.py)."""

import json
import os
import subprocess

import msgspec
import msgpack
import pytest
import requests
import zmq

from conftest import REPO
from engine_server import EngineServer, kv_events_flags
from kv_wire import END_SEQ, as_dict, vllm_block_hashes, wire_hash
from vllm_kv_structs import LAYOUTS, STRUCTS

TOPIC = b"kv-events"
BLOCK_SIZE = 16
SEED = "0"  # PYTHONHASHSEED: vLLM's NONE_HASH is sha256_cbor(seed) when it is set

class Subscriber:
    def __init__(self, context, engine):
        self.engine = engine
        self.sub = context.socket(zmq.SUB)
        self.sub.setsockopt(zmq.SUBSCRIBE, TOPIC)
        self.sub.connect(engine.kv_endpoint)
        self.seqs = []

    def recv(self, timeout_ms):
        """One batch (seq, payload bytes), or None after the timeout."""
        if not self.sub.poll(timeout_ms):
            return None
        topic, seq, payload = self.sub.recv_multipart()
        assert topic == TOPIC
        assert len(seq) == 8
        self.seqs.append(int.from_bytes(seq, "big"))
        return self.seqs[-1], payload

    def join(self):
        """PUB drops what it sends before a subscription arrives: completes distinct
        prompts until their events start coming in, then drains."""
        for probe in range(100):
            self.engine.complete([900 + probe] * (BLOCK_SIZE + 1))
            if self.recv(100) is not None:
                break
        else:
            pytest.fail("no KV event arrived")
        while self.recv(200) is not None:
            pass


@pytest.fixture
def context():
    ctx = zmq.Context()
    yield ctx
    ctx.destroy(linger=0)


def kv_engine(layout="map", hashes="int"):
    config = {}
    if layout != "map":  # map is the default
        config["event_layout"] = layout
    if hashes != "int":
        config["block_hash_format"] = hashes
    return EngineServer(*kv_events_flags(TOPIC.decode(), **config), "--num-gpu-blocks-override",
                        256, kv_events=True, env={"PYTHONHASHSEED": SEED})


@pytest.mark.parametrize("layout,hashes", [("map", "int"), ("array", "bytes")])
def test_engine_kv_events(context, layout, hashes):
    with kv_engine(layout, hashes) as engine:
        assert engine.kv_endpoint.startswith("tcp://127.0.0.1:")
        assert engine.kv_replay_endpoint.startswith("tcp://127.0.0.1:")
        sub = Subscriber(context, engine)
        sub.join()

        prompt = list(range(100, 140))  # 40 tokens: two full blocks and a partial one
        first_seq = len(sub.seqs) and sub.seqs[-1] + 1
        engine.complete(prompt)
        live = []
        while (got := sub.recv(500)) is not None:
            live.append(got)
        assert live, "no events for the completion"
        assert [s for s, _ in live] == list(range(first_seq, first_seq + len(live)))
        stored = []
        for _, payload in live:
            ts, events, dp_rank = msgpack.unpackb(payload)
            assert isinstance(ts, float) and ts > 1.6e9
            assert dp_rank in (0, None)  # see test_data_parallel_rank_is_zero
            stored += [e for e in (as_dict(e, layout) for e in events)
                       if e["type"] == "BlockStored"]
        assert stored, live
        expected = [wire_hash(h, hashes) for h in vllm_block_hashes(prompt, BLOCK_SIZE, SEED)]
        assert [h for e in stored for h in e["block_hashes"]] == expected
        assert [t for e in stored for t in e["token_ids"]] == prompt[:2 * BLOCK_SIZE]
        assert stored[0]["parent_block_hash"] is None
        for e in stored:
            assert e["block_size"] == BLOCK_SIZE
            assert e["medium"] == "GPU"
            assert e["lora_id"] is None and e.get("lora_name") is None

        # The same prompt again is a cache hit: nothing new is stored for its blocks.
        again = engine.complete(prompt)
        assert again["usage"]["prompt_tokens_details"]["cached_tokens"] == 2 * BLOCK_SIZE
        for _, payload in iter(lambda: sub.recv(300), None):
            for e in msgpack.unpackb(payload)[1]:
                e = as_dict(e, layout)
                if e["type"] == "BlockStored":
                    assert not set(e["block_hashes"]) & set(expected)

        # Replay from the first live batch, as llm-d asks for it: a DEALER sends ["", seq].
        dealer = context.socket(zmq.DEALER)
        dealer.connect(engine.kv_replay_endpoint)
        dealer.send_multipart([b"", first_seq.to_bytes(8, "big")])
        replayed = []
        while True:
            assert dealer.poll(5000), "replay timed out"
            empty, seq, payload = dealer.recv_multipart()
            assert empty == b""
            if seq == END_SEQ:
                assert payload == b""
                break
            replayed.append((int.from_bytes(seq, "big"), payload))
        assert replayed[:len(live)] == live
        assert [s for s, _ in replayed] == list(range(first_seq, first_seq + len(replayed)))
        # A REQ socket gets the same, from 0.
        req = context.socket(zmq.REQ)
        req.connect(engine.kv_replay_endpoint)
        req.send((0).to_bytes(8, "big"))
        assert req.poll(5000), "replay (REQ) timed out"
        seq, payload = req.recv_multipart()
        assert int.from_bytes(seq, "big") == 0 and payload
        engine.wait_idle()


def test_data_parallel_rank_is_zero(context):
    with kv_engine() as engine:
        sub = Subscriber(context, engine)
        sub.join()
        engine.complete(list(range(500, 540)))
        got = sub.recv(5000)
        assert got is not None
        assert msgpack.unpackb(got[1])[2] == 0


@pytest.mark.parametrize("hashes", ["int", "bytes"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_engine_bytes_are_vllm_msgspec_bytes(context, layout, hashes):
    """Every batch the engine publishes in `layout` decodes with vLLM's own struct declarations
    for that layout (msgspec, strict types) and re-encodes to the very same bytes; the other
    layouts' declarations reject it. Stores, evictions (a 6-block cache) and a cache reset
    give BlockStored, BlockRemoved and AllBlocksCleared events."""
    config = {"event_layout": layout, "block_hash_format": hashes}
    flags = [*kv_events_flags(TOPIC.decode(), **config), "--num-gpu-blocks-override", 6,
             "--max-model-len", 64]
    with EngineServer(*flags, kv_events=True,
                      env={"PYTHONHASHSEED": SEED, "VLLM_SERVER_DEV_MODE": "1"}) as engine:
        sub = Subscriber(context, engine)
        sub.join()
        for i in range(4):  # 2 full blocks each: the 6-block cache evicts
            engine.complete(list(range(500 + 40 * i, 540 + 40 * i)))
        r = requests.post(f"{engine.url}/reset_prefix_cache", timeout=30)
        assert r.status_code == 200, r.text
        payloads = [p for _, p in iter(lambda: sub.recv(500), None)]
        engine.wait_idle()

    structs = STRUCTS[layout]
    kinds = set()
    for payload in payloads:
        batch = structs.decoder.decode(payload)
        assert structs.encoder.encode(batch) == payload
        kinds.update(type(e).__name__ for e in batch.events)
        for e in batch.events:
            for h in getattr(e, "block_hashes", []):
                assert isinstance(h, int if hashes == "int" else bytes)
        for other in LAYOUTS:
            if other != layout and batch.events:  # [ts, [], rank] is both "array" and "map"
                with pytest.raises(msgspec.ValidationError):
                    STRUCTS[other].decoder.decode(payload)
    assert kinds == {"BlockStored", "BlockRemoved", "AllBlocksCleared"}, kinds


# Run in the installed vLLM's Python: which layout its own structs declare, and what they
# make of our golden bytes of that layout (decoded, then re-encoded as its publisher does).
_VLLM_ROUND_TRIP = """
import json, sys
import msgspec
from vllm.distributed.kv_events import EventBatch, KVCacheEvent, KVEventBatch
array_like = lambda cls: cls.__struct_config__.array_like
if not array_like(EventBatch):
    layout = "map_batch"
else:
    layout = "array" if array_like(KVCacheEvent) else "map"
decoder, encoder = msgspec.msgpack.Decoder(KVEventBatch), msgspec.msgpack.Encoder()
cases = [[c["name"], c["hashes"], encoder.encode(decoder.decode(bytes.fromhex(c["hex"]))).hex()]
         for c in json.load(sys.stdin) if c["layout"] == layout]
print(json.dumps({"layout": layout, "cases": cases}))
"""


@pytest.mark.skipif(not os.environ.get("SWITCHYARD_VLLM_PYTHON"),
                    reason="SWITCHYARD_VLLM_PYTHON names no Python with vLLM (see the README)")
def test_installed_vllm_reads_and_writes_our_bytes():
    """vLLM's own structs, in the installed vLLM, decode our golden bytes of the layout they
    declare and re-encode them to the same bytes (vLLM 0.32: "map"). vLLM 0.33's BlockStored
    has 16 fields, so msgspec gives its maps a 3-byte header: those bytes must equal ours
    once the headers are written in their shortest form."""
    golden = json.loads((REPO / "tests/data/golden/kv_events.json").read_text())["cases"]
    proc = subprocess.run([os.environ["SWITCHYARD_VLLM_PYTHON"], "-c", _VLLM_ROUND_TRIP],
                          input=json.dumps(golden), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    want = {(c["name"], c["hashes"]): c["hex"] for c in golden if c["layout"] == got["layout"]}
    assert len(got["cases"]) == len(want) == 12
    for name, hashes, hexed in got["cases"]:
        theirs = bytes.fromhex(hexed)
        shortest = msgpack.packb(msgpack.unpackb(theirs), use_bin_type=True)
        assert want[(name, hashes)] in (hexed, shortest.hex()), (got["layout"], name, hashes)
