"""Graceful shutdown and early stream heads of a real `switchyard engine` (issue 18, defects 2
and 3), on the simulated backend so that step times are fixed (20 ms a step) and few
sequences run at once (--max-num-seqs), leaving the rest queued.

Drain (vLLM's --shutdown-timeout): on SIGTERM the engine answers /health and new generation
requests with 503 (Retry-After), lets accepted streams (running and queued) finish, and exits
0 as soon as they have; at the deadline, or on a second signal, what is left ends with an SSE
error event and [DONE] (a non-streamed request with 503 + Retry-After), never a cut.

Stream heads: a stream's 200 text/event-stream head goes out when it is queued, and SSE
keep-alive comments follow while it waits, before its first token."""
import http.client
import json
import signal
import threading
import time

import openai
import pytest
import requests

from engine_server import MODEL_NAME, EngineServer

STEP_MS = 20
SIM = ["--backend", "sim", "--sim-latency", f"zero,overhead_ms={STEP_MS}"]


class Stream(threading.Thread):
    """One request over its own raw HTTP/1.1 connection, read line by line as it comes:
    records when the head and each line arrived, and whether the body ended cleanly (the last
    chunk of the chunked encoding) or was cut."""

    def __init__(self, engine, max_tokens, stream=True, prompt="The yard"):
        super().__init__(daemon=True)
        self.engine = engine
        self.body = {"model": MODEL_NAME, "prompt": prompt, "max_tokens": max_tokens,
                     "temperature": 0, "ignore_eos": True, "stream": stream}
        if stream:
            self.body["stream_options"] = {"include_usage": True}
        self.status = None
        self.headers = {}
        self.head_at = None
        self.lines = []  # (monotonic time, line) of a stream; the whole body otherwise
        self.clean_end = False
        self.error = None
        self.headed = threading.Event()
        self.start()

    def run(self):
        try:
            conn = http.client.HTTPConnection("127.0.0.1", self.engine.port, timeout=60)
            conn.request("POST", "/v1/completions", body=json.dumps(self.body),
                         headers={"Content-Type": "application/json"})
            response = conn.getresponse()
            self.status = response.status
            self.headers = {k.lower(): v for k, v in response.getheaders()}
            self.head_at = time.monotonic()
            self.headed.set()
            if not self.body["stream"] or self.status != 200:
                self.lines.append((time.monotonic(), response.read().decode()))
            else:
                while True:
                    line = response.readline()
                    if not line:
                        break
                    self.lines.append((time.monotonic(), line.decode().rstrip("\n")))
            self.clean_end = True  # http.client raises IncompleteRead on a cut chunked body
            conn.close()
        except Exception as err:  # noqa: BLE001 - recorded for the test to show
            self.error = err
        finally:
            self.headed.set()

    def events(self):
        """The stream's data payloads, in order (comments and blank lines left out)."""
        return [line[len("data: "):] for _, line in self.lines if line.startswith("data: ")]

    def chunks(self):
        """The stream's choice chunks (usage and error events left out)."""
        docs = [json.loads(e) for e in self.events() if e != "[DONE]"]
        return [d["choices"][0] for d in docs if d.get("choices")]

    def text(self):
        return "".join(c["text"] for c in self.chunks())

    def check_finished(self):
        """Every asked-for token (the usage chunk counts them), then [DONE], on a cleanly
        ended 200 stream."""
        self.join(timeout=60)
        assert self.error is None and self.clean_end, self.error
        assert self.status == 200
        events = self.events()
        assert events[-1] == "[DONE]", events[-3:]
        assert not any('"error"' in e for e in events), events
        assert json.loads(events[-2])["usage"]["completion_tokens"] == self.body["max_tokens"]
        assert self.chunks()[-1]["finish_reason"] == "length"

    def check_ended_with_error(self):
        """An SSE error event (503, the OpenAI error shape) then [DONE]: never a cut."""
        self.join(timeout=60)
        assert self.error is None and self.clean_end, self.error
        assert self.status == 200
        events = self.events()
        assert events[-1] == "[DONE]", events[-3:]
        error = json.loads(events[-2])["error"]
        assert error["code"] == 503 and error["type"] == "ServiceUnavailableError", error
        assert error["message"]
        return events


