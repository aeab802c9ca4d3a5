#include "net/route_table.h"

#include <string_view>
#include <utility>

#include "fmt/format.h"

namespace switchyard::net {

RouteTable::RouteTable(std::vector<Route> routes, ErrorBodyFormatter error_body)
    : routes_(std::move(routes)), error_body_(std::move(error_body)) {}

void RouteTable::Dispatch(HttpRequest& request, std::shared_ptr<HttpResponder> responder) const {
  std::string allowed;  // the path's methods, once the request's is known not to be one
  for (const Route& route : routes_) {
    if (route.path != request.path)
      continue;
    if (route.method == request.method) {
      route.handler(request, std::move(responder));
      return;
    }
    if (!allowed.empty())
      allowed += ", ";
    allowed += route.method;
  }
  if (allowed.empty()) {
    auto [content_type, body] = error_body_(404, "Not Found");
    responder->Send(404, content_type, std::move(body));
    return;
  }
  // The method is the client's: cut short, it goes into the body only (escaped by the
  // formatter), never into a header.
  constexpr size_t kMaxEchoedMethodBytes = 16;
  auto [content_type, body] = error_body_(
      405, fmt::format("Method {} is not allowed on {}; use {}.",
                       std::string_view(request.method).substr(0, kMaxEchoedMethodBytes),
                       request.path, allowed));
  responder->Send(405, content_type, std::move(body), {{"allow", std::move(allowed)}});
}

}  // namespace switchyard::net
