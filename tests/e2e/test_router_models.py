"""The router's GET /v1/models passes through what the engines report of the model (vLLM's
ModelCard: created, owned_by, root, max_model_len) instead of its own zeros, read with the
openai client as clients that size requests from max_model_len do."""
import time

import openai
import requests

from engine_server import MODEL_NAME, EngineServer
from router_server import Router


def test_models_carry_what_the_engines_report():
    engines = [EngineServer("--backend", "sim", "--sim-latency", "zero", "--max-model-len", "512"),
               EngineServer("--backend", "sim", "--sim-latency", "zero", "--max-model-len", "384")]
    for e in engines:
        e.spawn()
    for e in engines:
        e.wait_ready()
    own = [requests.get(f"{e.url}/v1/models", timeout=5).json()["data"][0] for e in engines]
    assert all(card["created"] > 0 for card in own)
    router = Router(engines)
    try:
        client = openai.OpenAI(base_url=f"{router.url}/v1", api_key="x", timeout=30)
        deadline = time.monotonic() + 10
        while True:  # fetched beside the first scrapes
            card = client.models.list().data[0]
            if card.created != 0 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert card.id == MODEL_NAME
        assert card.created == min(c["created"] for c in own)
        assert card.owned_by == own[0]["owned_by"]
        raw = requests.get(f"{router.url}/v1/models", timeout=5).json()["data"][0]
        # A request may land on either engine: the smaller window is the fleet's.
        assert raw["max_model_len"] == 384
        assert raw["root"] == own[0]["root"]
    finally:
        router.stop()
        for e in engines:
            e.stop()
