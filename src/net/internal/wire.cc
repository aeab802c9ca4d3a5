#include "net/internal/wire.h"

#include <algorithm>
#include <cctype>

#include "fmt/format.h"

#include "base/json.h"
#include "net/internal/beast.h"

namespace switchyard::net::internal {
namespace {

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

bool IsAllowedExtraHeader(const std::pair<std::string, std::string>& header) {
  const auto& [name, value] = header;
  if (name.empty() || name.find_first_of("\r\n: ") != std::string::npos ||
      value.find_first_of("\r\n") != std::string::npos) {
    return false;
  }
  return !EqualsIgnoreCase(name, "content-length") &&
         !EqualsIgnoreCase(name, "transfer-encoding") && !EqualsIgnoreCase(name, "connection");
}

bool HasHeader(const HeaderList* headers, std::string_view name) {
  if (headers == nullptr)
    return false;
  return std::any_of(headers->begin(), headers->end(),
                     [&](const auto& header) { return EqualsIgnoreCase(header.first, name); });
}

void AppendHeader(std::string_view name, std::string_view value, std::string* out) {
  out->append(name);
  out->append(": ");
  out->append(value);
  out->append("\r\n");
}

}  // namespace

std::string EncodeHead(const ResponseHead& head) {
  // A status the handler made up is sent as is when it has three digits, else as 500.
  const int status = head.status >= 100 && head.status <= 999 ? head.status : 500;
  const http::status known = http::int_to_status(static_cast<unsigned>(status));
  const beast::string_view reason =
      known == http::status::unknown ? "Unknown" : http::obsolete_reason(known);
  std::string out =
      fmt::format("HTTP/1.1 {} {}\r\n", status, std::string_view(reason.data(), reason.size()));
  if (!head.server_name.empty())
    AppendHeader("Server", head.server_name, &out);
  if (!head.content_type.empty())
    AppendHeader("Content-Type", head.content_type, &out);
  if (head.content_length.has_value()) {
    AppendHeader("Content-Length", fmt::format("{}", *head.content_length), &out);
  } else if (head.chunked) {
    AppendHeader("Transfer-Encoding", "chunked", &out);
  }
  if (head.persistence == Persistence::kKeepAlive) {
    AppendHeader("Connection", "keep-alive", &out);
  } else if (head.persistence == Persistence::kClose) {
    AppendHeader("Connection", "close", &out);
  }
  if (head.content_type.substr(0, head.content_type.find(';')) == "text/event-stream") {
    if (!HasHeader(head.extra_headers, "cache-control"))
      AppendHeader("Cache-Control", "no-cache", &out);
    AppendHeader("X-Accel-Buffering", "no", &out);
  }
  if (head.extra_headers != nullptr) {
    for (const auto& header : *head.extra_headers) {
      if (IsAllowedExtraHeader(header))
        AppendHeader(header.first, header.second, &out);
    }
  }
  out.append("\r\n");
  return out;
}

std::string ChunkPrefix(size_t data_size) {
  return fmt::format("{:x}\r\n", data_size);
}

std::pair<std::string, std::string> DefaultErrorBody(int http_status, std::string_view message) {
  // The type names follow api/error.h's table (openai-python's exception classes).
  std::string_view type = "BadRequestError";
  switch (http_status) {
    case 408:
      type = "RequestTimeoutError";
      break;
    case 413:
      type = "RequestEntityTooLargeError";
      break;
    case 431:
      type = "RequestHeaderFieldsTooLargeError";
      break;
    default:
      break;
  }
  std::string body = "{\"error\":{\"message\":";
  base::AppendJsonString(message, false, &body);
  body += ",\"type\":";
  base::AppendJsonString(type, false, &body);
  body += fmt::format(",\"param\":null,\"code\":{}}}}}", http_status);
  return {"application/json", std::move(body)};
}

}  // namespace switchyard::net::internal
