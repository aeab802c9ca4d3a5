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

// How feeding a message ended.
enum class Fed {
  kDone,    // the parser finished the message
  kFailed,  // it refused the bytes
  kStuck,   // every byte was given and it wants more
};

// Feeds `bytes` to `parser` in reads of at most `read_size` bytes, keeping what it did not
// use, as HttpConnection and ClientCall do. `after_put(used, buffer)` sees each put's result
// before the used bytes are dropped; *left gets how many bytes were given and not used.
template <typename Parser, typename AfterPut>
Fed Feed(Parser& parser, std::string_view bytes, size_t read_size, AfterPut after_put,
         size_t* left) {
  std::string buffer;
  size_t fed = 0;
  Fed result = Fed::kDone;
  while (!parser.is_done()) {
    if (fed < bytes.size()) {
      const size_t n = std::min(read_size, bytes.size() - fed);
      buffer.append(bytes.substr(fed, n));
      fed += n;
    }
    ErrorCode ec;
    const size_t used = parser.put(asio::buffer(buffer), ec);
    Check(used <= buffer.size());
    after_put(used, std::string_view(buffer));
    buffer.erase(0, used);
    if (ec && ec != http::error::need_more) {
      result = Fed::kFailed;
      break;
    }
    if ((ec || used == 0) && fed == bytes.size()) {
      result = Fed::kStuck;
      break;
    }
  }
  *left = buffer.size();
  return result;
}

template <typename Parser>
void SetLimits(Parser& parser) {
  parser.header_limit(4096);
  parser.body_limit(1 << 16);
}

Outcome ParseRequest(std::string_view bytes, size_t read_size) {
  RequestParser parser;
  SetLimits(parser);
  size_t left = 0;
  switch (Feed(
      parser, bytes, read_size, [](size_t, std::string_view) {}, &left)) {
    case Fed::kDone:
      return {.failed = false, .request = parser.TakeRequest()};
    case Fed::kFailed:
      return {.failed = true, .request = std::nullopt};
    case Fed::kStuck:
      break;
  }
  return {};  // incomplete
}

void ParseResponse(std::string_view bytes, size_t read_size, bool head) {
  ResponseParser parser;
  SetLimits(parser);
  parser.skip(head);
  const auto piece_in_buffer = [&parser](size_t used, std::string_view buffer) {
    const std::string_view piece = parser.TakePiece();
    if (!piece.empty())
      Check(piece.data() >= buffer.data() && piece.data() + piece.size() <= buffer.data() + used);
  };
  size_t left = 0;
  if (Feed(parser, bytes, read_size, piece_in_buffer, &left) == Fed::kStuck && left == 0) {
    ErrorCode ec;
    parser.put_eof(ec);  // the upstream closed: a body to the close ends here
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
