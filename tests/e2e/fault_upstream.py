"""A misbehaving OpenAI upstream for the router's fault tests.

A FaultUpstream is a real loopback HTTP server (a thread per connection, raw sockets, so it
can break HTTP on purpose) whose GET /metrics scrapes fine (vLLM's names, an empty queue: the
scheduler's favourite) while its completions misbehave in the way `mode` names:

  mid_event      an SSE head, one whole event and half of the next, then the connection closes
                 (an engine killed mid-stream)
  no_done        an SSE head and one whole event, then a proper end without `data: [DONE]`
  json_stream    a stream request answered with application/json that dies mid-body
  garbage        bytes that are not HTTP
  reset          a TCP reset (SO_LINGER 0) instead of an answer
  status_500     a well-formed 500 with an OpenAI error body
  keepalive_die  an SSE head and keep-alive comments, then the connection closes (an engine
                 killed while the stream waited in its queue)
  slow           a good answer after `delay` seconds (a request queued in a busy engine)
  queued_stream  an SSE head, keep-alive comments every 0.3 s for `delay` seconds, then a
                 good stream (our engine while the request waits in its queue)

`engine_kind` and `port` make it a router member (router_server.Router). `completions` counts
the completion requests it took. Use as a context manager, or start()/stop()."""
import json
import socket
import struct
import threading
import time

METRICS = (b"vllm:num_requests_waiting 0\nvllm:num_requests_running 0\n"
           b"vllm:kv_cache_usage_perc 0\n")


def _chunk(data):
    return b"%x\r\n%s\r\n" % (len(data), data)


def completion_event(text, model="tiny"):
    """One SSE event of a streamed completion, as an engine sends it."""
    body = {"id": "cmpl-fault", "object": "text_completion", "created": 1, "model": model,
            "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": None}]}
    return b"data: " + json.dumps(body).encode() + b"\n\n"


def completion_json(text, model="tiny"):
    return json.dumps({"id": "cmpl-fault", "object": "text_completion", "created": 1,
                       "model": model,
                       "choices": [{"index": 0, "text": text, "logprobs": None,
                                    "finish_reason": "length"}],
                       "usage": {"prompt_tokens": 1, "completion_tokens": 1,
                                 "total_tokens": 2}}).encode()


SSE_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"


class FaultUpstream:
    engine_kind = "vllm"

    def __init__(self, mode, delay=3.0):
        self.mode = mode
        self.delay = delay
        self.completions = 0
        self._lock = threading.Lock()
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self.port = self._sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._threads = []
        self._stopping = False
        self._acceptor = threading.Thread(target=self._accept, daemon=True)

    def start(self):
        self._acceptor.start()
        return self

    def stop(self):
        self._stopping = True
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
        self._acceptor.join(timeout=5)
        for t in list(self._threads):
            t.join(timeout=self.delay + 5)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def _accept(self):
        while not self._stopping:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self._threads = [x for x in self._threads if x.is_alive()] + [t]
            t.start()

    @staticmethod
    def _read_request(conn, buf):
        """One request off a keep-alive connection: (path, body, rest) or None at its end."""
        while b"\r\n\r\n" not in buf:
            data = conn.recv(65536)
            if not data:
                return None
            buf += data
        head, buf = buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        path = lines[0].split(" ")[1]
        length = 0
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        while len(buf) < length:
            data = conn.recv(65536)
            if not data:
                return None
            buf += data
        return path, buf[:length], buf[length:]

    def _serve(self, conn):
        buf = b""
        try:
            while True:
                request = self._read_request(conn, buf)
                if request is None:
                    return
                path, body, buf = request
                if path == "/metrics":
                    conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n"
                                 b"content-length: %d\r\n\r\n%s" % (len(METRICS), METRICS))
                    continue
                with self._lock:
                    self.completions += 1
                stream = json.loads(body or b"{}").get("stream", False)
                if not self._answer(conn, stream):
                    return
        except OSError:
            pass
        finally:
            conn.close()

    def _answer(self, conn, stream):
        """Answers one completion as the mode says; False when the connection is done."""
        mode = self.mode
        if mode == "mid_event":
            half = completion_event(" world")[:25]
            conn.sendall(SSE_HEAD + _chunk(completion_event("hello") + half))
            return False
        if mode == "no_done":
            conn.sendall(SSE_HEAD + _chunk(completion_event("hello")) + b"0\r\n\r\n")
            return True
        if mode == "json_stream":
            conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                         b"content-length: 500\r\n\r\n{\"id\": \"cmpl-fault\", \"cho")
            return False
        if mode == "garbage":
            conn.sendall(b"\x00\x17 this is not HTTP at all \xff\r\n\r\n")
            return False
        if mode == "reset":
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            return False
        if mode == "status_500":
            err = b'{"error":{"message":"boom","type":"InternalServerError","code":500}}'
            conn.sendall(b"HTTP/1.1 500 Internal Server Error\r\ncontent-type: application/json"
                         b"\r\ncontent-length: %d\r\n\r\n%s" % (len(err), err))
            return True
        if mode == "keepalive_die":
            conn.sendall(SSE_HEAD + _chunk(b": keep-alive\n\n"))
            time.sleep(0.2)
            conn.sendall(_chunk(b": keep-alive\n\n"))
            return False
        if mode == "queued_stream":
            conn.sendall(SSE_HEAD)
            end = time.monotonic() + self.delay
            while time.monotonic() < end:
                conn.sendall(_chunk(b": keep-alive\n\n"))
                time.sleep(0.3)
            conn.sendall(_chunk(completion_event("queued")) + _chunk(b"data: [DONE]\n\n") +
                         b"0\r\n\r\n")
            return True
        if mode == "slow":
            time.sleep(self.delay)
            if stream:
                conn.sendall(SSE_HEAD + _chunk(completion_event("late")) +
                             _chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
            else:
                body = completion_json("late")
                conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                             b"content-length: %d\r\n\r\n%s" % (len(body), body))
            return True
        raise AssertionError(f"unknown mode {mode}")
