// RouterServer: the fleet's single OpenAI endpoint. For each generation request it
// tokenizes the prompt (chat template applied) with the engines' tokenizer
// (prompt_tokenizer.h), takes a snapshot
// of the endpoint table, runs the scheduling profile, and proxies the request to the
// picked endpoint over keep-alive upstream connections, streaming the response through as
// it arrives (whole SSE events). A failure before the first response byte (refused, reset,
// 502, 503, an endpoint going down while the request waits on it) is retried on the
// next-best endpoint, up to proxy.maxRetries times; once bytes have gone to the client a
// failure ends an SSE stream with an error event (never a fake normal finish); with no
// endpoint to try the answer is 503 with Retry-After (internal/proxy_call.h). Streams' heads
// are bounded by proxy.firstByteTimeoutMs, buffered responses (heads only with the whole
// completion) by proxy.requestTimeoutMs. Failing requests eject their endpoint for a while
// (outlierDetection, outlier_detection.h). A client that disconnects cancels the upstream
// request, which the engine sees as a disconnect.
//
// Also: GET /health, GET /ready (as /health, and 503 until every Kubernetes-discovered pool
// has listed its pods once: kube_pool_resolver.h), GET /v1/models (the configured model, with the
// `created`, `owned_by`, `root` and smallest `max_model_len` the healthy engines report on their
// own /v1/models, fetched beside the scrapes: engine_models.h), GET /debug/endpoints (the endpoint
// table as JSON: health, last scrape error, credentials' source, KV event stream state), GET
// /metrics (RouterMetrics). A known path asked with another method is answered 405 with an Allow
// header, an unknown path 404, both with OpenAI error bodies.
//
// Endpoints with credentials (router_config.h) get their key with forwarded requests and
// scrapes; a 401/403 scrape is logged once and shown in /debug/endpoints and the metrics.
// An endpoint that answers 503 with Retry-After (an engine draining for shutdown) is
// retried elsewhere and gets no new request for that long (at most 30 s).
//
// Graceful drain (the CLI's SIGTERM/SIGINT, Envoy's drain sequence): StartDrain makes
// /health answer 503 and new generation requests 503 with Retry-After, an OpenAI error body
// and Connection: close, while requests in flight go on; WaitDrained waits for them up to
// the shutdown timeout (InterruptDrain, a second signal, cuts that short); AbortInFlight ends
// what is left with a clean error (a stream: an SSE error event, then `data: [DONE]`; a
// buffered request: 503 with Retry-After); then Stop. Every proxied response carries
// x-switchyard-endpoint and a signed x-session-token, and every generation response its
// x-request-id (request_id.h). Pools named by DNS are kept by a DnsPoolResolver, InferencePool
// pools by a KubePoolResolver.
//
// With extProc configured, the same admission and scheduling also answer Envoy's ext_proc
// protocol (extproc/ext_proc_server.h): the gateway proxies, the router picks.
//
// Threads: `listen.threads` event loops run the handlers and the upstream calls they
// start (the HTTP server and the upstream client share them, so a request stays on one
// thread from its first byte to its last); an EndpointScraper polls every endpoint from a
// thread and a client loop of its own (endpoint_scraper.h; an endpoint leaves the snapshots
// after three failed scrapes in a row, and the requests waiting on it are woken to retry
// elsewhere); a KV event subscriber thread feeds the precise prefix index; with DNS pools, an
// owned "sy-dns" thread re-resolves them. Start/Stop from one controlling thread.
#pragma once

#include <chrono>
#include <memory>

#include "absl/status/statusor.h"

#include "router/router_config.h"

namespace switchyard::router {

class RouterServer {
 public:
  static absl::StatusOr<std::unique_ptr<RouterServer>> Start(const RouterConfig& config);
  virtual ~RouterServer() = default;
  virtual int port() const = 0;
  // The ext_proc gRPC server's port and its health server's (-1: none).
  virtual int ext_proc_port() const = 0;
  virtual int grpc_health_port() const = 0;
  // Idempotent. Any thread.
  virtual void StartDrain() = 0;
  // True once no proxied request is in flight; false at `deadline` or after InterruptDrain.
  virtual bool WaitDrained(std::chrono::steady_clock::time_point deadline) = 0;
  // Ends a WaitDrained (from another thread) now.
  virtual void InterruptDrain() = 0;
  // Ends the requests still in flight with a clean error.
  virtual void AbortInFlight() = 0;
  virtual void Stop() = 0;
};

}  // namespace switchyard::router
