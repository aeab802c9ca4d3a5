"""`switchyard engine` served to the official `openai` npm package (tests/e2e/node/)."""
import json
import pathlib
import shutil
import subprocess

import pytest

from conftest import REPO
from engine_server import MODEL_NAME, EngineServer

SCRIPT = pathlib.Path(__file__).parent / "node" / "engine_smoke.mjs"
PACKAGE = REPO / "tests" / "data" / "npm" / "node_modules" / "openai"


def test_node_openai_smoke():
    node = shutil.which("node")
    if node is None:
        pytest.fail("node not found: run scripts/setup_test.sh")
    if not PACKAGE.exists():
        pytest.fail(f"{PACKAGE} missing: run scripts/setup_test.sh")
    with EngineServer() as engine:
        proc = subprocess.run([node, str(SCRIPT), engine.base_url, MODEL_NAME],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        seen = json.loads(proc.stdout)
        assert seen["completion"] and seen["chat"]
        engine.wait_idle()
