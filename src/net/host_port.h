// ParseHostPort: "host:port" and "[v6]:port", as a client's upstream or a peer's address is
// given on a command line or in a config: the host as the resolver takes it (brackets of an
// IPv6 literal removed) and a port in 1-65535. The text must be visible ASCII without a path
// or user part ('/', '@'), since it may become a Host header.
//
// Functions only; any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace switchyard::net {

struct HostPort {
  std::string host;
  uint16_t port = 0;
};

// InvalidArgument naming the text when it is not host:port.
absl::StatusOr<HostPort> ParseHostPort(std::string_view text);

}  // namespace switchyard::net
