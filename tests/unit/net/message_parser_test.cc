// RequestParser and ResponseParser on fixed bytes: the request line, headers (lower-cased,
// trimmed, in order) and body of a request, fixed-length or chunked; a response's status,
// headers and body pieces, at most one per put(), pointing into the buffer given.
#include "net/internal/message_parser.h"

#include <string>
#include <string_view>

#include "gtest/gtest.h"

namespace switchyard::net::internal {
namespace {

// Feeds `bytes` to `parser` as one buffer until it is done or stuck; returns the bytes used.
template <typename Parser>
size_t PutAll(Parser& parser, std::string_view bytes, ErrorCode* ec) {
  size_t used = 0;
  while (!parser.is_done()) {
    const size_t n = parser.put(asio::buffer(bytes.data() + used, bytes.size() - used), *ec);
    used += n;
    if (*ec || n == 0)
      break;
  }
  return used;
}

TEST(MessageParserTest, RequestWithContentLength) {
  const std::string bytes =
      "POST /v1/completions?x=1 HTTP/1.1\r\nHost: h\r\nContent-Type:  application/json \r\n"
      "X-Request-ID: abc\r\nContent-Length: 7\r\n\r\n{\"a\":1}";
  RequestParser parser;
  ErrorCode ec;
  EXPECT_EQ(PutAll(parser, bytes, &ec), bytes.size());
  ASSERT_FALSE(ec) << ec.message();
  ASSERT_TRUE(parser.is_done());
  EXPECT_EQ(parser.version(), 11);
  EXPECT_TRUE(parser.keep_alive());
  EXPECT_FALSE(parser.head_method());
  EXPECT_FALSE(parser.expects_continue());
  const HttpRequest request = parser.TakeRequest();
  EXPECT_EQ(request.method, "POST");
  EXPECT_EQ(request.target, "/v1/completions?x=1");
  EXPECT_EQ(request.path, "/v1/completions");
  EXPECT_EQ(request.query, "x=1");
  const HeaderList expected = {{"host", "h"},
                               {"content-type", "application/json"},
                               {"x-request-id", "abc"},
                               {"content-length", "7"}};
  EXPECT_EQ(request.headers, expected);
  EXPECT_EQ(request.body, "{\"a\":1}");
}

TEST(MessageParserTest, ChunkedRequestAndExpectContinue) {
  const std::string bytes =
      "PUT /u HTTP/1.1\r\nExpect: 100-Continue\r\nTransfer-Encoding: chunked\r\n\r\n"
      "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
  RequestParser parser;
  ErrorCode ec;
  EXPECT_EQ(PutAll(parser, bytes, &ec), bytes.size());
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_TRUE(parser.expects_continue());
  EXPECT_EQ(parser.TakeRequest().body, "abcde");
}

TEST(MessageParserTest, HttpTenHeadRequest) {
  RequestParser parser;
  ErrorCode ec;
  PutAll(parser, "HEAD / HTTP/1.0\r\n\r\n", &ec);
  ASSERT_FALSE(ec) << ec.message();
  ASSERT_TRUE(parser.is_done());
  EXPECT_EQ(parser.version(), 10);
  EXPECT_TRUE(parser.head_method());
  EXPECT_FALSE(parser.keep_alive());
  EXPECT_EQ(parser.TakeRequest().path, "/");
}

TEST(MessageParserTest, BodyOverTheLimitIsRefused) {
  RequestParser parser;
  parser.body_limit(4);
  ErrorCode ec;
  PutAll(parser, "POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\nabcde", &ec);
  EXPECT_EQ(ec, http::error::body_limit);
}

TEST(MessageParserTest, ResponseBodyComesInPiecesFromTheBuffer) {
  const std::string bytes =
      "HTTP/1.1 201 Created\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
      "\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n";
  ResponseParser parser;
  ErrorCode ec;
  std::string body;
  size_t used = 0;
  int pieces = 0;
  while (!parser.is_done()) {
    const size_t n = parser.put(asio::buffer(bytes.data() + used, bytes.size() - used), ec);
    ASSERT_FALSE(ec) << ec.message();
    const std::string_view piece = parser.TakePiece();
    if (!piece.empty()) {
      EXPECT_GE(piece.data(), bytes.data() + used);
      EXPECT_LE(piece.data() + piece.size(), bytes.data() + used + n);
      body.append(piece);
      ++pieces;
    }
    used += n;
  }
  EXPECT_EQ(used, bytes.size());
  EXPECT_EQ(parser.status(), 201);
  const HeaderList expected = {{"content-type", "text/event-stream"},
                               {"transfer-encoding", "chunked"}};
  EXPECT_EQ(parser.headers(), expected);
  EXPECT_EQ(body, "hello world");
  EXPECT_EQ(pieces, 2);
  EXPECT_TRUE(parser.keep_alive());
}

TEST(MessageParserTest, ResponseBodyToTheClose) {
  ResponseParser parser;
  ErrorCode ec;
  const std::string bytes = "HTTP/1.0 200 OK\r\n\r\nall of it";
  size_t used = parser.put(asio::buffer(bytes), ec);
  ASSERT_FALSE(ec) << ec.message();
  ASSERT_TRUE(parser.is_header_done());
  used += parser.put(asio::buffer(bytes.data() + used, bytes.size() - used), ec);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(parser.TakePiece(), "all of it");
  EXPECT_EQ(used, bytes.size());
  EXPECT_FALSE(parser.is_done());
  parser.put_eof(ec);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_TRUE(parser.is_done());
  EXPECT_FALSE(parser.keep_alive());
}

}  // namespace
}  // namespace switchyard::net::internal