def wait_for(predicate, timeout=30, what="condition"):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def running_and_waiting(engine):
    m = engine.metrics()
    return m["vllm:num_requests_running"], m["vllm:num_requests_waiting"]


def exit_code(engine, timeout):
    """Waits for the process to exit; marks it stopped for the fixture's teardown."""
    engine._stopped = True
    return engine.proc.wait(timeout=timeout)


def check_refuses_new_work(engine):
    """/health and /ping are 503; a new generation request is a 503 with Retry-After and an
    OpenAI error body (so a router retries it elsewhere), on a connection that closes."""
    # The signal reaches the engine's main thread a moment after it was sent.
    wait_for(lambda: requests.get(engine.url + "/health", timeout=10).status_code == 503,
             timeout=5, what="/health to turn 503")
    for path in ("/health", "/ping"):
        r = requests.get(engine.url + path, timeout=10)
        assert r.status_code == 503, path
    for path, body in (("/v1/completions", {"prompt": "x", "max_tokens": 1}),
                       ("/v1/chat/completions",
                        {"messages": [{"role": "user", "content": "x"}], "stream": True})):
        r = requests.post(engine.url + path, json={"model": MODEL_NAME, **body}, timeout=10)
        assert r.status_code == 503, r.text
        assert r.headers["retry-after"] == "1"
        assert r.headers["connection"] == "close"
        error = r.json()["error"]
        assert error["code"] == 503 and error["type"] == "ServiceUnavailableError", error
    # The rest of the API still answers.
    assert requests.get(engine.url + "/metrics", timeout=10).status_code == 200


def test_drain_finishes_running_and_queued_streams_then_exits():
    with EngineServer(*SIM, "--max-num-seqs", 2, "--shutdown-timeout", 20) as engine:
        streams = [Stream(engine, max_tokens=25) for _ in range(6)]
        wait_for(lambda: running_and_waiting(engine) == (2, 4), what="2 running, 4 queued")
        engine.proc.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        check_refuses_new_work(engine)
        for s in streams:
            s.check_finished()
        finished = max(s.lines[-1][0] for s in streams)
        # 3 waves of 25 steps took their time; the engine then exits at once, not at 20 s.
        assert finished - signalled > 0.5
        assert exit_code(engine, timeout=10) == 0
        assert time.monotonic() - signalled < 8


def test_drain_deadline_ends_leftovers_with_clean_errors():
    with EngineServer(*SIM, "--max-num-seqs", 2, "--shutdown-timeout", 1) as engine:
        streams = [Stream(engine, max_tokens=1500) for _ in range(4)]
        unstreamed = Stream(engine, max_tokens=1500, stream=False)
        wait_for(lambda: running_and_waiting(engine) == (2, 3), what="2 running, 3 queued")
        engine.proc.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        check_refuses_new_work(engine)
        for s in streams:
            s.check_ended_with_error()
        # The two running streams got tokens before the deadline, the queued ones none.
        assert sorted(len(s.chunks()) > 0 for s in streams) == [False, False, True, True]
        unstreamed.join(timeout=30)
        assert unstreamed.error is None
        assert unstreamed.status == 503
        assert unstreamed.headers["retry-after"] == "1"
        assert json.loads(unstreamed.lines[0][1])["error"]["code"] == 503
        assert exit_code(engine, timeout=10) == 0
        elapsed = time.monotonic() - signalled
        assert 0.9 < elapsed < 6, elapsed


