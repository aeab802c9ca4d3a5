// HttpClient: an HTTP/1.1 client for the router's upstream traffic (proxying to engines,
// scraping metrics, health checks), on its own event loops (owned, named "sy-httpc-N",
// joined by Stop) or on shared EventLoops. Each loop keeps its own keep-alive connection pool per
// upstream
// ("host:port"); a request runs entirely on one loop, chosen by the caller (a hint, so
// that one downstream connection's upstream traffic stays on one loop) or round-robin.
//
// A request is one call with a response handler (or the same as three callbacks):
//   OnHead(status, headers)  once, when the response head arrived (time to first byte)
//   OnBody(chunk)            zero or more times, in order, as body bytes arrive (chunked
//                            framing removed); returns false to pause reading until
//                            Resume() (back-pressure from a slow downstream client);
//                            OnDone(OK) still follows at once when that chunk ended
//                            the body
//   OnDone(status)           exactly once: OK after the whole body, or the error
// Errors: Unavailable (name not resolved, connect refused, reset or closed before the first
// response byte: nothing reached the client, safe to retry elsewhere; a pooled connection
// found closed this way is first retried once, internally, on a fresh one),
// DeadlineExceeded (connect, first-byte or idle timeout), Cancelled (Cancel() or Stop()),
// InvalidArgument (bad upstream or request), Internal (malformed or truncated response,
// including a reset or close after the first response byte; the connection is dropped).
// A 502 or 503 is not an error: it is a head like any other.
//
// Threads: Start/Stop from one controlling thread; Send and every RequestHandle method from
// any thread (work is posted to the request's loop); callbacks run on that loop and must
// not block, except that a Send or Fetch after Stop reports Cancelled at once, on the
// caller's thread. Responses over max_response_bytes (when not streaming) fail with
// ResourceExhausted.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "net/event_loops.h"
#include "net/http_message.h"
#include "net/shared_body.h"

namespace switchyard::net {

// What Send reads once, when called: the call keeps the encoded head and a share of the body,
// not the request, so that a caller that retries elsewhere sends the same request again
// without copying it.
struct HttpClientRequest {
  std::string method = "GET";
  std::string upstream;  // "host:port"
  std::string target;    // "/v1/completions"
  HeaderList headers;    // Host and Content-Length are set by the client
  SharedBody body;
  // The request's own first-byte timeout (HttpClientOptions::first_byte_timeout), for a
  // caller whose requests differ in how long their head may take; unset: the client's.
  std::optional<std::chrono::milliseconds> first_byte_timeout;
};

// Receives one request's response, on the request's loop, in the order above. The call holds
// it until OnDone returned.
class HttpResponseHandler {
 public:
  virtual ~HttpResponseHandler() = default;
  virtual void OnHead(int status, const HeaderList& headers) = 0;
  virtual bool OnBody(std::string_view chunk) = 0;
  virtual void OnDone(const absl::Status& status) = 0;
};

// The handler as callbacks; an unset one is skipped (on_body then reads on).
struct HttpClientCallbacks {
  std::function<void(int status, const HeaderList& headers)> on_head;
  std::function<bool(std::string_view chunk)> on_body;
  std::function<void(const absl::Status& status)> on_done;
};

struct HttpClientOptions {
  int num_threads = 1;
  std::chrono::milliseconds connect_timeout{2'000};  // name resolution and connect
  // From the request starting to go out until the whole response head arrived.
  std::chrono::milliseconds first_byte_timeout{60'000};
  std::chrono::milliseconds idle_timeout{60'000};  // between body bytes (not while paused)
  std::chrono::milliseconds pool_idle_timeout{30'000};
  size_t max_idle_connections_per_upstream = 64;
  size_t max_header_bytes = 64 << 10;    // response status line and headers
  size_t max_response_bytes = 16 << 20;  // Fetch's body
};

// Cancels or resumes one request; harmless after it finished.
class HttpRequestHandle {
 public:
  virtual ~HttpRequestHandle() = default;
  // Stops the request; on_done(Cancelled) follows unless it already finished. Once Cancel
  // returned, no on_head or on_body starts (one already running may finish). The
  // connection is closed, not pooled (the upstream engine sees the disconnect and aborts).
  virtual void Cancel() = 0;
  // Resumes reading after on_body returned false. Posted to the request's loop, so one made
  // while on_body is still running (before it returned false) resumes after that pause.
  virtual void Resume() = 0;
};

class HttpClient {
 public:
  static absl::StatusOr<std::unique_ptr<HttpClient>> Start(const HttpClientOptions& options);
  // The same on shared loops (options.num_threads is not used), such as an HttpServer's:
  // a handler's Send then runs on the handler's own loop. Stop cancels this client's calls
  // and closes its pools, and leaves the loops running (event_loops.h).
  static absl::StatusOr<std::unique_ptr<HttpClient>> Start(const HttpClientOptions& options,
                                                           std::shared_ptr<EventLoops> loops);
  virtual ~HttpClient() = default;

  // Starts a request on loop `loop` (any value; taken modulo the number of loops); when
  // unset, on the calling thread's loop if it runs one of the client's loops (a callback of
  // this client, or a handler of a server sharing its loops), else round-robin.
  virtual std::shared_ptr<HttpRequestHandle> Send(const HttpClientRequest& request,
                                                  std::shared_ptr<HttpResponseHandler> handler,
                                                  std::optional<int> loop = std::nullopt) = 0;
  std::shared_ptr<HttpRequestHandle> Send(const HttpClientRequest& request,
                                          HttpClientCallbacks callbacks,
                                          std::optional<int> loop = std::nullopt);

  // Convenience for small responses (metrics scrapes, health): the whole body, or the error.
  struct Response {
    int status = 0;
    HeaderList headers;
    std::string body;
  };
  virtual void Fetch(const HttpClientRequest& request,
                     std::function<void(absl::StatusOr<Response>)> done) = 0;

  // Cancels everything in flight (on_done(Cancelled)), closes pooled connections, joins the
  // loops it owns; on shared loops, no handler of the client's runs once it returned.
  virtual void Stop() = 0;
};

}  // namespace switchyard::net
