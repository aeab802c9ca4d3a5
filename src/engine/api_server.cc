#include "engine/api_server.h"

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <openssl/crypto.h>

#include "api/error.h"
#include "api/response_writer.h"
#include "base/status_macros.h"
#include "engine/admin_routes.h"
#include "engine/generation_handler.h"

namespace switchyard::engine {
namespace {

using RouteFn = void (*)(const ServingContext&, const net::HttpRequest&,
                         std::shared_ptr<net::HttpResponder>);

net::RouteTable::Route Route(std::string method, std::string path, const ServingContext* ctx,
                             RouteFn fn) {
  return {std::move(method), std::move(path),
          [ctx, fn](net::HttpRequest& request, std::shared_ptr<net::HttpResponder> responder) {
            fn(*ctx, request, std::move(responder));
          }};
}

std::vector<net::RouteTable::Route> Routes(const ServingContext* ctx, bool dev_mode) {
  std::vector<net::RouteTable::Route> routes = {
      Route("POST", "/v1/completions", ctx, &HandleCompletion),
      Route("POST", "/v1/chat/completions", ctx, &HandleChatCompletion),
      Route("GET", "/v1/models", ctx, &HandleModels),
      Route("POST", "/tokenize", ctx, &HandleTokenize),
      Route("POST", "/detokenize", ctx, &HandleDetokenize),
      Route("GET", "/health", ctx, &HandleHealth),
      Route("GET", "/version", ctx, &HandleVersion),
      Route("GET", "/metrics", ctx, &HandleMetrics),
      Route("GET", "/debug/kv", ctx, &HandleDebugKv),
      Route("GET", "/debug/startup", ctx, &HandleDebugStartup),
      Route("GET", "/ping", ctx, &HandleHealth),
  };
  if (dev_mode)
    routes.push_back(Route("POST", "/reset_prefix_cache", ctx, &HandleResetPrefixCache));
  return routes;
}

}  // namespace

ApiServer::ApiServer(const ApiServerOptions& options, const ServingContext* ctx)
    : options_(options), routes_(Routes(ctx, options.dev_mode), &api::TransportErrorBody) {}

absl::StatusOr<std::unique_ptr<ApiServer>> ApiServer::Start(const ApiServerOptions& options,
                                                            const ServingContext* ctx) {
  std::unique_ptr<ApiServer> server(new ApiServer(options, ctx));
  net::HttpServerOptions http = options.http;
  http.error_body = &api::TransportErrorBody;
  ApiServer* self = server.get();
  SY_ASSIGN_OR_RETURN(server->http_,
                      net::HttpServer::Start(http, [self](net::HttpRequest request,
                                                          std::shared_ptr<net::HttpResponder> r) {
                        self->Dispatch(std::move(request), std::move(r));
                      }));
  return server;
}

bool ApiServer::Guarded(const net::HttpRequest& request) {
  // vLLM guards the path prefixes of its model APIs ("/v1", "/v2", "/inference", "/cohere";
  // we serve /v1 only) and lets OPTIONS (CORS preflight) through. A plain prefix test, as
  // vLLM's: "/v10" is guarded too.
  return request.method != "OPTIONS" && request.path.starts_with("/v1");
}

bool ApiServer::Authorized(const net::HttpRequest& request) const {
  if (options_.api_key.empty())
    return true;
  std::optional<std::string_view> auth = request.Header("authorization");
  constexpr std::string_view kBearer = "Bearer ";
  if (!auth.has_value() || auth->size() != kBearer.size() + options_.api_key.size() ||
      auth->substr(0, kBearer.size()) != kBearer) {
    return false;
  }
  return CRYPTO_memcmp(auth->data() + kBearer.size(), options_.api_key.data(),
                       options_.api_key.size()) == 0;
}

void ApiServer::Dispatch(net::HttpRequest request, std::shared_ptr<net::HttpResponder> responder) {
  // vLLM's AuthenticationMiddleware: before routing, so an unknown /v1 path is 401 too.
  if (Guarded(request) && !Authorized(request)) {
    SendError(*responder, absl::UnauthenticatedError("Unauthorized"));
    return;
  }
  routes_.Dispatch(request, std::move(responder));
}

}  // namespace switchyard::engine
