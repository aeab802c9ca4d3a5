#include "engine/api_server.h"

#include <array>
#include <string_view>
#include <utility>

#include "fmt/format.h"
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

struct Route {
  std::string_view method;
  std::string_view path;
  RouteFn fn;
  bool dev_only = false;  // served only in development mode
};

constexpr std::array<Route, 10> kRoutes = {{
    {"POST", "/v1/completions", &HandleCompletion},
    {"POST", "/v1/chat/completions", &HandleChatCompletion},
    {"GET", "/v1/models", &HandleModels},
    {"POST", "/tokenize", &HandleTokenize},
    {"POST", "/detokenize", &HandleDetokenize},
    {"GET", "/health", &HandleHealth},
    {"GET", "/version", &HandleVersion},
    {"GET", "/metrics", &HandleMetrics},
    {"GET", "/ping", &HandleHealth},
    {"POST", "/reset_prefix_cache", &HandleResetPrefixCache, true},
}};

}  // namespace

absl::StatusOr<std::unique_ptr<ApiServer>> ApiServer::Start(const ApiServerOptions& options,
                                                            const ServingContext* ctx) {
  std::unique_ptr<ApiServer> server(new ApiServer(options, ctx));
  net::HttpServerOptions http = options.http;
  http.error_body = [](int status, std::string_view message) {
    return std::make_pair(std::string("application/json"),
                          api::ErrorBody(api::TransportError(status, std::string(message))));
  };
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
  const Route* path_match = nullptr;
  for (const Route& route : kRoutes) {
    if (route.path != request.path || (route.dev_only && !options_.dev_mode))
      continue;
    path_match = &route;
    if (route.method != request.method)
      continue;
    route.fn(*ctx_, request, std::move(responder));
    return;
  }
  if (path_match != nullptr) {
    SendError(*responder, api::MethodNotAllowed(fmt::format(
                              "Method {} is not allowed on {}; use {}.",
                              request.method.substr(0, 16), path_match->path, path_match->method)));
    return;
  }
  SendError(*responder, absl::NotFoundError("Not Found"));
}

}  // namespace switchyard::engine
