"""`switchyard up --sim N`: a local fleet in one process, answering the openai client, stopped
cleanly by Ctrl-C (SIGINT)."""
import re
import signal
import subprocess
import tempfile
import time

import openai
import requests

from conftest import MODELS_DIR, switchyard_bin

_ROUTER = re.compile(r"router serving (\S+) on (http://\S+:\d+)")


def test_up_serves_and_stops_on_ctrl_c():
    out = tempfile.TemporaryFile("w+")
    proc = subprocess.Popen([str(switchyard_bin()), "up", "--model", str(MODELS_DIR / "tiny-llama3"),
                             "--sim", "3", "--port", "0"], stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            out.seek(0)
            text = out.read()
            m = _ROUTER.search(text)
            if m:
                break
            assert proc.poll() is None, text
            assert time.monotonic() < deadline, text
            time.sleep(0.05)
        assert text.count("engine ") == 3 and "curl " in text
        name, url = m.group(1), m.group(2)
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="x", timeout=30)
        reply = client.chat.completions.create(
            model=name, messages=[{"role": "user", "content": "hello"}], max_tokens=4)
        assert reply.choices[0].finish_reason == "length"
        eps = requests.get(f"{url}/debug/endpoints", timeout=5).json()["endpoints"]
        assert len(eps) == 3
    finally:
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=30)
    out.seek(0)
    assert code == 0, out.read()
    out.seek(0)
    assert "switchyard up: stopped" in out.read()
