"""A bad upstream for the chaos tests: a Python server on loopback whose GET /metrics, /health
and /v1/models answer as an idle vLLM would (so scrapes find it healthy and empty), and whose
generation routes (POST /v1/...) fail in one MODE:

  reset            reads the request, then resets the connection (RST: SO_LINGER 0)
  garbage          answers bytes that are not HTTP, then closes
  http500          answers 500 with an OpenAI error body (as an engine whose step failed)
  cut-stream       a stream: its head, one whole SSE event, then half of the next event and
                   the connection closes (every other time chunked, cut before the last
                   chunk, or delimited by the close, so whole as HTTP); not a stream: a JSON head with a Content-Length
                   larger than the body it sends before it closes
  json-for-stream  answers a stream request 200 application/json: every other time a whole
                   completion, else half of one before the connection closes
  silence          sends a 200 head (SSE or JSON with a Content-Length) and then nothing,
                   holding the connection until the peer closes it

It runs on its own event loop in a thread; `hits` counts the generation requests it got.
engine_kind "vllm": its `engine:` in a router config."""
import asyncio
import json
import socket
import struct
import threading

METRICS = """# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="tiny"} 0.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="tiny"} 0.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{model_name="tiny"} 0.0
# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",num_gpu_blocks="1024"} 1.0
"""
MODELS = json.dumps({"object": "list", "data": [
    {"id": "tiny", "object": "model", "created": 1, "owned_by": "vllm", "max_model_len": 2048}]})
ERROR_500 = json.dumps({"error": {"message": "EngineCore encountered an issue.",
                                  "type": "InternalServerError", "param": None, "code": 500}})
MODES = ("reset", "garbage", "http500", "cut-stream", "json-for-stream", "silence")


def _completion(request_id, chat):
    choice = ({"index": 0, "message": {"role": "assistant", "content": "x " * 20},
               "finish_reason": "length"} if chat else
              {"index": 0, "text": "x " * 20, "finish_reason": "length"})
    return json.dumps({"id": f"{'chatcmpl' if chat else 'cmpl'}-{request_id}",
                       "object": "chat.completion" if chat else "text_completion",
                       "created": 1, "model": "tiny", "choices": [choice],
                       "usage": {"prompt_tokens": 5, "completion_tokens": 20,
                                 "total_tokens": 25}})


def _response(status, reason, content_type, body, extra=""):
    body = body.encode() if isinstance(body, str) else body
    return (f"HTTP/1.1 {status} {reason}\r\ncontent-type: {content_type}\r\n"
            f"content-length: {len(body)}\r\n{extra}\r\n").encode() + body


class GarbageUpstream:
    engine_kind = "vllm"

    def __init__(self, mode):
        assert mode in MODES, mode
        self.mode = mode
        self.hits = 0
        self._loop = asyncio.new_event_loop()
        self._held = set()
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(ready,), daemon=True,
                                        name=f"garbage-{mode}")
        self._thread.start()
        assert ready.wait(10), "the garbage upstream did not start"
        self.url = f"http://127.0.0.1:{self.port}"

    def _run(self, ready):
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._serve, "127.0.0.1", 0))
        self.port = self._server.sockets[0].getsockname()[1]
        ready.set()
        self._loop.run_forever()

    def stop(self):
        async def shutdown():
            self._server.close()
            for w in list(self._held):
                w.transport.abort()
        asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    async def _serve(self, reader, writer):
        self._held.add(writer)
        try:
            while await self._one(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._held.discard(writer)
            writer.transport.abort()

    async def _one(self, reader, writer):
        """Serves one request; False once the connection is done."""
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, path, _ = lines[0].split(" ", 2)
        headers = {k.strip().lower(): v.strip()
                   for k, _, v in (line.partition(":") for line in lines[1:] if line)}
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        if method == "GET":
            if path.startswith("/metrics"):
                writer.write(_response(200, "OK", "text/plain; version=0.0.4", METRICS))
            elif path.startswith("/v1/models"):
                writer.write(_response(200, "OK", "application/json", MODELS))
            else:
                writer.write(_response(200, "OK", "application/json", ""))
            await writer.drain()
            return True
        self.hits += 1
        try:
            stream = bool(json.loads(body).get("stream"))
        except ValueError:
            stream = False
        request_id = headers.get("x-request-id", "x")
        chat = "chat" in path
        await self._fail(reader, writer, stream, request_id, chat)
        return False

    async def _fail(self, reader, writer, stream, request_id, chat):
        mode = self.mode
        if mode == "reset":
            writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                                       struct.pack("ii", 1, 0))
            writer.transport.abort()
            return
        if mode == "garbage":
            writer.write(b"\x00\xff\x13SSH-2.0-not-http \xde\xad\xbe\xef\r\n\r\n" * 4)
        elif mode == "http500":
            writer.write(_response(500, "Internal Server Error", "application/json", ERROR_500))
        elif mode == "cut-stream" and stream:
            whole = _completion(request_id, chat)
            event = json.loads(whole)
            event["object"] = "chat.completion.chunk" if chat else "text_completion"
            event["choices"][0]["finish_reason"] = None
            del event["usage"]
            if chat:
                event["choices"][0]["delta"] = event["choices"][0].pop("message")
            sent = [f"data: {json.dumps(event)}\n\n".encode(),
                    f"data: {json.dumps(event)[:25]}".encode()]  # then half an event
            if self.hits % 2:
                # Chunked, as engines send streams: the connection closes before the last
                # chunk, so the body is cut short.
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                             b"transfer-encoding: chunked\r\n\r\n")
                for piece in sent:
                    writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            else:
                # Delimited by the close: the body ends whole as HTTP, mid-event as SSE.
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                             b"connection: close\r\n\r\n" + b"".join(sent))
        elif mode == "cut-stream":
            whole = _completion(request_id, chat).encode()
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
                         + str(len(whole) + 100).encode() + b"\r\n\r\n" + whole[:40])
        elif mode == "json-for-stream" and self.hits % 2:
            writer.write(_response(200, "OK", "application/json",
                                   _completion(request_id, chat), "connection: close\r\n"))
        elif mode == "json-for-stream":
            whole = _completion(request_id, chat).encode()  # dies in the middle of it
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
                         + str(len(whole)).encode() + b"\r\n\r\n" + whole[:len(whole) // 2])
        elif mode == "silence":
            if stream:
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                             b"transfer-encoding: chunked\r\n\r\n")
            else:
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                             b"content-length: 1000\r\n\r\n")
            await writer.drain()
            await reader.read()  # until the peer closes
            return
        await writer.drain()
