// The parts of an HTTP/1.1 message that the server and the client share: header lists and a
// received request. Plain values; a const one may be read from any thread.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace switchyard::net {

// Header names are lower-cased on receipt; values are as sent (surrounding spaces trimmed).
using HeaderList = std::vector<std::pair<std::string, std::string>>;

// A request as the server received it.
struct HttpRequest {
  std::string method;  // "GET", "POST", ... as sent
  std::string target;  // "/v1/completions?x=1"
  std::string path;    // target without the query
  std::string query;   // after '?', empty when none
  HeaderList headers;
  std::string body;
  std::string remote_address;  // "127.0.0.1:53211"

  // The first header with this (lower-case) name.
  std::optional<std::string_view> Header(std::string_view lower_name) const;
};

}  // namespace switchyard::net
