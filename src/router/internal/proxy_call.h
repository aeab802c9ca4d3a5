// ProxyCall: one client request proxied to the engines, with retries on the next-best
// endpoint while nothing has reached the client. Owned by shared_ptr: the upstream call
// (whose response handler it is) holds it until the exchange ends.
//
// Retried while no byte has reached the client: connect failures (refused, reset, closed,
// unresolved), 502 and 503 heads, an upstream that dies after its head but before any body
// byte was passed on (reset, truncated or malformed: vLLM sends an SSE head as soon as it
// queues a request, so a SIGKILLed engine leaves queued streams in this state), an endpoint
// that leaves the routing set while the request waits on it (failed scrapes or an ejection:
// a SIGSTOPped engine answers nothing and closes nothing; the wait is cancelled at once,
// EndpointWaiters), and for SSE requests a timeout (none of their bytes means the engine is
// stuck). A buffered response's head comes only with the whole completion, which may wait
// long in a healthy engine's queue: its head timeout is the generous request timeout, not a
// liveness check (health is), and it is not retried, which would repeat the work.
//
// Streams pass on whole events only (SseFramer): a stream's head goes to the client with its
// first data event, not when the upstream's head arrives, and SSE comments before it (our
// engine's keep-alives while the request is queued) go nowhere, so a queued stream stays
// retryable; a failure mid-stream drops the partial event and ends the stream with an error
// event, then [DONE] (never a fake finish_reason). A stream that ends without [DONE] failed.
// An answer to a stream request that is not an event stream (JSON: an error, or an upstream
// that does not stream) is buffered and passed on whole, and a failure of it is a JSON error,
// never SSE in a JSON body. Every response carries the request's x-request-id (the
// upstream's is dropped). The router's own errors are OpenAI error bodies; 503 (no endpoint
// could serve) and 429 (saturation, ResourceExhausted: flow control's, when it comes) carry
// Retry-After.
//
// The outcome goes to RouterMetrics: requests by code (499 when the client left first; a
// client that closes a stream after its [DONE] event, as the openai client does, counts
// under the stream's status; "error" for a stream ended by an error event), latency, first
// byte, retries. Each attempt's outcome goes to outlier detection (ProxyRouting::AttemptEnded):
// failed for connect errors, resets, timeouts, 5xx heads, malformed or unfinished responses;
// succeeded for any other answer, 4xx included; not counted when the client left or the
// router cancelled it.
//
// Back-pressure: a stream whose client reads slower than the engine writes stops reading the
// upstream once more than kStreamPauseBytes wait for the client, and reads on once they are
// down to kStreamResumeBytes; the engine's socket then fills and its writes wait. So a slow
// client costs the router at most about kStreamPauseBytes (plus one unfinished event), not
// the whole stream.
//
// Prefill/decode disaggregation (a target with a prefill endpoint, picked by the
// disagg-profile-handler): each attempt first POSTs the prefill leg (pd_bodies.h: max_tokens 1,
// no stream, kv_transfer_params {"do_remote_decode": true}) to the prefill endpoint, then sends
// the client's request to the decode endpoint with the kv_transfer_params the prefill answered
// and `x-prefiller-host-port`; the response names both endpoints (x-switchyard-endpoint,
// x-switchyard-prefill-endpoint). A failed prefill leg (connect error, timeout, a non-200
// answer, no kv_transfer_params) is no failure of the request: the decode endpoint gets the
// client's request as it is and computes the prompt. Both count in
// switchyard_router_pd_decisions_total. A client that leaves during the prefill leg is counted
// (499) when the leg ends.
//
// A target with a KV source (p2p-source-producer) gets `x-kv-cache-source-host-port` with its
// attempt, counted in switchyard_router_kv_source_requests_total; an attempt without one sends
// none.
//
// Threads: Start on the HTTP server loop; the response handler's methods on an HTTP client
// loop; the client's close callback on the server loop. A mutex orders them. The endpoint
// table wakes a waiting attempt from any thread, only by cancelling its upstream call
// (posted), so the wake arrives as OnDone(Cancelled). Lock order: this call's mutex, then the
// endpoint table's, then an EndpointWaiters' (a leaf).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/container/inlined_vector.h"
#include "absl/types/span.h"

#include "base/mutex.h"
#include "net/http_client.h"
#include "net/http_server.h"
#include "router/endpoint.h"
#include "router/endpoint_waiters.h"
#include "router/internal/generated_tokens.h"
#include "router/internal/sse_framer.h"
#include "router/router_metrics.h"

