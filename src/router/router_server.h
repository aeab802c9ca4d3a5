// RouterServer: the fleet's single OpenAI endpoint. For each generation request it
// tokenizes the prompt (chat template applied) with the engines' tokenizer, takes a snapshot
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
// Also: GET /health, GET /v1/models (the configured model), GET /debug/endpoints (the
// endpoint table as JSON), GET /metrics (RouterMetrics). Every proxied response carries
// x-switchyard-endpoint and a signed x-session-token, and every generation response its
// x-request-id (request_id.h). Pools named by DNS are kept by a DnsPoolResolver.
//
// Threads: `listen.threads` event loops run the handlers and the upstream calls they
// start (the HTTP server and the upstream client share them, so a request stays on one
// thread from its first byte to its last); one owned scraper thread polls every endpoint's /metrics
// through a client loop of its own (scraping.timeoutMs bounds each scrape; at most one per endpoint
// in flight; an endpoint leaves the snapshots after three failed scrapes in a row, and the
// requests waiting on it are woken to retry elsewhere); a KV event
// subscriber thread feeds the precise prefix index; with DNS pools, an owned "sy-dns" thread
// re-resolves them. Start/Stop from one controlling thread.
#pragma once

#include <memory>

#include "absl/status/statusor.h"

#include "router/router_config.h"

namespace switchyard::router {

class RouterServer {
 public:
  static absl::StatusOr<std::unique_ptr<RouterServer>> Start(const RouterConfig& config);
  virtual ~RouterServer() = default;
  virtual int port() const = 0;
  virtual void Stop() = 0;
};

}  // namespace switchyard::router
