#include "net/host_port.h"

#include <charconv>

#include "fmt/format.h"

namespace switchyard::net {

absl::StatusOr<HostPort> ParseHostPort(std::string_view text) {
  const auto bad = [&] {
    return absl::InvalidArgumentError(fmt::format("'{}' is not host:port", text));
  };
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0)
    return bad();
  for (const char c : text) {
    if (c <= ' ' || c >= 0x7f || c == '/' || c == '@')
      return bad();
  }
  std::string_view name = text.substr(0, colon);
  if (name.front() == '[') {
    if (name.size() < 3 || name.back() != ']')
      return bad();
    name = name.substr(1, name.size() - 2);
  }
  const std::string_view digits = text.substr(colon + 1);
  unsigned value = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (error != std::errc() || end != digits.data() + digits.size() || value == 0 || value > 65535)
    return bad();
  return HostPort{std::string(name), static_cast<uint16_t>(value)};
}

}  // namespace switchyard::net