namespace switchyard::router::internal {

// Where one attempt goes. Views into the routing's endpoint snapshot: name, address, pool and
// load stay valid until the routing's next NextTarget (or its end); metrics is the router's
// and outlives the request.
struct ProxyTarget {
  std::string_view name;
  std::string_view address;
  std::string_view pool;
  std::string_view authorization;       // the endpoint's credentials; empty: none
  EndpointRecorder* metrics = nullptr;  // the endpoint's request series
  EndpointLoad* load = nullptr;         // the endpoint's in-flight accounting
  // Set when the prompt is to be prefilled elsewhere (the views as above).
  struct Prefill {
    std::string_view name;
    std::string_view address;
    std::string_view authorization;
    EndpointLoad* load = nullptr;
  };
  std::optional<Prefill> prefill = std::nullopt;
  // The peer the endpoint pulls the prompt's cached KV from (p2p-source-producer), sent as
  // x-kv-cache-source-host-port; empty: none. Only without `prefill`. Owned by the routing,
  // valid as the views above.
  std::string_view kv_source = {};
};

struct ProxyRequest {
  // What goes upstream: method, target, headers (already filtered for forwarding), body and
  // head timeout. Its `upstream` is set per attempt; every attempt sends this one request.
  net::HttpClientRequest http;
  // Where the request's x-request-id is in `http.headers`: sent upstream, then echoed to the
  // client (the response takes the string over once nothing more goes upstream).
  size_t request_id_header = 0;
  // The client's Authorization header (not in `http.headers`): sent to endpoints without
  // credentials of their own; an endpoint's credentials replace it (router_config.h).
  std::string client_authorization;
  std::chrono::steady_clock::time_point arrival;
  int64_t prompt_tokens = 0;
  // The client asked for SSE: an event-stream answer streams through, and a failure after
  // the first event ends it with an error event. Otherwise, and for any answer that is not an
  // event stream, the response is buffered, so any upstream failure can still be retried or
  // answered with a proper error.
  bool stream = false;
  // The prefill leg's whole-response timeout.
  std::chrono::milliseconds prefill_timeout{60'000};
};

// Where a ProxyCall goes: the router's scheduling for one request. Called under the
// ProxyCall's lock, so one call at a time.
class ProxyRouting {
 public:
  virtual ~ProxyRouting() = default;
  // The next endpoint to try, excluding those already `tried` (by name); nullopt when none is
  // left. Ends the validity of the targets it returned before.
  virtual std::optional<ProxyTarget> NextTarget(absl::Span<const std::string> tried) = 0;
  // The request goes to `target`, which NextTarget has just returned.
  virtual void Picked(const ProxyTarget& target) = 0;
  // The x-session-token of responses from `endpoint`; empty: the response carries none.
  virtual std::string SessionToken(std::string_view endpoint) = 0;
  // The attempt on `target` (NextTarget's last) ended, `failed` or not, by outlier
  // detection's rules (the header comment above).
  virtual void AttemptEnded(const ProxyTarget& target, bool failed) = 0;
  // `target` refused the request with 503 and Retry-After (an engine draining for
  // shutdown): it takes no new request for `retry_after`.
  virtual void Refused(const ProxyTarget& target, std::chrono::seconds retry_after) = 0;
  // The response that reaches the client generated `tokens` more (GeneratedTokens: negative
  // when a usage count corrects the estimate).
  virtual void Generated(int64_t tokens) = 0;
};

// The Retry-After of the router's own 503s (draining, shutting down): soon, elsewhere.
inline constexpr int kRetryAfterSeconds = 1;

class ProxyCall final : public net::HttpResponseHandler,
                        public std::enable_shared_from_this<ProxyCall> {
 public:
  static constexpr size_t kStreamPauseBytes = 64 << 10;
  static constexpr size_t kStreamResumeBytes = 16 << 10;

  // Takes `request` over (one move: it is large).
  ProxyCall(ProxyRequest&& request, std::shared_ptr<net::HttpResponder> responder,
            net::HttpClient* client, RouterMetrics* metrics, int max_retries,
            std::unique_ptr<ProxyRouting> routing);

  // Tries the first target.
  void Start();
  // Ends the call now with `error` (the router is shutting down): a stream that has begun
  // gets an SSE error event and `data: [DONE]`; otherwise the client gets 503 with
  // Retry-After. The upstream request is cancelled. Harmless once the call ended.
  void Abort(const absl::Status& error);

  // The upstream attempt's response (net::HttpResponseHandler).
  void OnHead(int status, const net::HeaderList& headers) override;
  bool OnBody(std::string_view chunk) override;
  void OnDone(const absl::Status& status) override;

 private:
  void TryNext() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sends the attempt to current_: with `decode_body` (the disaggregated request) when set,
  // else the client's body.
  void SendAttempt(std::optional<std::string> decode_body) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The Authorization an upstream gets: its endpoint's credentials, else the client's.
  std::string_view AuthorizationFor(std::string_view endpoint_credentials) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The prefill leg of a disaggregated attempt; its end continues in PrefillDone.
  void StartPrefill() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PrefillDone(absl::StatusOr<net::HttpClient::Response> response);
  // Counts a retry for `reason` on the current endpoint and tries the next.
  void Retry(RetryReason reason) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FinishAttempt() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The current attempt's response generated `tokens` more (what GeneratedTokens::Feed*
  // returned): its endpoint's in-flight tokens and the routing learn of them.
  void Generated(int64_t tokens) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The current attempt's endpoint load ends (EndpointLoad::Ended).
  void EndLoad() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends the attempt's wait on its endpoint (EndpointWaiters); returns whether it was woken:
  // the endpoint went down and the attempt is cancelled, so nothing of it may reach the client.
  bool StopWaiting() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A stream's body ended: passes on an event only the end completes. Internal when the
  // stream did not end with [DONE].
  absl::Status EndStream() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The first response byte goes to the client `now` (a stream's head is sent here).
  void FirstByte(std::chrono::steady_clock::time_point now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The exchange ended `now` with `code` (an HTTP status, 499 or kStreamErrorCode).
  void Finished(int code, std::chrono::steady_clock::time_point now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The head's headers for the client, with the request's x-request-id. REQUIRES: the
  // response to the client starts now (TakeRequestId).
  net::HeaderList TakeHeadHeaders() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The request's x-request-id, moved out of the upstream request's headers. REQUIRES: no
  // attempt follows (the response to the client starts now); called once.
  std::string TakeRequestId() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // An error response from the router itself (`extra`: headers besides x-request-id).
  void SendError(const absl::Status& error, net::HeaderList extra = {})
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::shared_ptr<net::HttpResponder> responder_;
  net::HttpClient* const client_;
  RouterMetrics* const metrics_;
  const int max_retries_;

  base::Mutex mu_;
  // Its http.upstream, its body (for a disaggregated attempt) and the attempt's own headers
  // change per attempt, and its request id moves to the response at the end.
  ProxyRequest request_ ABSL_GUARDED_BY(mu_);
  // The client's body, as it came (shared, not copied).
  const net::SharedBody client_body_;
  const std::unique_ptr<ProxyRouting> routing_ ABSL_PT_GUARDED_BY(mu_);
  // Most requests go to one endpoint: no allocation for it.
  absl::InlinedVector<std::string, 2> tried_ ABSL_GUARDED_BY(mu_);
  // The attempt's target. Once NextTarget found none, only its metrics may be used (the
  // request's outcome is counted there).
  std::optional<ProxyTarget> current_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<net::HttpRequestHandle> handle_ ABSL_GUARDED_BY(mu_);
  // The attempt waits on its endpoint (from its start until its first byte goes to the
  // client or it ends), and whether the endpoint's going down woke it.
  EndpointWaiter waiter_;
  bool waiting_ ABSL_GUARDED_BY(mu_) = false;
  bool woken_ ABSL_GUARDED_BY(mu_) = false;
  // Something (a stream's head, or the whole buffered response) went to the client: no
  // retry from then on.
  bool first_byte_sent_ ABSL_GUARDED_BY(mu_) = false;
  // The attempt's head: passed on with the first event (SSE) or with the whole response.
  int head_status_ ABSL_GUARDED_BY(mu_) = 0;
  // A constant, or head_content_type_copy_.
  std::string_view head_content_type_ ABSL_GUARDED_BY(mu_);
  std::string head_content_type_copy_ ABSL_GUARDED_BY(mu_);
  net::HeaderList head_headers_ ABSL_GUARDED_BY(mu_);
  // The attempt's answer is an event stream for a stream request: passed on event by event.
  bool sse_ ABSL_GUARDED_BY(mu_) = false;
  SseFramer framer_ ABSL_GUARDED_BY(mu_);
  // The attempt's tokens generated so far, counted as they pass to the client.
  GeneratedTokens generated_ ABSL_GUARDED_BY(mu_);
  std::string buffered_ ABSL_GUARDED_BY(mu_);
  // Why the router cut the attempt short (a malformed stream); OnDone reports it instead of
  // the Cancelled the cut brings.
  absl::Status cut_ ABSL_GUARDED_BY(mu_);
  bool retry_this_attempt_ ABSL_GUARDED_BY(mu_) = false;  // a 502/503 head to skip
  RetryReason retry_reason_ ABSL_GUARDED_BY(mu_) = RetryReason::kConnect;
  bool prefill_pending_ ABSL_GUARDED_BY(mu_) = false;
  // The last this many headers are the attempt's own (x-prefiller-host-port or
  // x-kv-cache-source-host-port, Authorization), replaced by the next attempt's.
  size_t attempt_headers_ ABSL_GUARDED_BY(mu_) = 0;
  bool prefill_running_ ABSL_GUARDED_BY(mu_) = false;
  bool disaggregated_ ABSL_GUARDED_BY(mu_) = false;  // the attempt's prefill leg succeeded
  bool client_gone_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status last_error_ ABSL_GUARDED_BY(mu_);
};

}  // namespace switchyard::router::internal
