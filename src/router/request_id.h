// Request ids: every request through the router carries one x-request-id, sent upstream
// and returned to the client on every response (errors included), so a request can be
// followed from the client through the router to the engine's logs.
//
// A client's x-request-id is kept as sent; without one (or with an empty one) the router
// makes a random UUIDv4. This is what Envoy does for requests it does not treat as edge
// requests (generate when absent, keep when present) and what vLLM does (it takes the
// header as its request id, answering ids "cmpl-<id>" / "chatcmpl-<id>"). Neither rejects
// a client's id for its length or bytes, and neither does the router: the HTTP server
// already bounds the headers (431 past max_header_bytes, 16 KiB) and answers 400 to
// control bytes other than tab (and DEL) in a header value, so what arrives is bounded and
// has no control bytes. (Those transport errors come from the HTTP layer, without an id.)
//
// Stateless; any thread.
#pragma once

#include <string>

#include "net/http_message.h"

namespace switchyard::router {

// A random UUIDv4, lower-case hex, "xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx".
std::string NewRequestId();

// The request's x-request-id, or a new one when it has none.
std::string RequestIdOf(const net::HttpRequest& request);

}  // namespace switchyard::router
