#include "router/extproc/header_map.h"

#include <string>
#include <utility>

#include "absl/strings/ascii.h"

namespace switchyard::router::extproc {

net::HttpRequest RequestFromHeaders(const envoy::config::core::v3::HeaderMap& headers) {
  net::HttpRequest request;
  for (const envoy::config::core::v3::HeaderValue& header : headers.headers()) {
    std::string name = absl::AsciiStrToLower(header.key());
    std::string value = header.raw_value().empty() ? header.value() : header.raw_value();
    if (name == ":method") {
      request.method = std::move(value);
    } else if (name == ":path") {
      request.target = std::move(value);
    } else if (!name.starts_with(':')) {
      request.headers.emplace_back(std::move(name), std::move(value));
    }
  }
  const size_t query = request.target.find('?');
  request.path = request.target.substr(0, query);
  if (query != std::string::npos)
    request.query = request.target.substr(query + 1);
  return request;
}

}  // namespace switchyard::router::extproc
