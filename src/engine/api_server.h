// ApiServer: the engine's HTTP front, vLLM's OpenAI-compatible server surface on
// net::HttpServer:
//
//   POST /v1/completions, /v1/chat/completions   generation (generation_handler.h)
//   GET  /v1/models                              the served model
//   POST /tokenize, /detokenize                  vLLM's tokenizer routes
//   GET  /health, /version, /metrics             liveness, build, Prometheus text
//   POST /reset_prefix_cache                     development mode only, as in vLLM
//
// With an API key, what vLLM's --api-key protects wants `Authorization: Bearer <key>`
// (compared in constant time) and answers 401 otherwise: every path under /v1 (the model
// API), whether or not it is a route. /health, /ping, /version, /metrics, /tokenize,
// /detokenize and the development routes stay open, as in vLLM, so that routers and
// Prometheus scrape a keyed engine without the key. Unknown paths get 404 and known paths with
// another method 405 with Allow (net::RouteTable), all with OpenAI-shaped error bodies, as are
// the transport errors the HTTP server decides (400, 408, 413, 431).
//
// Threads: routes run on the HTTP loops; see HttpServer. Borrows the serving context.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"

#include "engine/serving_context.h"
#include "net/http_server.h"
#include "net/route_table.h"

namespace switchyard::engine {

struct ApiServerOptions {
  net::HttpServerOptions http;
  std::string api_key;  // empty: no authentication
  // vLLM's VLLM_SERVER_DEV_MODE: serves the development routes; without it they are 404.
  bool dev_mode = false;
};

class ApiServer {
 public:
  // REQUIRES: `ctx` outlives the server.
  static absl::StatusOr<std::unique_ptr<ApiServer>> Start(const ApiServerOptions& options,
                                                          const ServingContext* ctx);
  int port() const { return http_->port(); }
  void Stop() { http_->Stop(); }

 private:
  ApiServer(const ApiServerOptions& options, const ServingContext* ctx);
  void Dispatch(net::HttpRequest request, std::shared_ptr<net::HttpResponder> responder);
  // The request's path is one the API key protects.
  static bool Guarded(const net::HttpRequest& request);
  bool Authorized(const net::HttpRequest& request) const;

  const ApiServerOptions options_;
  const net::RouteTable routes_;
  std::unique_ptr<net::HttpServer> http_;
};

}  // namespace switchyard::engine
