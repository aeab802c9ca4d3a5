#include "net/internal/message_parser.h"

#include <utility>

namespace switchyard::net::internal {

size_t RequestParser::put(asio::const_buffer bytes, ErrorCode& ec) {
  const bool had_head = is_header_done();
  const size_t used = Http1Parser::put(bytes, ec);
  // The parser has checked the length against the body limit already. The room after the
  // body lets a JSON parser read it in place (api::RequestBody::kPaddingBytes, simdjson's
  // padding) instead of copying it first.
  if (!had_head && is_header_done() && content_length().has_value())
    body_.reserve(static_cast<size_t>(*content_length()) + kBodyPaddingBytes);
  body_.append(body_piece());
  return used;
}

HttpRequest RequestParser::TakeRequest() {
  HttpRequest request;
  const size_t question = target_.find('?');
  request.path = target_.substr(0, question);
  if (question != std::string::npos)
    request.query = target_.substr(question + 1);
  request.method = std::move(method_);
  request.target = std::move(target_);
  request.headers = std::move(headers_);
  request.body = std::move(body_);
  return request;
}

}  // namespace switchyard::net::internal
