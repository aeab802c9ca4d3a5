// RequestParser and ResponseParser: Beast's HTTP/1.1 parser (basic_parser: framing, limits,
// chunked encoding, keep-alive rules) with the message going straight into our own types.
// Header fields land in a HeaderList as they are parsed (names lower-cased, values trimmed),
// with no Beast fields container in between, which allocates once per field; a request's body
// goes into a string; a response's body is handed out piece by piece where the parser found it
// in the caller's buffer, without a copy.
//
// One parser per message: a new message (the next request on a keep-alive connection, the real
// response after a 100 Continue) takes a new parser. Set header_limit and body_limit before
// the first put().
//
// Not thread-safe; each belongs to one connection or call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "net/http_server.h"
#include "net/internal/beast.h"

namespace switchyard::net::internal {

class RequestParser final : public http::basic_parser<true> {
 public:
  RequestParser() = default;

  // After is_header_done(): the request line and the headers.
  int version() const { return version_; }  // 10 or 11
  bool head_method() const { return head_method_; }
  bool expects_continue() const { return expects_continue_; }
  // After is_done(): the request, moved out (path and query split from the target).
  HttpRequest TakeRequest();

 private:
  void on_request_impl(http::verb method, beast::string_view method_str, beast::string_view target,
                       int version, ErrorCode& ec) override;
  void on_response_impl(int code, beast::string_view reason, int version, ErrorCode& ec) override;
  void on_field_impl(http::field name, beast::string_view name_string, beast::string_view value,
                     ErrorCode& ec) override;
  void on_header_impl(ErrorCode& ec) override;
  void on_body_init_impl(const boost::optional<uint64_t>& content_length, ErrorCode& ec) override;
  size_t on_body_impl(beast::string_view body, ErrorCode& ec) override;
  void on_chunk_header_impl(uint64_t size, beast::string_view extensions, ErrorCode& ec) override;
  size_t on_chunk_body_impl(uint64_t remain, beast::string_view body, ErrorCode& ec) override;
  void on_finish_impl(ErrorCode& ec) override;

  HttpRequest request_;
  int version_ = 11;
  bool head_method_ = false;
  bool expects_continue_ = false;
};

class ResponseParser final : public http::basic_parser<false> {
 public:
  ResponseParser() = default;

  // After is_header_done(): the status and the headers.
  int status() const { return status_; }
  const HeaderList& headers() const { return headers_; }
  // The body bytes the last put() consumed, pointing into the buffer given to put(): deliver
  // them before consuming that buffer. A put() takes at most one piece; empty when it took
  // none (headers, chunk framing).
  std::string_view TakePiece();

 private:
  void on_request_impl(http::verb method, beast::string_view method_str, beast::string_view target,
                       int version, ErrorCode& ec) override;
  void on_response_impl(int code, beast::string_view reason, int version, ErrorCode& ec) override;
  void on_field_impl(http::field name, beast::string_view name_string, beast::string_view value,
                     ErrorCode& ec) override;
  void on_header_impl(ErrorCode& ec) override;
  void on_body_init_impl(const boost::optional<uint64_t>& content_length, ErrorCode& ec) override;
  size_t on_body_impl(beast::string_view body, ErrorCode& ec) override;
  void on_chunk_header_impl(uint64_t size, beast::string_view extensions, ErrorCode& ec) override;
  size_t on_chunk_body_impl(uint64_t remain, beast::string_view body, ErrorCode& ec) override;
  void on_finish_impl(ErrorCode& ec) override;

  // Takes `body` as the piece unless one is waiting to be delivered (then none of it).
  size_t TakeBody(beast::string_view body);

  int status_ = 0;
  HeaderList headers_;
  std::string_view piece_;
};

}  // namespace switchyard::net::internal
