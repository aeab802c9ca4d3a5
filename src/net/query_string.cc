#include "net/query_string.h"

#include <array>

#include "absl/status/status.h"
#include "absl/strings/match.h"

#include "base/status_macros.h"

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
    SY_ASSIGN_OR_RETURN(std::string name, Decode(pair.substr(0, eq)));
    SY_ASSIGN_OR_RETURN(
        std::string value,
        Decode(eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1)));
    params.emplace_back(std::move(name), std::move(value));
  }
  return params;
}

std::optional<bool> ParseQueryBool(std::string_view value) {
  const absl::string_view v(value.data(), value.size());
  auto any_of = [v](const std::array<absl::string_view, 4>& words) {
    for (absl::string_view w : words) {
      if (absl::EqualsIgnoreCase(v, w))
        return true;
    }
    return false;
  };
  if (any_of({"true", "1", "yes", "on"}))
    return true;
  if (any_of({"false", "0", "no", "off"}))
    return false;
  return std::nullopt;
}

}  // namespace switchyard::net
