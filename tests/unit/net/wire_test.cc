#include "net/internal/wire.h"

#include <string>

#include "gtest/gtest.h"

#include "net/internal/http_chars.h"

namespace switchyard::net::internal {
namespace {

TEST(WireTest, HeadWithContentLength) {
  const HeaderList extra = {{"X-Id", "7"}};
  ResponseHead head;
  head.status = 404;
  head.content_type = "application/json";
  head.extra_headers = &extra;
  head.content_length = 12;
  head.server_name = "switchyard";
  EXPECT_EQ(EncodeHead(head),
            "HTTP/1.1 404 Not Found\r\nServer: switchyard\r\nContent-Type: application/json\r\n"
            "Content-Length: 12\r\nX-Id: 7\r\n\r\n");
}

TEST(WireTest, ChunkedEventStreamAndConnectionHeaders) {
  ResponseHead head;
  head.content_type = "text/event-stream";
  head.chunked = true;
  head.persistence = Persistence::kKeepAlive;
  EXPECT_EQ(EncodeHead(head),
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
            "Connection: keep-alive\r\nCache-Control: no-cache\r\nX-Accel-Buffering: no\r\n\r\n");
  const HeaderList own_cache = {{"cache-control", "no-store"}};
  head.extra_headers = &own_cache;
  head.persistence = Persistence::kClose;
  EXPECT_EQ(EncodeHead(head),
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
            "Connection: close\r\nX-Accel-Buffering: no\r\ncache-control: no-store\r\n\r\n");
}

TEST(WireTest, FramingAndUnsafeExtraHeadersAreDropped) {
  const HeaderList extra = {{"Content-Length", "1"},   {"transfer-encoding", "gzip"},
                            {"Connection", "upgrade"}, {"X-Evil", "a\r\nSet-Cookie: b"},
                            {"Bad Name", "v"},         {"", "v"},
                            {"X-Fine", "ok"}};
  ResponseHead head;
  head.status = 299;
  head.extra_headers = &extra;
  head.content_length = 0;
  EXPECT_EQ(EncodeHead(head), "HTTP/1.1 299 Unknown\r\nContent-Length: 0\r\nX-Fine: ok\r\n\r\n");
  head.status = 7;
  head.extra_headers = nullptr;
  EXPECT_EQ(EncodeHead(head).substr(0, 30), "HTTP/1.1 500 Internal Server E");
}

TEST(WireTest, ExtraHeadersAreCheckedByEveryByteAndFramingNamesInAnyCase) {
  using namespace std::string_literals;
  const HeaderList extra = {{"X-Lf", "a\nb"},
                            {"X-Cr", "a\rb"},
                            {"X-Nul", "a\0b"s},
                            {"X-Tab", "a\tb"},
                            {"CONTENT-LENGTH", "1"},
                            {"Transfer-ENCODING", "gzip"},
                            {"cOnNeCtIoN", "close"},
                            {"Content-Lengthy", "long"},
                            {"Content-Lengtx", "same length"},
                            {"Connectiox", "same length"},
                            {"Transfer-Encodinx", "same length"},
                            {"X-Long", std::string(2000, 'v')}};
  ResponseHead head;
  head.extra_headers = &extra;
  head.content_length = 18446744073709551615u;
  EXPECT_EQ(EncodeHead(head),
            "HTTP/1.1 200 OK\r\nContent-Length: 18446744073709551615\r\nX-Tab: a\tb\r\n"
            "Content-Lengthy: long\r\nContent-Lengtx: same length\r\nConnectiox: same length\r\n"
            "Transfer-Encodinx: same length\r\nX-Long: " +
                std::string(2000, 'v') + "\r\n\r\n");
}

TEST(WireTest, ChunkPrefixIsHex) {
  EXPECT_EQ(ChunkPrefix(1), "1\r\n");
  EXPECT_EQ(ChunkPrefix(255), "ff\r\n");
  EXPECT_EQ(ChunkPrefix(65536), "10000\r\n");
}

TEST(WireTest, DefaultErrorBodyIsOpenAiShaped) {
  const auto [content_type, body] = DefaultErrorBody(431, "too \"big\"");
  EXPECT_EQ(content_type, "application/json");
  EXPECT_EQ(body,
            "{\"error\":{\"message\":\"too \\\"big\\\"\",\"type\":"
            "\"RequestHeaderFieldsTooLargeError\",\"param\":null,\"code\":431}}");
  EXPECT_NE(DefaultErrorBody(400, "x").second.find("\"BadRequestError\""), std::string::npos);
  EXPECT_NE(DefaultErrorBody(408, "x").second.find("\"RequestTimeoutError\""), std::string::npos);
  EXPECT_NE(DefaultErrorBody(413, "x").second.find("\"RequestEntityTooLargeError\""),
            std::string::npos);
}

TEST(WireTest, RequestHeadFramingIsTheClients) {
  const HeaderList headers = {{"X-Request-Id", "r1"},
                              {"content-length", "5"},
                              {"Host", "evil"},
                              {"Transfer-Encoding", "chunked"},
                              {"connection", "close"}};
  RequestHead head;
  head.method = "POST";
  head.target = "/v1/completions?stream=1";
  head.host = "127.0.0.1:8000";
  head.headers = &headers;
  head.content_length = 12;
  absl::StatusOr<std::string> bytes = EncodeRequestHead(head);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(*bytes,
            "POST /v1/completions?stream=1 HTTP/1.1\r\nHost: 127.0.0.1:8000\r\n"
            "X-Request-Id: r1\r\nContent-Length: 12\r\nConnection: keep-alive\r\n\r\n");
  const HeaderList host_like = {{"HOST", "evil"}, {"Hostx", "kept"}, {"X-Tab", "a\tb"}};
  head.headers = &host_like;
  head.content_length = 0;
  EXPECT_EQ(*EncodeRequestHead(head),
            "POST /v1/completions?stream=1 HTTP/1.1\r\nHost: 127.0.0.1:8000\r\n"
            "Hostx: kept\r\nX-Tab: a\tb\r\nContent-Length: 0\r\nConnection: keep-alive\r\n\r\n");
  head.method = "GET";
  head.headers = nullptr;
  head.content_length.reset();
  EXPECT_EQ(*EncodeRequestHead(head),
            "GET /v1/completions?stream=1 HTTP/1.1\r\nHost: 127.0.0.1:8000\r\n"
            "Connection: keep-alive\r\n\r\n");
}

TEST(WireTest, RequestHeadRejectsWhatWouldBreakTheFraming) {
  RequestHead head;
  head.method = "GET";
  head.target = "/";
  head.host = "h:1";
  for (const std::string_view method : {"", "GE T", "GET\r\n"}) {
    RequestHead bad = head;
    bad.method = method;
    EXPECT_EQ(EncodeRequestHead(bad).status().code(), absl::StatusCode::kInvalidArgument);
  }
  for (const std::string_view target : {"", "/a b", "/a\r\nX: y", "/\x7f"}) {
    RequestHead bad = head;
    bad.target = target;
    EXPECT_EQ(EncodeRequestHead(bad).status().code(), absl::StatusCode::kInvalidArgument);
  }
  for (const HeaderList& headers :
       {HeaderList{{"X", "a\r\nY: b"}}, HeaderList{{"X", "a\nb"}}, HeaderList{{"X", "a\rb"}},
        HeaderList{{"X", std::string("a\0b", 3)}}, HeaderList{{"Bad Name", "v"}},
        HeaderList{{"", "v"}}, HeaderList{{"X:", "v"}}}) {
    RequestHead bad = head;
    bad.headers = &headers;
    EXPECT_EQ(EncodeRequestHead(bad).status().code(), absl::StatusCode::kInvalidArgument);
  }
}

// Every byte at every place of names and values of many lengths (the checks go sixteen bytes
// a step): a name takes token characters only, a value anything but CR, LF and NUL; the
// response head leaves a bad header out, the request head refuses it.
TEST(WireTest, HeaderChecksTakeExactlyTheSafeBytesAnywhere) {
  RequestHead request;
  request.method = "GET";
  request.target = "/";
  request.host = "h:1";
  ResponseHead response;
  response.content_length = 0;
  const std::string clean_response = EncodeHead(response);
  for (int byte = 0; byte < 256; ++byte) {
    const char c = static_cast<char>(byte);
    const bool token = IsTokenChar(c);
    const bool value_ok = c != '\r' && c != '\n' && c != '\0';
    for (const size_t size : {1, 2, 15, 16, 17, 31, 32, 33, 40}) {
      for (size_t at = 0; at < size; ++at) {
        std::string odd(size, 'a');
        odd[at] = c;
        for (const bool in_name : {true, false}) {
          const HeaderList headers = {in_name ? std::pair{odd, std::string("v")}
                                              : std::pair{std::string("X-Ok"), odd}};
          const bool ok = in_name ? token : value_ok;
          request.headers = &headers;
          EXPECT_EQ(EncodeRequestHead(request).ok(), ok)
              << "byte " << byte << " at " << at << " of " << size << (in_name ? " (name)" : "");
          response.extra_headers = &headers;
          const std::string encoded = EncodeHead(response);
          EXPECT_EQ(encoded != clean_response, ok) << "byte " << byte << " at " << at;
          if (ok) {
            EXPECT_NE(encoded.find(headers[0].first + ": " + headers[0].second + "\r\n"),
                      std::string::npos);
          }
          response.extra_headers = nullptr;
        }
      }
    }
  }
}

}  // namespace
}  // namespace switchyard::net::internal
