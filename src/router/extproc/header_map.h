// Envoy's request headers (an ext_proc HeaderMap) as the router's HTTP request: HTTP/2
// pseudo-headers give the method and the target, the rest become the header list. A header's
// value is its raw_value (bytes, what Envoy sends since 1.29) when set, else its value.
#pragma once

#include "envoy/config/core/v3/base.pb.h"
#include "net/http_message.h"

namespace switchyard::router::extproc {

// Names are lower-cased (HTTP/2 sends them so; a gateway may not); :method and :path set
// method, target, path and query; other pseudo-headers (:authority, :scheme) are dropped.
net::HttpRequest RequestFromHeaders(const envoy::config::core::v3::HeaderMap& headers);

}  // namespace switchyard::router::extproc
