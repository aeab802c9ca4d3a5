"""A misbehaving OpenAI upstream for the router's fault and chaos tests.

A FaultUpstream is a real loopback HTTP server (a thread per connection, raw sockets, so that
it can break HTTP on purpose). Its GET routes answer as an idle vLLM would, so that scrapes
find it healthy and empty (the scheduler's favourite): /metrics (vLLM's series and labels),
/health (200, no body) and /v1/models; any other GET is a 404. Every other request is a
generation request (POST /v1/completions, /v1/chat/completions): `hits` counts them, and each
is answered as `mode` says. Where a mode alternates, the odd hits (the first, the third, ...)
get the first variant named.

Modes that fail every generation request:
  reset                 reads the request, then resets the connection (RST: SO_LINGER 0)
  garbage               bytes that are not HTTP, then the connection closes
  http500               a well-formed 500 with vLLM's OpenAI error body (an engine whose step
                        failed); the connection stays open
  cut-stream            a stream: an SSE head, one whole event, half of the next, and the
                        connection closes (an engine killed mid-stream); chunked, cut before
                        the last chunk, or delimited by the close, so whole as HTTP. Not a
                        stream: a JSON head whose Content-Length is larger than the body sent
                        before the connection closes
  no-done               an SSE head and one whole event, then a proper chunked end without
                        `data: [DONE]`; the connection stays open
  json-for-stream       200 application/json, whatever was asked: half of a completion under a
                        Content-Length for all of it, then the connection closes; or a whole
                        completion with `connection: close`
  silence               a 200 head (SSE, or JSON with a Content-Length) and then nothing,
                        holding the connection until the peer closes it
  keepalive-then-close  an SSE head and two keep-alive comments, then the connection closes
                        (an engine killed while the stream waited in its queue)
Modes that answer well, late:
  slow                  a whole answer (text "late") after `delay` seconds (a request queued
                        in a busy engine)
  keepalive-then-stream an SSE head, keep-alive comments every 0.3 s for `delay` seconds, then
                        a whole stream (text "queued"; our engine while a request waits in its
                        queue)

`port` and `engine_kind` make it a router member (router_server.Router). Use it as a context
manager, or start() and stop()."""
import json
import socket
import struct
import threading
import time

MODES = ("reset", "garbage", "http500", "cut-stream", "no-done", "json-for-stream", "silence",
         "keepalive-then-close", "slow", "keepalive-then-stream")
MODEL = "tiny"

METRICS = f"""# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{model_name="{MODEL}"}} 0.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{{model_name="{MODEL}"}} 0.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{{model_name="{MODEL}"}} 0.0
# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{{block_size="16",num_gpu_blocks="1024"}} 1.0
"""
MODELS = json.dumps({"object": "list", "data": [
    {"id": MODEL, "object": "model", "created": 1, "owned_by": "vllm", "max_model_len": 2048}]})
ERROR_500 = json.dumps({"error": {"message": "EngineCore encountered an issue.",
                                  "type": "InternalServerError", "param": None, "code": 500}})
NOT_HTTP = b"\x00\xff\x13SSH-2.0-not-http \xde\xad\xbe\xef\r\n\r\n" * 4
SSE_HEAD = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\n\r\n")
KEEPALIVE = b": keep-alive\n\n"
DONE = b"data: [DONE]\n\n"
LAST_CHUNK = b"0\r\n\r\n"


def _chunk(data):
    return b"%x\r\n%s\r\n" % (len(data), data)


def _response(status, reason, content_type, body, extra=b""):
    body = body.encode() if isinstance(body, str) else body
    return (b"HTTP/1.1 %d %s\r\ncontent-type: %s\r\ncontent-length: %d\r\n%s\r\n%s"
            % (status, reason.encode(), content_type.encode(), len(body), extra, body))


class _Request:
    """One generation request: what its answer is shaped after."""

    def __init__(self, path, headers, body):
        try:
            self.stream = bool(json.loads(body).get("stream"))
        except ValueError:
            self.stream = False
        self.chat = "chat" in path
        self.id = headers.get("x-request-id", "fault")

    def completion(self, text, chunk=False):
        """The request's answer (chunk=False) or one event of its stream, as JSON."""
        if self.chat:
            key = "delta" if chunk else "message"
            choice = {"index": 0, key: {"role": "assistant", "content": text}}
            obj = "chat.completion.chunk" if chunk else "chat.completion"
        else:
            choice = {"index": 0, "text": text}
            obj = "text_completion"
        choice.update(logprobs=None, finish_reason=None if chunk else "length")
        body = {"id": f"{'chatcmpl' if self.chat else 'cmpl'}-{self.id}", "object": obj,
                "created": 1, "model": MODEL, "choices": [choice]}
        if not chunk:
            words = len(text.split())
            body["usage"] = {"prompt_tokens": 5, "completion_tokens": words,
                             "total_tokens": 5 + words}
        return json.dumps(body).encode()

    def event(self, text):
        return b"data: " + self.completion(text, chunk=True) + b"\n\n"


