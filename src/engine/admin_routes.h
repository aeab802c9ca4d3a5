// The engine's non-generation routes: /v1/models, /tokenize, /detokenize (vLLM's forms,
// /tokenize also with chat messages), /health, /version, /metrics, /debug/kv, /debug/startup and
// vLLM's development route POST /reset_prefix_cache. Each answers on the HTTP loop thread, except
// the reset, which answers from the engine loop once it is done. Stateless; borrows the context.
#pragma once

#include <memory>

#include "engine/serving_context.h"
#include "net/http_server.h"

namespace switchyard::engine {

void HandleModels(const ServingContext& ctx, const net::HttpRequest& request,
                  std::shared_ptr<net::HttpResponder> responder);
void HandleTokenize(const ServingContext& ctx, const net::HttpRequest& request,
                    std::shared_ptr<net::HttpResponder> responder);
void HandleDetokenize(const ServingContext& ctx, const net::HttpRequest& request,
                      std::shared_ptr<net::HttpResponder> responder);
// GET /health and /ping: 200 with an empty body; 503 (Retry-After) once the shutdown drain
// began, so that routers stop sending.
void HandleHealth(const ServingContext& ctx, const net::HttpRequest& request,
                  std::shared_ptr<net::HttpResponder> responder);
void HandleVersion(const ServingContext& ctx, const net::HttpRequest& request,
                   std::shared_ptr<net::HttpResponder> responder);
void HandleMetrics(const ServingContext& ctx, const net::HttpRequest& request,
                   std::shared_ptr<net::HttpResponder> responder);
// GET /debug/kv: each KV medium the engine keeps blocks in (the pool as "GPU", as vLLM
// names it, then its tiers) with capacity, used blocks and prefix hit rate, as JSON.
void HandleDebugKv(const ServingContext& ctx, const net::HttpRequest& request,
                   std::shared_ptr<net::HttpResponder> responder);
// GET /debug/startup: the startup report (startup_report.h) as JSON.
void HandleDebugStartup(const ServingContext& ctx, const net::HttpRequest& request,
                        std::shared_ptr<net::HttpResponder> responder);
// POST /reset_prefix_cache[?reset_running_requests=BOOL&reset_external=BOOL]: 200 with an
// empty body once the prefix cache is dropped; 409 while running requests hold KV blocks
// (unless reset_running_requests: they are preempted and recomputed); 400 for a malformed
// query. reset_external asks to clear a KV connector's cache too; with none, there is
// nothing more to clear. Unknown parameters are ignored, as FastAPI ignores them.
void HandleResetPrefixCache(const ServingContext& ctx, const net::HttpRequest& request,
                            std::shared_ptr<net::HttpResponder> responder);

}  // namespace switchyard::engine
