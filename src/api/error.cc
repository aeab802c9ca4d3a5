#include "api/error.h"

#include <array>
#include <cstdint>

#include "absl/strings/cord.h"
#include "fmt/format.h"

#include "base/json.h"

namespace switchyard::api {
namespace {

constexpr char kParamUrl[] = "type.switchyard/api.param";
constexpr char kHttpStatusUrl[] = "type.switchyard/api.http_status";

struct Row {
  absl::StatusCode code;
  int http_status;
  std::string_view type;
};

// The first row for a code is its default; later rows for the same code are chosen with
// WithHttpStatus. Client errors stay 4xx so that SDK retries (on >= 500) do not multiply them.
constexpr std::array<Row, 19> kTable = {{
    {absl::StatusCode::kInvalidArgument, 400, "BadRequestError"},
    {absl::StatusCode::kOutOfRange, 400, "BadRequestError"},
    {absl::StatusCode::kFailedPrecondition, 400, "BadRequestError"},
    {absl::StatusCode::kUnauthenticated, 401, "AuthenticationError"},
    {absl::StatusCode::kPermissionDenied, 403, "PermissionDeniedError"},
    {absl::StatusCode::kNotFound, 404, "NotFoundError"},
    {absl::StatusCode::kFailedPrecondition, 405, "MethodNotAllowedError"},
    {absl::StatusCode::kAlreadyExists, 409, "ConflictError"},
    {absl::StatusCode::kFailedPrecondition, 409, "ConflictError"},
    {absl::StatusCode::kAborted, 409, "ConflictError"},
    {absl::StatusCode::kResourceExhausted, 429, "RateLimitError"},
    {absl::StatusCode::kResourceExhausted, 413, "RequestEntityTooLargeError"},
    {absl::StatusCode::kResourceExhausted, 431, "RequestHeaderFieldsTooLargeError"},
    {absl::StatusCode::kCancelled, 499, "ClientClosedRequestError"},
    {absl::StatusCode::kInternal, 500, "InternalServerError"},
    {absl::StatusCode::kUnimplemented, 501, "NotImplementedError"},
    {absl::StatusCode::kUnavailable, 503, "ServiceUnavailableError"},
    {absl::StatusCode::kDeadlineExceeded, 504, "GatewayTimeoutError"},
    {absl::StatusCode::kDeadlineExceeded, 408, "RequestTimeoutError"},
}};

constexpr HttpError kInternal = {500, "InternalServerError"};

}  // namespace

absl::Status InvalidParam(std::string_view param, const std::string& message) {
  absl::Status status = absl::InvalidArgumentError(message);
  status.SetPayload(kParamUrl, absl::Cord(absl::string_view(param.data(), param.size())));
  return status;
}

std::optional<std::string> ErrorParam(const absl::Status& status) {
  absl::optional<absl::Cord> param = status.GetPayload(kParamUrl);
  if (!param)
    return std::nullopt;
  return std::string(*param);
}

absl::Status WithHttpStatus(absl::Status status, int http_status) {
  status.SetPayload(kHttpStatusUrl, absl::Cord(fmt::format("{}", http_status)));
  return status;
}

absl::Status PayloadTooLarge(const std::string& message) {
  return WithHttpStatus(absl::ResourceExhaustedError(message), 413);
}

absl::Status HeadersTooLarge(const std::string& message) {
  return WithHttpStatus(absl::ResourceExhaustedError(message), 431);
}

absl::Status MethodNotAllowed(const std::string& message) {
  return WithHttpStatus(absl::FailedPreconditionError(message), 405);
}

absl::Status TransportError(int http_status, const std::string& message) {
  switch (http_status) {
    case 404:
      return absl::NotFoundError(message);
    case 405:
      return MethodNotAllowed(message);
    case 408:
      return WithHttpStatus(absl::DeadlineExceededError(message), 408);
    case 413:
      return PayloadTooLarge(message);
    case 431:
      return HeadersTooLarge(message);
    default:
      return absl::InvalidArgumentError(message);
  }
}

std::pair<std::string, std::string> TransportErrorBody(int http_status, std::string_view message) {
  return {"application/json", ErrorBody(TransportError(http_status, std::string(message)))};
}

absl::Status ModelNotFound(std::string_view model_name) {
  // vLLM's wording. The name is the client's: it is cut to a bounded length and written into
  // the body by the JSON writer (escaped, invalid UTF-8 replaced), never into a header.
  constexpr size_t kMaxEchoedBytes = 256;
  return absl::NotFoundError(
      fmt::format("The model `{}` does not exist.", model_name.substr(0, kMaxEchoedBytes)));
}

HttpError HttpErrorFor(const absl::Status& status) {
  int wanted = 0;
  if (absl::optional<absl::Cord> http = status.GetPayload(kHttpStatusUrl)) {
    for (char c : std::string(*http)) {
      if (c < '0' || c > '9' || wanted > 999)
        break;
      wanted = wanted * 10 + (c - '0');
    }
  }
  const Row* fallback = nullptr;
  for (const Row& row : kTable) {
    if (row.code != status.code())
      continue;
    if (row.http_status == wanted)
      return {row.http_status, row.type};
    if (fallback == nullptr)
      fallback = &row;
  }
  return fallback != nullptr ? HttpError{fallback->http_status, fallback->type} : kInternal;
}

std::string ErrorBody(const absl::Status& status) {
  const HttpError http = HttpErrorFor(status);
  std::string out = "{\"error\":{\"message\":";
  const absl::string_view message = status.message();
  base::AppendJsonString(std::string_view(message.data(), message.size()), false, &out);
  out += ",\"type\":";
  base::AppendJsonString(http.type, false, &out);
  out += ",\"param\":";
  if (std::optional<std::string> param = ErrorParam(status)) {
    base::AppendJsonString(*param, false, &out);
  } else {
    out += "null";
  }
  out += fmt::format(",\"code\":{}}}}}", http.http_status);
  return out;
}

}  // namespace switchyard::api
