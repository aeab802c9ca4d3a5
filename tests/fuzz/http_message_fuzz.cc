// Fuzz target: HTTP/1.1 bytes from a client (requests) or an upstream (responses) through the
// message parsers, as a connection feeds them: the first byte picks the kind and how the rest
// is cut into reads. Checks, besides memory safety: the parser never uses more bytes than it
// was given, response body pieces lie inside the buffer given, and a request's outcome (error
// or not, the request parsed) does not depend on how its bytes were cut.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "net/internal/message_parser.h"

namespace {

using switchyard::net::HttpRequest;
using switchyard::net::internal::ErrorCode;
using switchyard::net::internal::RequestParser;
using switchyard::net::internal::ResponseParser;
namespace asio = switchyard::net::internal::asio;
namespace http = switchyard::net::internal::http;

void Check(bool ok) {
  if (!ok)
    std::abort();
}

struct Outcome {
  bool failed = false;
  std::optional<HttpRequest> request;  // when the request was parsed whole
};

// Feeds `bytes` to a request parser in reads of at most `read_size` bytes, keeping what it
// did not use, as HttpConnection does.
Outcome ParseRequest(std::string_view bytes, size_t read_size) {
  RequestParser parser;
  parser.header_limit(4096);
  parser.body_limit(1 << 16);
  std::string buffer;
  size_t fed = 0;
  while (!parser.is_done()) {
    if (fed < bytes.size()) {
      const size_t n = std::min(read_size, bytes.size() - fed);
      buffer.append(bytes.substr(fed, n));
      fed += n;
    }
    ErrorCode ec;
    const size_t used = parser.put(asio::buffer(buffer), ec);
    Check(used <= buffer.size());
    buffer.erase(0, used);
    if (ec == http::error::need_more) {
      if (fed == bytes.size())
        return {};  // incomplete
      continue;
    }
    if (ec)
      return {.failed = true, .request = std::nullopt};
    if (used == 0 && !parser.is_done() && fed == bytes.size())
      return {};
  }
  return {.failed = false, .request = parser.TakeRequest()};
}

void ParseResponse(std::string_view bytes, size_t read_size, bool head) {
  ResponseParser parser;
  parser.header_limit(4096);
  parser.body_limit(1 << 16);
  parser.skip(head);
  std::string buffer;
  size_t fed = 0;
  while (!parser.is_done()) {
    if (fed < bytes.size()) {
      const size_t n = std::min(read_size, bytes.size() - fed);
      buffer.append(bytes.substr(fed, n));
      fed += n;
    }
    ErrorCode ec;
    const size_t used = parser.put(asio::buffer(buffer), ec);
    Check(used <= buffer.size());
    const std::string_view piece = parser.TakePiece();
    if (!piece.empty())
      Check(piece.data() >= buffer.data() && piece.data() + piece.size() <= buffer.data() + used);
    buffer.erase(0, used);
    if (ec && ec != http::error::need_more)
      return;
    if ((ec || used == 0) && fed == bytes.size()) {
      if (buffer.empty()) {
        parser.put_eof(ec);
        (void)parser.keep_alive();
      }
      return;
    }
  }
  (void)parser.keep_alive();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0)
    return 0;
  const uint8_t control = data[0];
  const std::string_view bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  const size_t read_size = 1 + (control >> 2);  // 1..64
  if ((control & 1) == 0) {
    const Outcome whole = ParseRequest(bytes, bytes.size() + 1);
    const Outcome cut = ParseRequest(bytes, read_size);
    Check(whole.failed == cut.failed);
    Check(whole.request.has_value() == cut.request.has_value());
    if (whole.request.has_value()) {
      Check(whole.request->method == cut.request->method);
      Check(whole.request->target == cut.request->target);
      Check(whole.request->headers == cut.request->headers);
      Check(whole.request->body == cut.request->body);
    }
  } else {
    ParseResponse(bytes, read_size, (control & 2) != 0);
  }
  return 0;
}
