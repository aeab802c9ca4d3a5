// The engine's non-generation routes: /v1/models, /tokenize, /detokenize (vLLM's forms,
// /tokenize also with chat messages), /health, /version and /metrics. Each answers at once
// on the HTTP loop thread. Stateless; borrows the context.
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
void HandleHealth(const ServingContext& ctx, const net::HttpRequest& request,
                  std::shared_ptr<net::HttpResponder> responder);
void HandleVersion(const ServingContext& ctx, const net::HttpRequest& request,
                   std::shared_ptr<net::HttpResponder> responder);
void HandleMetrics(const ServingContext& ctx, const net::HttpRequest& request,
                   std::shared_ptr<net::HttpResponder> responder);

}  // namespace switchyard::engine
