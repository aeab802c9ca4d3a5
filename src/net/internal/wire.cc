#include "net/internal/wire.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>

#include "fmt/format.h"

#include "base/json.h"

namespace switchyard::net::internal {
namespace {

constexpr size_t kHeadReserveBytes = 512;

// ASCII only, whatever the locale: header names are ASCII tokens. (std::tolower and
// std::isalnum consult the locale on every character; every header of every request and
// response goes through these.)
constexpr char AsciiLower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return AsciiLower(x) == AsciiLower(y);
         });
}

// RFC 9110's token characters: what a method or a header name may be made of.
constexpr std::array<bool, 256> TokenChars() {
  std::array<bool, 256> table{};
  for (int c = '0'; c <= '9'; ++c)
    table[c] = true;
  for (int c = 'a'; c <= 'z'; ++c)
    table[c] = table[c - 'a' + 'A'] = true;
  for (const char c : std::string_view("!#$%&'*+-.^_`|~"))
    table[static_cast<unsigned char>(c)] = true;
  return table;
}
constexpr std::array<bool, 256> kTokenChars = TokenChars();

bool IsToken(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return kTokenChars[static_cast<unsigned char>(c)];
  });
}

// A header that cannot end the line or the head early. (Not find_first_of: libstdc++'s
// searches the set once per character of the value, a call each.)
bool IsSafeHeader(const std::pair<std::string, std::string>& header) {
  return IsToken(header.first) &&
         std::none_of(header.second.begin(), header.second.end(),
                      [](char c) { return c == '\r' || c == '\n' || c == '\0'; });
}

// The headers that say where the message ends and what happens to the connection after it:
// always written by us, never taken from a caller.
bool IsFramingHeader(std::string_view name) {
  return EqualsIgnoreCase(name, "content-length") || EqualsIgnoreCase(name, "transfer-encoding") ||
         EqualsIgnoreCase(name, "connection");
}

bool HasHeader(const HeaderList* headers, std::string_view name) {
  if (headers == nullptr)
    return false;
  return std::any_of(headers->begin(), headers->end(),
                     [&](const auto& header) { return EqualsIgnoreCase(header.first, name); });
}

// `value` in `base` (10 or 16), without the cost of a format string.
void AppendNumber(uint64_t value, int base, std::string* out) {
  std::array<char, 20> digits;  // 2^64 has 20 decimal digits
  const std::to_chars_result result =
      std::to_chars(digits.data(), digits.data() + digits.size(), value, base);
  out->append(digits.data(), result.ptr);
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
  std::string out;
  // Room for the usual head, so that the appends below do not grow it step by step.
  out.reserve(kHeadReserveBytes);
  out.append("HTTP/1.1 ");
  AppendNumber(static_cast<uint64_t>(status), 10, &out);
  out.push_back(' ');
  out.append(reason.data(), reason.size());
  out.append("\r\n");
  if (!head.server_name.empty())
    AppendHeader("Server", head.server_name, &out);
  if (!head.content_type.empty())
    AppendHeader("Content-Type", head.content_type, &out);
  if (head.content_length.has_value()) {
    out.append("Content-Length: ");
    AppendNumber(*head.content_length, 10, &out);
    out.append("\r\n");
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
      if (IsSafeHeader(header) && !IsFramingHeader(header.first))
        AppendHeader(header.first, header.second, &out);
    }
  }
  out.append("\r\n");
  return out;
}

absl::StatusOr<std::string> EncodeRequestHead(const RequestHead& head) {
  if (!IsToken(head.method))
    return absl::InvalidArgumentError(fmt::format("http: bad request method '{}'", head.method));
  // The target must be visible ASCII: anything else would split the request line.
  const bool target_ok =
      !head.target.empty() && std::all_of(head.target.begin(), head.target.end(),
                                          [](char c) { return c > ' ' && c < 0x7f; });
  if (!target_ok)
    return absl::InvalidArgumentError(fmt::format("http: bad request target '{}'", head.target));
  std::string out;
  out.reserve(kHeadReserveBytes + head.target.size());
  out.append(head.method);
  out.push_back(' ');
  out.append(head.target);
  out.append(" HTTP/1.1\r\n");
  AppendHeader("Host", head.host, &out);
  if (head.headers != nullptr) {
    for (const auto& header : *head.headers) {
      if (!IsSafeHeader(header))
        return absl::InvalidArgumentError(fmt::format("http: bad header '{}'", header.first));
      if (!IsFramingHeader(header.first) && !EqualsIgnoreCase(header.first, "host"))
        AppendHeader(header.first, header.second, &out);
    }
  }
  if (head.content_length.has_value()) {
    out.append("Content-Length: ");
    AppendNumber(*head.content_length, 10, &out);
    out.append("\r\n");
  }
  AppendHeader("Connection", "keep-alive", &out);
  out.append("\r\n");
  return out;
}

std::string ChunkPrefix(size_t data_size) {
  std::string prefix;
  AppendNumber(data_size, 16, &prefix);
  prefix.append("\r\n");
  return prefix;
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
