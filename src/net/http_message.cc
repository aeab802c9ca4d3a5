#include "net/http_message.h"

namespace switchyard::net {

std::optional<std::string_view> HttpRequest::Header(std::string_view lower_name) const {
  for (const auto& [name, value] : headers) {
    if (name == lower_name)
      return value;
  }
  return std::nullopt;
}

}  // namespace switchyard::net
