// RequestParser and ResponseParser on fixed bytes: the request line, headers (lower-cased,
// trimmed, in order) and body of a request, fixed-length or chunked; a response's status,
// headers and body pieces, at most one per put(), pointing into the buffer given; the framing
// rules that keep a message's end unambiguous (each refused with its error code); and the
// same message given byte by byte.
#include "net/internal/message_parser.h"

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

#include "net/internal/http_chars.h"

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
  // Room after the body, so that its JSON is parsed in place.
  EXPECT_GE(request.body.capacity(), request.body.size() + RequestParser::kBodyPaddingBytes);
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

// Every byte in a field name, at a place in the first sixteen and past them: a token
// character is kept, lower-cased; any other is refused.
TEST(MessageParserTest, FieldNameBytes) {
  for (int byte = 0; byte < 256; ++byte) {
    const char c = static_cast<char>(byte);
    // Bytes that end or break the line are the head scanner's to refuse, with other codes.
    if (c == '\r' || c == '\n' || c == ':' || (byte < 0x20 && c != '\t') || byte == 0x7f)
      continue;
    for (const size_t at : {size_t{0}, size_t{5}, size_t{15}, size_t{17}}) {
      std::string name = "X-Field-Name-Of-Some-Length";
      name[at] = c;
      RequestParser parser;
      ErrorCode ec;
      PutAll(parser, "GET / HTTP/1.1\r\n" + name + ": v\r\n\r\n", &ec);
      const char lower = kLowerTokenChars[static_cast<unsigned char>(c)];
      if (lower == 0) {
        EXPECT_EQ(ec, http::error::bad_field) << "byte " << byte << " at " << at;
        continue;
      }
      ASSERT_FALSE(ec) << "byte " << byte << " at " << at << ": " << ec.message();
      std::string expected = "x-field-name-of-some-length";
      expected[at] = lower;
      ASSERT_EQ(parser.headers().size(), 1u);
      EXPECT_EQ(parser.headers()[0].first, expected) << "byte " << byte << " at " << at;
    }
  }
}

// A parser given an earlier response's fields writes the new ones into them: the list holds
// exactly the new fields, whether there are fewer or more of them.
TEST(MessageParserTest, ResponseFieldsReuseAnEarlierList) {
  ErrorCode ec;
  ResponseParser first;
  const std::string first_bytes =
      "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
      "X-Request-Id: 0123456789abcdef0123456789abcdef\r\nContent-Length: 0\r\n\r\n";
  PutAll(first, first_bytes, &ec);
  ASSERT_FALSE(ec) << ec.message();
  HeaderList spare = first.TakeHeaders();
  EXPECT_TRUE(first.headers().empty());
  ASSERT_EQ(spare.size(), 3u);

  ResponseParser fewer(std::move(spare));
  PutAll(fewer, "HTTP/1.1 204 No Content\r\nServer: S\r\n\r\n", &ec);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(fewer.headers(), (HeaderList{{"server", "S"}}));

  ResponseParser more(fewer.TakeHeaders());
  PutAll(more, "HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\nContent-Length: 0\r\n\r\n", &ec);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(more.headers(), (HeaderList{{"a", "1"}, {"b", "2"}, {"content-length", "0"}}));
}

