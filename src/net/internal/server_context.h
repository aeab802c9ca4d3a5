// ServerContext: what every connection of one HttpServer shares. Owned by the server,
// which outlives its loops' threads; read-only after Start except num_connections.
#pragma once

#include <atomic>
#include <cstddef>

#include "net/http_server.h"

namespace switchyard::net::internal {

struct ServerContext {
  HttpServerOptions options;  // error_body is always set
  HttpHandler handler;
  // Open connections on all loops: the listener adds, HttpConnection::Close subtracts.
  std::atomic<size_t> num_connections{0};
};

}  // namespace switchyard::net::internal
