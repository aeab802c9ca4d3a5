// The one mapping from absl::Status to an HTTP status and an OpenAI-compatible error body.
// Stateless; any thread may call these.
//
// Body shape follows current vLLM (not the flat {"object":"error",...} of vLLM <= 0.9):
//   {"error": {"message": str, "type": str, "param": str|null, "code": <HTTP status int>}}
// `type` is the openai-python exception class name for the status (BadRequestError, ...), as
// vLLM writes it. Messages are ours and never echo client bytes beyond known field names.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"

namespace switchyard::api {

struct HttpError {
  int http_status;
  std::string_view type;
};

// InvalidArgument naming the offending request field; `param` is a field path such as
// "temperature" or "messages[2].content".
absl::Status InvalidParam(std::string_view param, const std::string& message);

// The field path attached by InvalidParam, if any.
std::optional<std::string> ErrorParam(const absl::Status& status);

// Statuses that share an absl code but need a distinct HTTP status (413 and 431 are both
// ResourceExhausted, like 429). Only (code, http_status) pairs present in the table are honoured.
absl::Status WithHttpStatus(absl::Status status, int http_status);

// Convenience constructors for the transport limits (decided before parsing the body).
absl::Status PayloadTooLarge(const std::string& message);
absl::Status HeadersTooLarge(const std::string& message);
absl::Status MethodNotAllowed(const std::string& message);
// The status of an error the HTTP layer decided before any handler ran: 404 and 405 (no
// route), 408 (timeout), 413, 431; anything else is a 400.
absl::Status TransportError(int http_status, const std::string& message);
// TransportError's ("application/json", ErrorBody): what net::HttpServerOptions::error_body
// and net::RouteTable take.
std::pair<std::string, std::string> TransportErrorBody(int http_status, std::string_view message);
absl::Status ModelNotFound(std::string_view model_name);

// REQUIRES: !status.ok(). Unknown codes map to 500 InternalServerError.
HttpError HttpErrorFor(const absl::Status& status);

// The JSON error body for `status`. REQUIRES: !status.ok().
std::string ErrorBody(const absl::Status& status);

}  // namespace switchyard::api