// An HTTP/1.0 response without a length, and one with a coding we do not decode: both
// bodies run to the close.
TEST(MessageParserTest, ResponseBodyToTheClose) {
  for (const auto& [bytes, body] :
       {std::pair<std::string, std::string>{"HTTP/1.0 200 OK\r\n\r\nall of it", "all of it"},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nzzz", "zzz"}}) {
    ResponseParser parser;
    ErrorCode ec;
    size_t used = parser.put(asio::buffer(bytes), ec);
    ASSERT_FALSE(ec) << ec.message();
    ASSERT_TRUE(parser.is_header_done());
    used += parser.put(asio::buffer(bytes.data() + used, bytes.size() - used), ec);
    ASSERT_FALSE(ec) << ec.message();
    EXPECT_EQ(parser.TakePiece(), body);
    EXPECT_EQ(used, bytes.size());
    EXPECT_FALSE(parser.is_done());
    EXPECT_FALSE(parser.keep_alive());
    parser.put_eof(ec);
    ASSERT_FALSE(ec) << ec.message();
    EXPECT_TRUE(parser.is_done());
    EXPECT_FALSE(parser.keep_alive());
  }
}

// Parses `bytes` with a fresh RequestParser as one buffer; the error (or none) it stops with.
ErrorCode RequestError(std::string_view bytes, size_t body_limit = 1 << 20) {
  RequestParser parser;
  parser.header_limit(1024);
  parser.body_limit(body_limit);
  ErrorCode ec;
  PutAll(parser, bytes, &ec);
  return ec;
}

TEST(MessageParserTest, AmbiguousFramingIsRefused) {
  const std::string get = "GET / HTTP/1.1\r\n";
  EXPECT_EQ(RequestError(get + "Host: h\nX: y\r\n\r\n"), http::error::bad_line_ending);
  EXPECT_EQ(RequestError("GET / HTTP/1.1\nHost: h\n\n"), http::error::bad_line_ending);
  EXPECT_EQ(RequestError(get + "Host: h\rX: y\r\n\r\n"), http::error::bad_line_ending);
  EXPECT_EQ(RequestError(get + "X: a\r\n b\r\n\r\n"), http::error::bad_field);  // obs-fold
  EXPECT_EQ(RequestError(get + "X : a\r\n\r\n"), http::error::bad_field);
  EXPECT_EQ(RequestError(get + ": a\r\n\r\n"), http::error::bad_field);
  EXPECT_EQ(RequestError(get + "X: a\x01b\r\n\r\n"), http::error::bad_value);
  EXPECT_EQ(RequestError(get + "X: a\x7f\r\n\r\n"), http::error::bad_value);
  EXPECT_EQ(RequestError(std::string(get + "X: a") + '\0' + "\r\n\r\n"), http::error::bad_value);
  const std::string post = "POST / HTTP/1.1\r\n";
  EXPECT_EQ(RequestError(post + "Content-Length: 1\r\nContent-Length: 1\r\n\r\nx"),
            http::error::bad_content_length);
  EXPECT_EQ(RequestError(post + "Content-Length: +1\r\n\r\nx"), http::error::bad_content_length);
  EXPECT_EQ(RequestError(post + "Content-Length: 1, 1\r\n\r\nx"), http::error::bad_content_length);
  EXPECT_EQ(RequestError(post + "Content-Length: 99999999999999999999\r\n\r\n"),
            http::error::bad_content_length);
  EXPECT_EQ(RequestError(post + "Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n"),
            http::error::bad_transfer_encoding);
  EXPECT_EQ(RequestError(post + "Transfer-Encoding: gzip\r\n\r\n"),
            http::error::bad_transfer_encoding);
  EXPECT_EQ(RequestError(post + "Transfer-Encoding: chunked, gzip\r\n\r\n"),
            http::error::bad_transfer_encoding);
  EXPECT_EQ(RequestError(post + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n"),
            http::error::bad_transfer_encoding);
  EXPECT_EQ(RequestError("G(T / HTTP/1.1\r\n\r\n"), http::error::bad_method);
  EXPECT_EQ(RequestError("GET /a\x7f HTTP/1.1\r\n\r\n"), http::error::bad_value);
  EXPECT_EQ(RequestError("GET /a b HTTP/1.1\r\n\r\n"), http::error::bad_version);
  EXPECT_EQ(RequestError("GET / HTTP/2.0\r\n\r\n"), http::error::bad_version);
  EXPECT_EQ(RequestError("GET  / HTTP/1.1\r\n\r\n"), http::error::bad_target);
}

TEST(MessageParserTest, ChunkFramingErrorsAndLimits) {
  const std::string chunked = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  EXPECT_EQ(RequestError(chunked + "zz\r\n"), http::error::bad_chunk);
  EXPECT_EQ(RequestError(chunked + "3\r\nabcX\r\n"), http::error::bad_chunk);
  EXPECT_EQ(RequestError(chunked + "3 x\r\nabc\r\n"), http::error::bad_chunk_extension);
  EXPECT_EQ(RequestError(chunked + "11111111111111111\r\n"), http::error::bad_chunk);
  EXPECT_EQ(RequestError(chunked + "5\r\nabcde\r\n", 4), http::error::body_limit);
  EXPECT_EQ(RequestError(chunked + "3\r\nabc\r\n2\r\nde\r\n", 4), http::error::body_limit);
  EXPECT_EQ(RequestError(chunked + "0\r\nX: y\nZ: w\r\n\r\n"), http::error::bad_field);
  EXPECT_EQ(RequestError(chunked + "0\r\n" + std::string(2000, 'x')), http::error::header_limit);
  EXPECT_EQ(RequestError("GET / HTTP/1.1\r\nX: " + std::string(2000, 'x')),
            http::error::header_limit);
  EXPECT_EQ(RequestError("GET / HTTP/1.1\r\nX: y\r\n"), http::error::need_more);

  RequestParser parser;
  ErrorCode ec;
  const std::string bytes = chunked + "3;name=\"v\"\r\nabc\r\n0\r\nTrailer-Field: t\r\n\r\n";
  EXPECT_EQ(PutAll(parser, bytes, &ec), bytes.size());
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(parser.TakeRequest().body, "abc");  // extensions and trailers are dropped
}

TEST(MessageParserTest, LeadingEmptyLinesAndConnectionTokens) {
  RequestParser parser;
  ErrorCode ec;
  PutAll(parser, "\r\n\r\nGET /x HTTP/1.0\r\nConnection: Upgrade, Keep-Alive\r\n\r\n", &ec);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_TRUE(parser.keep_alive());
  EXPECT_EQ(parser.TakeRequest().path, "/x");

  RequestParser closing;
  PutAll(closing, "GET / HTTP/1.1\r\nConnection: keep-alive,close\r\n\r\n", &ec);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_FALSE(closing.keep_alive());
}

TEST(MessageParserTest, ByteByByteGivesTheSameRequest) {
  const std::string bytes =
      "POST /v1/chat/completions HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n"
      "X-Tab:\tv\t\r\n\r\n4\r\n{\"a\"\r\n3\r\n:1}\r\n0\r\n\r\n";
  RequestParser parser;
  std::string buffer;  // what a connection holds: received and not yet consumed
  for (const char c : bytes) {
    buffer.push_back(c);
    ErrorCode ec;
    const size_t used = parser.put(asio::buffer(buffer), ec);
    ASSERT_TRUE(!ec || ec == http::error::need_more) << ec.message();
    buffer.erase(0, used);
  }
  ASSERT_TRUE(parser.is_done());
  EXPECT_TRUE(buffer.empty());
  const HttpRequest request = parser.TakeRequest();
  const HeaderList expected = {{"host", "h"}, {"transfer-encoding", "chunked"}, {"x-tab", "v"}};
  EXPECT_EQ(request.headers, expected);
  EXPECT_EQ(request.body, "{\"a\":1}");
}

TEST(MessageParserTest, ResponsesWithoutBodies) {
  for (const std::string& head :
       {std::string("HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n"),
        std::string("HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n"),
        std::string("HTTP/1.1 100\r\n\r\n")}) {
    ResponseParser parser;
    ErrorCode ec;
    EXPECT_EQ(parser.put(asio::buffer(head), ec), head.size()) << head;
    ASSERT_FALSE(ec) << ec.message();
    EXPECT_TRUE(parser.is_done()) << head;
    EXPECT_TRUE(parser.keep_alive()) << head;
  }
  ResponseParser head_response;
  head_response.skip(true);
  ErrorCode ec;
  const std::string bytes = "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n";
  EXPECT_EQ(head_response.put(asio::buffer(bytes), ec), bytes.size());
  EXPECT_TRUE(head_response.is_done());
}

TEST(MessageParserTest, BadStatusLinesAndTruncation) {
  for (const std::string_view line :
       {"HTTP/1.1 20 OK", "HTTP/1.1 099 X", "HTTP/1.1 2000", "HTTP/1.1 200X", "HTTP/1.1\t200 OK"}) {
    ResponseParser parser;
    ErrorCode ec;
    const std::string bytes = std::string(line) + "\r\n\r\n";
    parser.put(asio::buffer(bytes), ec);
    EXPECT_TRUE(ec == http::error::bad_status || ec == http::error::bad_reason ||
                ec == http::error::bad_value)
        << line << ": " << ec.message();
  }
  ResponseParser parser;
  ErrorCode ec;
  const std::string bytes = "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc";
  size_t used = parser.put(asio::buffer(bytes), ec);
  used += parser.put(asio::buffer(bytes.data() + used, bytes.size() - used), ec);
  EXPECT_EQ(parser.TakePiece(), "abc");
  parser.put_eof(ec);
  EXPECT_EQ(ec, http::error::partial_message);
}

}  // namespace
}  // namespace switchyard::net::internal
