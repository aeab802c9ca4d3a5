#include "net/query_string.h"

#include "absl/status/status.h"
#include "absl/strings/ascii.h"

namespace switchyard::net {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

absl::StatusOr<std::string> Decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out.push_back(' ');
    } else if (s[i] != '%') {
      out.push_back(s[i]);
    } else {
      if (s.size() - i < 3 || HexValue(s[i + 1]) < 0 || HexValue(s[i + 2]) < 0)
        return absl::InvalidArgumentError("malformed percent-escape in the query string");
      out.push_back(static_cast<char>(HexValue(s[i + 1]) * 16 + HexValue(s[i + 2])));
      i += 2;
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<QueryParams> ParseQueryString(std::string_view query) {
  QueryParams params;
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (pair.empty())
      continue;
    const size_t eq = pair.find('=');
    absl::StatusOr<std::string> name = Decode(pair.substr(0, eq));
    if (!name.ok())
      return name.status();
    absl::StatusOr<std::string> value =
        Decode(eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1));
    if (!value.ok())
      return value.status();
    params.emplace_back(*std::move(name), *std::move(value));
  }
  return params;
}

std::optional<bool> ParseQueryBool(std::string_view value) {
  const std::string lower = absl::AsciiStrToLower(absl::string_view(value.data(), value.size()));
  if (lower == "true" || lower == "1" || lower == "yes" || lower == "on")
    return true;
  if (lower == "false" || lower == "0" || lower == "no" || lower == "off")
    return false;
  return std::nullopt;
}

}  // namespace switchyard::net
