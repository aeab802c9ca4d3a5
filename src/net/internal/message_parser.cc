#include "net/internal/message_parser.h"

#include <utility>

#include "net/internal/wire.h"

namespace switchyard::net::internal {
namespace {

// Room for the usual message's header fields, so that the list grows once, not field by field.
constexpr size_t kHeaderReserve = 8;

std::string_view View(beast::string_view s) {
  return {s.data(), s.size()};
}

}  // namespace

HttpRequest RequestParser::TakeRequest() {
  const size_t question = request_.target.find('?');
  request_.path = request_.target.substr(0, question);
  if (question != std::string::npos)
    request_.query = request_.target.substr(question + 1);
  return std::move(request_);
}

void RequestParser::on_request_impl(http::verb method, beast::string_view method_str,
                                    beast::string_view target, int version, ErrorCode& /*ec*/) {
  request_.method = View(method_str);
  request_.target = View(target);
  version_ = version;
  head_method_ = method == http::verb::head;
  request_.headers.reserve(kHeaderReserve);
}

void RequestParser::on_response_impl(int /*code*/, beast::string_view /*reason*/, int /*version*/,
                                     ErrorCode& /*ec*/) {}

void RequestParser::on_field_impl(http::field name, beast::string_view name_string,
                                  beast::string_view value, ErrorCode& /*ec*/) {
  if (name == http::field::expect && beast::iequals(value, "100-continue"))
    expects_continue_ = true;
  AddReceivedHeader(View(name_string), View(value), &request_.headers);
}

void RequestParser::on_header_impl(ErrorCode& /*ec*/) {}

void RequestParser::on_body_init_impl(const boost::optional<uint64_t>& content_length,
                                      ErrorCode& /*ec*/) {
  // The parser has checked the length against the body limit already.
  if (content_length.has_value())
    request_.body.reserve(static_cast<size_t>(*content_length));
}

size_t RequestParser::on_body_impl(beast::string_view body, ErrorCode& /*ec*/) {
  request_.body.append(body.data(), body.size());
  return body.size();
}

void RequestParser::on_chunk_header_impl(uint64_t /*size*/, beast::string_view /*extensions*/,
                                         ErrorCode& /*ec*/) {}

size_t RequestParser::on_chunk_body_impl(uint64_t /*remain*/, beast::string_view body,
                                         ErrorCode& ec) {
  return on_body_impl(body, ec);
}

void RequestParser::on_finish_impl(ErrorCode& /*ec*/) {}

std::string_view ResponseParser::TakePiece() {
  return std::exchange(piece_, {});
}

void ResponseParser::on_request_impl(http::verb /*method*/, beast::string_view /*method_str*/,
                                     beast::string_view /*target*/, int /*version*/,
                                     ErrorCode& /*ec*/) {}

void ResponseParser::on_response_impl(int code, beast::string_view /*reason*/, int /*version*/,
                                      ErrorCode& /*ec*/) {
  status_ = code;
  headers_.reserve(kHeaderReserve);
}

void ResponseParser::on_field_impl(http::field /*name*/, beast::string_view name_string,
                                   beast::string_view value, ErrorCode& /*ec*/) {
  AddReceivedHeader(View(name_string), View(value), &headers_);
}

void ResponseParser::on_header_impl(ErrorCode& /*ec*/) {}

void ResponseParser::on_body_init_impl(const boost::optional<uint64_t>& /*content_length*/,
                                       ErrorCode& /*ec*/) {}

size_t ResponseParser::on_body_impl(beast::string_view body, ErrorCode& /*ec*/) {
  return TakeBody(body);
}

void ResponseParser::on_chunk_header_impl(uint64_t /*size*/, beast::string_view /*extensions*/,
                                          ErrorCode& /*ec*/) {}

size_t ResponseParser::on_chunk_body_impl(uint64_t /*remain*/, beast::string_view body,
                                          ErrorCode& /*ec*/) {
  return TakeBody(body);
}

void ResponseParser::on_finish_impl(ErrorCode& /*ec*/) {}

size_t ResponseParser::TakeBody(beast::string_view body) {
  if (!piece_.empty())
    return 0;
  piece_ = View(body);
  return body.size();
}

}  // namespace switchyard::net::internal
