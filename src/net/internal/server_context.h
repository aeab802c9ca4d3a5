// ServerContext: what every connection of one HttpServer shares. Owned by the server,
// which outlives its loops' threads; read-only after Start (admission is thread-safe).
#pragma once

#include <memory>

#include "net/http_server.h"
#include "net/internal/connection_admission.h"

namespace switchyard::net::internal {

struct ServerContext {
  HttpServerOptions options;  // error_body is always set
  HttpHandler handler;
  // Open connections on all loops under the limits: the listener takes a slot per
  // connection, which the connection gives back when it closes.
  std::unique_ptr<ConnectionAdmission> admission;
};

}  // namespace switchyard::net::internal