def test_second_signal_ends_the_drain_at_once():
    with EngineServer(*SIM, "--max-num-seqs", 2, "--shutdown-timeout", 60) as engine:
        streams = [Stream(engine, max_tokens=1500) for _ in range(3)]
        wait_for(lambda: running_and_waiting(engine) == (2, 1), what="2 running, 1 queued")
        engine.proc.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        wait_for(lambda: requests.get(engine.url + "/health", timeout=10).status_code == 503,
                 timeout=5, what="/health to turn 503")
        engine.proc.send_signal(signal.SIGINT)
        for s in streams:
            s.check_ended_with_error()
        assert exit_code(engine, timeout=10) == 0
        assert time.monotonic() - signalled < 8


def test_zero_timeout_ends_everything_at_once_with_clean_errors():
    """vLLM's default (--shutdown-timeout 0): no drain, but still no silent cut."""
    with EngineServer(*SIM, "--max-num-seqs", 1) as engine:
        streams = [Stream(engine, max_tokens=1500) for _ in range(2)]
        wait_for(lambda: running_and_waiting(engine) == (1, 1), what="1 running, 1 queued")
        engine.proc.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        for s in streams:
            s.check_ended_with_error()
        assert exit_code(engine, timeout=10) == 0
        assert time.monotonic() - signalled < 5


def test_queued_stream_gets_its_head_and_keepalives_before_its_first_token():
    """Defect 3: a stream queued behind another gets 200 text/event-stream at once and
    ': keep-alive' comments while it waits, so that a router's first-byte timeout does not
    take a busy engine for a dead one. The openai client skips the comments."""
    with EngineServer(*SIM, "--max-num-seqs", 1, "--sse-keepalive-interval", 0.1) as engine:
        first = Stream(engine, max_tokens=60)  # 60 steps of 20 ms: over a second
        wait_for(lambda: running_and_waiting(engine) == (1, 0), what="the first running")
        queued = Stream(engine, max_tokens=5, prompt="Switch the points")
        assert queued.headed.wait(timeout=10)
        assert queued.status == 200, queued.lines
        assert queued.headers["content-type"].startswith("text/event-stream")
        # The head came while the first stream was still running, so before any token.
        assert first.is_alive()
        first.check_finished()
        queued.check_finished()
        assert queued.head_at < first.lines[-1][0]
        first_data = next(i for i, (_, line) in enumerate(queued.lines)
                          if line.startswith("data: "))
        comments = [line for _, line in queued.lines[:first_data] if line.startswith(":")]
        assert len(comments) >= 3 and set(comments) == {": keep-alive"}, queued.lines[:first_data]
        # The same through the openai client: comments are invisible to it.
        blocker = Stream(engine, max_tokens=30)
        wait_for(lambda: running_and_waiting(engine) == (1, 0), what="the blocker running")
        with openai.OpenAI(base_url=engine.base_url, api_key="x", max_retries=0,
                           timeout=30) as client:
            chunks = list(client.completions.create(
                model=MODEL_NAME, prompt="Switch the points", max_tokens=5, temperature=0,
                stream=True, extra_body={"ignore_eos": True}))
        assert "".join(c.choices[0].text for c in chunks) == queued.text()
        blocker.check_finished()


def test_validation_errors_stay_plain_json_before_the_head():
    with EngineServer(*SIM) as engine:
        r = requests.post(engine.url + "/v1/completions",
                          json={"model": MODEL_NAME, "prompt": "x", "stream": True,
                                "max_tokens": 5000}, timeout=10)
        assert r.status_code == 400
        assert r.headers["content-type"] == "application/json"
        assert r.json()["error"]["param"] == "max_tokens"


@pytest.mark.parametrize("timeout", [0, 5])
def test_idle_engine_exits_at_once(timeout):
    with EngineServer(*SIM, "--shutdown-timeout", timeout) as engine:
        engine.complete("x")
        engine.proc.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        assert exit_code(engine, timeout=10) == 0
        assert time.monotonic() - signalled < 3