def _read_request(conn, buf):
    """One request off a keep-alive connection: (method, path, headers, body, rest), or None
    once the peer has closed it."""
    while b"\r\n\r\n" not in buf:
        data = conn.recv(65536)
        if not data:
            return None
        buf += data
    head, buf = buf.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers = {k.strip().lower(): v.strip()
               for k, _, v in (line.partition(":") for line in lines[1:] if line)}
    length = int(headers.get("content-length", "0"))
    while len(buf) < length:
        data = conn.recv(65536)
        if not data:
            return None
        buf += data
    return method, path, headers, buf[:length], buf[length:]


class FaultUpstream:
    engine_kind = "vllm"

    def __init__(self, mode, delay=3.0):
        assert mode in MODES, mode
        self.mode = mode
        self.delay = delay
        self.hits = 0
        self._lock = threading.Lock()
        self._open = set()  # connections being served
        self._threads = []
        self._stopping = False
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(128)
        self.port = self._sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._acceptor = threading.Thread(target=self._accept, daemon=True,
                                          name=f"fault-{mode}")

    def start(self):
        self._acceptor.start()
        return self

    def stop(self):
        """Stops listening and ends the connections still open (a held `silence` one)."""
        self._stopping = True
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
        if self._acceptor.ident is not None:  # started
            self._acceptor.join(timeout=5)
        with self._lock:
            held = list(self._open)
        for conn in held:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
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

    def _serve(self, conn):
        with self._lock:
            self._open.add(conn)
        buf = b""
        try:
            while True:
                request = _read_request(conn, buf)
                if request is None:
                    return
                method, path, headers, body, buf = request
                if method == "GET":
                    conn.sendall(self._idle_vllm(path))
                    continue
                with self._lock:
                    self.hits += 1
                    hit = self.hits
                if not self._answer(conn, _Request(path, headers, body), hit):
                    return
        except OSError:
            pass
        finally:
            with self._lock:
                self._open.discard(conn)
            conn.close()

    @staticmethod
    def _idle_vllm(path):
        path = path.split("?", 1)[0]
        if path == "/metrics":
            return _response(200, "OK", "text/plain; version=0.0.4", METRICS)
        if path == "/health":
            return _response(200, "OK", "application/json", b"")
        if path == "/v1/models":
            return _response(200, "OK", "application/json", MODELS)
        return _response(404, "Not Found", "application/json", b'{"detail":"Not Found"}')

    def _answer(self, conn, req, hit):
        """Answers generation request number `hit` as the mode says; False when the
        connection is done (it is then closed)."""
        mode, odd = self.mode, hit % 2 == 1
        if mode == "reset":
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            return False
        if mode == "garbage":
            conn.sendall(NOT_HTTP)
            return False
        if mode == "http500":
            conn.sendall(_response(500, "Internal Server Error", "application/json", ERROR_500))
            return True
        if mode == "cut-stream" and req.stream:
            whole = req.event("x " * 20)
            half = whole[:31]  # "data: " and 25 bytes of the JSON
            if odd:
                conn.sendall(SSE_HEAD + _chunk(whole) + _chunk(half))
            else:
                conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                             b"connection: close\r\n\r\n" + whole + half)
            return False
        if mode == "cut-stream":
            whole = req.completion("x " * 20)
            conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                         b"content-length: %d\r\n\r\n%s" % (len(whole) + 100, whole[:40]))
            return False
        if mode == "no-done":
            conn.sendall(SSE_HEAD + _chunk(req.event("hello")) + LAST_CHUNK)
            return True
        if mode == "json-for-stream":
            whole = req.completion("x " * 20)
            if odd:
                conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                             b"content-length: %d\r\n\r\n%s"
                             % (len(whole), whole[:len(whole) // 2]))
            else:
                conn.sendall(_response(200, "OK", "application/json", whole,
                                       b"connection: close\r\n"))
            return False
        if mode == "silence":
            conn.sendall(SSE_HEAD if req.stream else
                         b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                         b"content-length: 1000\r\n\r\n")
            while conn.recv(65536):  # until the peer closes
                pass
            return False
        if mode == "keepalive-then-close":
            conn.sendall(SSE_HEAD + _chunk(KEEPALIVE))
            time.sleep(0.2)
            conn.sendall(_chunk(KEEPALIVE))
            return False
        if mode == "keepalive-then-stream":
            conn.sendall(SSE_HEAD)
            end = time.monotonic() + self.delay
            while time.monotonic() < end:
                conn.sendall(_chunk(KEEPALIVE))
                time.sleep(0.3)
            conn.sendall(_chunk(req.event("queued")) + _chunk(DONE) + LAST_CHUNK)
            return True
        assert mode == "slow", mode
        time.sleep(self.delay)
        if req.stream:
            conn.sendall(SSE_HEAD + _chunk(req.event("late")) + _chunk(DONE) + LAST_CHUNK)
        else:
            conn.sendall(_response(200, "OK", "application/json", req.completion("late")))
        return True
