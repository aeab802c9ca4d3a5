// RequestParser and ResponseParser: an Http1Parser (framing, limits, chunked encoding,
// keep-alive rules) with the message going straight into our own types. A request's body
// goes into a string; a response's body is handed out piece by piece where the parser found
// it in the caller's buffer, without a copy.
//
// One parser per message: a new message (the next request on a keep-alive connection, the
// real response after a 100 Continue) takes a new parser. Set header_limit and body_limit
// before the first put().
//
// Not thread-safe; each belongs to one connection or call.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

#include "net/http_message.h"
#include "net/internal/http1_parser.h"

namespace switchyard::net::internal {

class RequestParser final : public Http1Parser {
 public:
  RequestParser() : Http1Parser(Kind::kRequest) {}

  // Spare room reserved after a body of known length (api::RequestBody::kPaddingBytes: a
  // JSON body followed by it is parsed where it lies). net/ does not depend on api/.
  static constexpr size_t kBodyPaddingBytes = 64;

  // Parses as Http1Parser::put does, keeping the body.
  size_t put(asio::const_buffer bytes, ErrorCode& ec);

  // After is_header_done().
  bool head_method() const { return method_ == "HEAD"; }
  // After is_done(): the request, moved out (path and query split from the target).
  HttpRequest TakeRequest();

 private:
  std::string body_;
};

class ResponseParser final : public Http1Parser {
 public:
  ResponseParser() : Http1Parser(Kind::kResponse) {}
  // Writes the fields into `spare`'s strings, an earlier message's (TakeHeaders): a caller
  // that parses many alike responses then allocates nothing for their fields.
  explicit ResponseParser(HeaderList spare) : Http1Parser(Kind::kResponse) {
    headers_ = std::move(spare);
  }

  // The fields, moved out: headers() is then empty.
  HeaderList TakeHeaders() { return std::move(headers_); }

  // The body bytes the last put() consumed, pointing into the buffer given to put(): deliver
  // them before consuming that buffer. A put() takes at most one piece; empty when it took
  // none (headers, chunk framing).
  std::string_view TakePiece() const { return body_piece(); }
};

}  // namespace switchyard::net::internal
