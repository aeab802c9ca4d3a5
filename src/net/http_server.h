// HttpServer: an HTTP/1.1 server on Boost.Beast for the engine's and the router's fronts.
//
// Threads: `num_threads` event loops, one io_context each, every one owned, named
// ("sy-http-N") and joined by Stop(); or the loops of a shared EventLoops. A connection
// lives on one loop for its whole life; the acceptor hands new connections out
// round-robin. The handler runs on the connection's loop and must not block: long work (an
// engine request) is handed to another thread, which answers later through the
// thread-safe HttpResponder.
//
// Limits, decided before the bytes are buffered (each answered with the error body that
// `options.error_body` formats, then the connection is closed):
//   - request line + headers over max_header_bytes          -> 431
//   - Content-Length over max_body_bytes (or a chunked body
//     growing past it)                                       -> 413
//   - malformed request line / headers / chunk framing       -> 400
//   - headers not complete within header_timeout (slowloris) -> 408
//   - body stalled for body_idle_timeout                     -> 408
//   - more than max_connections_per_client open from one client address: the new one is
//     closed at once;
//   - max_connections open: the connection waiting the longest (idle between requests, or
//     its request head still incomplete) is closed to make room for the new one; when none
//     is waiting (every one is being answered), the new one is closed.
// After a wave of connections (say, slow clients) the freed memory goes back to the system
// (connection_admission.h).
// Keep-alive connections idle for keep_alive_timeout are closed. A response whose unsent
// bytes exceed max_pending_write_bytes (a client that stopped reading), or whose writes
// make no progress for write_timeout, closes the connection; the responder then reports
// closed.
//
// Disconnects: while a request's response is not finished, the connection keeps a read
// pending, so a client that closes or resets the socket is noticed at once (in the queue
// or mid-stream) and the responder's close callback runs. Pipelined requests are read
// one at a time after the current response ends.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/statusor.h"

#include "net/event_loops.h"
#include "net/http_message.h"

namespace switchyard::net {

// Answers one request. Exactly one of Send or StartStream..End makes the response.
// Thread-safe: any thread may call any method (work is posted to the connection's loop);
// calls after the connection closed are dropped. Shared by the handler and whoever
// answers later; the connection keeps its own reference until the response is done.
class HttpResponder {
 public:
  virtual ~HttpResponder() = default;

  // A complete response with Content-Length. An extra header "connection: close" closes the
  // connection once it is written (it goes out as the Connection header).
  virtual void Send(int status, std::string_view content_type, std::string body,
                    HeaderList extra_headers = {}) = 0;

  // A streamed response (Transfer-Encoding: chunked): the headers go out now, then each
  // Write as one chunk, in call order; End sends the last chunk. For SSE, content_type is
  // "text/event-stream" and the server adds Cache-Control: no-cache.
  virtual void StartStream(int status, std::string_view content_type,
                           HeaderList extra_headers = {}) = 0;
  // Returns false once the connection is closed (the data is dropped).
  virtual bool Write(std::string data) = 0;
  virtual void End() = 0;

  // Registers the callback run once, on the connection's loop, when the connection closes
  // before the response finished (client gone, reset, timeout, server stopping). When the
  // connection is already closed, runs it at once on the calling thread. One callback;
  // a second call replaces the first.
  virtual void OnClose(std::function<void()> callback) = 0;
  virtual bool closed() const = 0;
  // Bytes queued and not yet written to the socket.
  virtual size_t pending_write_bytes() const = 0;
  // Back-pressure for a writer faster than its client: registers the callback run once, on
  // the connection's loop, when pending_write_bytes() is at most `low_water`; at once (before
  // OnDrained returns, when called on that loop) when it already is. Dropped, never run, when
  // the connection closes (OnClose's callback runs instead) or the response is fully written.
  // One callback; a second call replaces the first.
  virtual void OnDrained(size_t low_water, std::function<void()> callback) = 0;
};

// The request is the handler's to take apart. Passed as an rvalue: a handler that takes it
// by reference moves out only what it keeps; one that takes it by value gets it moved whole.
using HttpHandler =
    std::function<void(HttpRequest&& request, std::shared_ptr<HttpResponder> responder)>;

// The (content_type, body) of an error response the HTTP layer decides, from its status and
// a message of ours.
using ErrorBodyFormatter =
    std::function<std::pair<std::string, std::string>(int http_status, std::string_view message)>;

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0 picks a free port; see HttpServer::port().
  int num_threads = 1;
  size_t max_header_bytes = 16 << 10;
  size_t max_body_bytes = 4 << 20;
  size_t max_connections = 4096;
  // By client IP address; 0: no limit. Off by default: an engine's clients are a few routers
  // or gateways, each with many connections; the router sets one for its public side.
  size_t max_connections_per_client = 0;
  size_t max_pending_write_bytes = 16 << 20;
  std::chrono::milliseconds header_timeout{10'000};
  std::chrono::milliseconds body_idle_timeout{30'000};
  std::chrono::milliseconds keep_alive_timeout{60'000};
  std::chrono::milliseconds write_timeout{60'000};
  // Formats the body of the transport errors above (400, 408, 413, 431). Default:
  // {"error": {"message", "type", "code"}} JSON.
  ErrorBodyFormatter error_body;
  // Value of the Server header; empty omits it.
  std::string server_name = "switchyard";
};

class HttpServer {
 public:
  // Binds, listens and starts the loops. Errors: the address cannot be bound (in use,
  // bad host), invalid options (num_threads < 1).
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const HttpServerOptions& options,
                                                           HttpHandler handler);
  // The same on shared loops (options.num_threads is not used): Stop closes this server's
  // listener and connections and leaves the loops running (event_loops.h).
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const HttpServerOptions& options,
                                                           HttpHandler handler,
                                                           std::shared_ptr<EventLoops> loops);
  virtual ~HttpServer() = default;

  // The bound port (useful with port 0).
  virtual int port() const = 0;
  // Stops accepting, closes every connection (their OnClose callbacks run) and joins the
  // loops it owns; on shared loops, no handler of the server's runs once it returned.
  // Idempotent; the destructor calls it. Must not be called from a loop thread.
  virtual void Stop() = 0;
};

}  // namespace switchyard::net
