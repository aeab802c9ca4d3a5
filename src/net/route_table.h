// RouteTable: a server's routes, (method, exact path) -> handler, and HTTP's answer to a request
// that no route takes: 405 with an Allow header listing the path's methods when the path has
// routes, 404 otherwise, each with the body the server's error formatter makes.
//
// Immutable once built; any thread may call Dispatch (handlers run on the calling thread).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "net/http_server.h"

namespace switchyard::net {

class RouteTable {
 public:
  // Takes the request apart as HttpHandler's contract allows.
  using Handler =
      std::function<void(HttpRequest& request, std::shared_ptr<HttpResponder> responder)>;

  struct Route {
    std::string method;  // as a request sends it: "GET", "POST"
    std::string path;    // matched exactly (no query, no prefix)
    Handler handler;
  };

  // `error_body` formats the 404 and 405 bodies (the server's HttpServerOptions::error_body).
  // REQUIRES: error_body is set; no two routes share a method and a path.
  RouteTable(std::vector<Route> routes, ErrorBodyFormatter error_body);

  // Runs the route for the request's method and path; answers 405 or 404 when there is none.
  void Dispatch(HttpRequest& request, std::shared_ptr<HttpResponder> responder) const;

 private:
  const std::vector<Route> routes_;
  const ErrorBodyFormatter error_body_;
};

}  // namespace switchyard::net
