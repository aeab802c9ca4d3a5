// Requests, keep-alive and the transport limits, over real sockets on 127.0.0.1.
#include "net/http_server.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "fmt/format.h"
#include "gtest/gtest.h"

#include "test_client.h"

namespace switchyard::net {
namespace {

using testing::Get;
using testing::Post;
using testing::TestClient;
using testing::TestResponse;

// Answers "<method> <path> q=<query> h=<x-test header> b=<body>".
void Echo(HttpRequest request, std::shared_ptr<HttpResponder> responder) {
  responder->Send(200, "text/plain",
                  fmt::format("{} {} q={} h={} b={}", request.method, request.path, request.query,
                              request.Header("x-test").value_or("-"), request.body),
                  {{"X-Remote", request.remote_address}});
}

// Sends a request head a byte every 50 ms, never complete, until the server answers (its
// header timeout) or closes; the answer, if any.
std::optional<TestResponse> SendHeadSlowly(TestClient& client) {
  std::optional<TestResponse> response;
  const std::string slow = "GET /" + std::string(200, 'x');
  for (size_t i = 0; i < slow.size() && !response; ++i) {
    if (!client.Send(slow.substr(i, 1)))
      break;
    response = client.ReadResponse(false, std::chrono::milliseconds(50));
  }
  return response;
}

class HttpServerTest : public ::testing::Test {
 protected:
  void StartServer(HttpServerOptions options = {}) {
    absl::StatusOr<std::unique_ptr<HttpServer>> server =
        HttpServer::Start(options, [this](HttpRequest request, std::shared_ptr<HttpResponder> r) {
          ++num_handled_;
          Echo(std::move(request), std::move(r));
        });
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
  }

  // One GET on a new connection.
  std::optional<TestResponse> FreshGet(std::string_view target) {
    TestClient client(server_->port());
    if (!client.ok() || !client.Send(Get(target)))
      return std::nullopt;
    return client.ReadResponse();
  }

  // Sends `bytes` on a new connection; expects an error `status` with Connection: close,
  // then the close, then that the server still answers a new connection.
  void ExpectRejected(std::string_view bytes, int status) {
    TestClient client(server_->port());
    ASSERT_TRUE(client.ok());
    client.Send(bytes);
    std::optional<TestResponse> response = client.ReadResponse();
    ASSERT_TRUE(response.has_value());
    EXPECT_EQ(response->status, status);
    EXPECT_EQ(response->Header("connection"), "close");
    EXPECT_EQ(response->Header("content-type"), "application/json");
    EXPECT_NE(response->body.find(fmt::format("\"code\":{}", status)), std::string::npos)
        << response->body;
    EXPECT_TRUE(client.WaitForClose());
    std::optional<TestResponse> after = FreshGet("/after");
    ASSERT_TRUE(after.has_value());
    EXPECT_EQ(after->status, 200);
  }

  std::atomic<int> num_handled_{0};
  std::unique_ptr<HttpServer> server_;
};

TEST_F(HttpServerTest, GetAndPostEcho) {
  StartServer();
  TestClient client(server_->port());
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE(client.Send(Get("/v1/models?x=1&y=2", "X-Test:   spaced value  \r\n")));
  std::optional<TestResponse> get = client.ReadResponse();
  ASSERT_TRUE(get.has_value());
  EXPECT_EQ(get->status, 200);
  EXPECT_EQ(get->body, "GET /v1/models q=x=1&y=2 h=spaced value b=");
  EXPECT_EQ(get->Header("server"), "switchyard");
  EXPECT_EQ(get->Header("content-type"), "text/plain");
  EXPECT_EQ(get->Header("connection"), std::nullopt);
  EXPECT_EQ(get->Header("x-remote")->rfind("127.0.0.1:", 0), 0u);

  ASSERT_TRUE(client.Send(Post("/v1/completions", "{\"prompt\": \"hi\"}")));
  std::optional<TestResponse> post = client.ReadResponse();
  ASSERT_TRUE(post.has_value());
  EXPECT_EQ(post->body, "POST /v1/completions q= h=- b={\"prompt\": \"hi\"}");
  EXPECT_EQ(post->Header("content-length"), std::to_string(post->body.size()));
}

TEST_F(HttpServerTest, ServerHeaderOmittedWhenNameEmpty) {
  HttpServerOptions options;
  options.server_name = "";
  StartServer(options);
  std::optional<TestResponse> response = FreshGet("/");
  ASSERT_TRUE(response.has_value());
  EXPECT_EQ(response->Header("server"), std::nullopt);
}

TEST_F(HttpServerTest, KeepAliveAndPipelining) {
  StartServer();
  TestClient client(server_->port());
  ASSERT_TRUE(client.ok());
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(client.Send(Get(fmt::format("/r{}", i))));
    std::optional<TestResponse> response = client.ReadResponse();
    ASSERT_TRUE(response.has_value());
    EXPECT_EQ(response->body, fmt::format("GET /r{} q= h=- b=", i));
  }
  // Two requests in one write are answered one after the other, in order.
  ASSERT_TRUE(client.Send(Post("/p1", "one") + Post("/p2", "two")));
  std::optional<TestResponse> first = client.ReadResponse();
  std::optional<TestResponse> second = client.ReadResponse();
  ASSERT_TRUE(first.has_value() && second.has_value());
  EXPECT_EQ(first->body, "POST /p1 q= h=- b=one");
  EXPECT_EQ(second->body, "POST /p2 q= h=- b=two");
}

TEST_F(HttpServerTest, ConnectionCloseIsHonoured) {
  StartServer();
  TestClient client(server_->port());
  ASSERT_TRUE(client.Send(Get("/", "Connection: close\r\n")));
  std::optional<TestResponse> response = client.ReadResponse();
  ASSERT_TRUE(response.has_value());
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->Header("connection"), "close");
  EXPECT_TRUE(client.WaitForClose());
}

// A handler that answers with "connection: close" (a draining engine's 503) gets the
// connection closed after the response, the header sent once.
TEST(HttpServerHandlerCloseTest, HandlerConnectionCloseClosesAfterTheResponse) {
  absl::StatusOr<std::unique_ptr<HttpServer>> server = HttpServer::Start({}, [](HttpRequest,
                                                                                std::shared_ptr<
                                                                                    HttpResponder>
                                                                                    responder) {
    responder->Send(503, "application/json", "{}", {{"retry-after", "1"}, {"connection", "close"}});
  });
  ASSERT_TRUE(server.ok()) << server.status();
  TestClient client((*server)->port());
  ASSERT_TRUE(client.Send(Get("/")));
  std::optional<TestResponse> response = client.ReadResponse();
  ASSERT_TRUE(response.has_value());
  EXPECT_EQ(response->status, 503);
  EXPECT_EQ(response->Header("connection"), "close");
  EXPECT_EQ(response->Header("retry-after"), "1");
  int connection_headers = 0;
  for (const auto& [name, value] : response->headers)
    connection_headers += name == "connection" ? 1 : 0;
  EXPECT_EQ(connection_headers, 1);
  EXPECT_TRUE(client.WaitForClose());
}

TEST_F(HttpServerTest, Http10ClosesUnlessKeepAliveAsked) {
  StartServer();
  {
    TestClient client(server_->port());
    ASSERT_TRUE(client.Send("GET /old HTTP/1.0\r\n\r\n"));
    std::optional<TestResponse> response = client.ReadResponse();
    ASSERT_TRUE(response.has_value());
    EXPECT_EQ(response->body, "GET /old q= h=- b=");
    EXPECT_EQ(response->Header("connection"), "close");
    EXPECT_TRUE(client.WaitForClose());
  }
  TestClient client(server_->port());
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(client.Send("GET /ka HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
    std::optional<TestResponse> response = client.ReadResponse();
    ASSERT_TRUE(response.has_value());
    EXPECT_EQ(response->Header("connection"), "keep-alive");
  }
}

TEST_F(HttpServerTest, HeadSendsHeadersOnly) {
  StartServer();
  TestClient client(server_->port());
  ASSERT_TRUE(client.Send("HEAD /h HTTP/1.1\r\nHost: x\r\n\r\n"));
  std::optional<TestResponse> head = client.ReadResponse(/*head_request=*/true);
  ASSERT_TRUE(head.has_value());
  EXPECT_EQ(head->Header("content-length"),
            std::to_string(std::string("HEAD /h q= h=- b=").size()));
  ASSERT_TRUE(client.Send(Get("/next")));
  std::optional<TestResponse> next = client.ReadResponse();
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->body, "GET /next q= h=- b=");
}

TEST_F(HttpServerTest, ExpectContinue) {
  StartServer();
  TestClient client(server_->port());
  ASSERT_TRUE(client.Send(
      "POST /c HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n"));
  std::optional<TestResponse> interim = client.ReadResponse();
  ASSERT_TRUE(interim.has_value());
  EXPECT_EQ(interim->status, 100);
  ASSERT_TRUE(client.Send("hello"));
  std::optional<TestResponse> response = client.ReadResponse();
  ASSERT_TRUE(response.has_value());
  EXPECT_EQ(response->body, "POST /c q= h=- b=hello");
}

TEST_F(HttpServerTest, HeadersOverLimitAre431) {
  HttpServerOptions options;
  options.max_header_bytes = 1024;
  StartServer(options);
  ExpectRejected(Get("/", fmt::format("X-Big: {}\r\n", std::string(4000, 'a'))), 431);
  // Past the limit without ever ending the headers.
  ExpectRejected("GET /" + std::string(3000, 'b'), 431);
  EXPECT_EQ(num_handled_, 2);  // the two FreshGets
}

TEST_F(HttpServerTest, ContentLengthOverLimitIs413BeforeTheBody) {
  HttpServerOptions options;
  options.max_body_bytes = 1000;
  StartServer(options);
  ExpectRejected("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n", 413);
  EXPECT_EQ(num_handled_, 1);
}

TEST_F(HttpServerTest, ChunkedBodyOverLimitIs413) {
  HttpServerOptions options;
  options.max_body_bytes = 1000;
  StartServer(options);
  std::string request = "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 3; ++i)
    request += fmt::format("258\r\n{}\r\n", std::string(600, 'c'));
  request += "0\r\n\r\n";
  ExpectRejected(request, 413);
  EXPECT_EQ(num_handled_, 1);
}

TEST_F(HttpServerTest, ChunkedBodyWithinLimitIsJoined) {
  StartServer();
  TestClient client(server_->port());
  ASSERT_TRUE(
      client.Send("POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                  "3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n"));
  std::optional<TestResponse> response = client.ReadResponse();
  ASSERT_TRUE(response.has_value());
  EXPECT_EQ(response->body, "POST /c q= h=- b=abcdefg");
}

TEST_F(HttpServerTest, MalformedRequestsAre400) {
  StartServer();
  ExpectRejected("BLAH\x01 / HTTP/1.1\r\n\r\n", 400);
  ExpectRejected("GET / HTTP/2.5\r\n\r\n", 400);
  ExpectRejected("GET / HTTP/1.1\r\nNo colon here\r\n\r\n", 400);
  ExpectRejected("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400);
  EXPECT_EQ(num_handled_, 4);
}

TEST_F(HttpServerTest, HeaderTimeoutIs408) {
  HttpServerOptions options;
  options.header_timeout = std::chrono::milliseconds(200);
  StartServer(options);
  ExpectRejected("GET /slow HT", 408);
}

TEST_F(HttpServerTest, HeaderTimeoutCountsFromTheFirstByteNotTheLast) {
  HttpServerOptions options;
  options.header_timeout = std::chrono::milliseconds(300);
  StartServer(options);
  TestClient client(server_->port());
  // A byte every 50 ms never completes the headers; the timeout still fires.
  const std::optional<TestResponse> response = SendHeadSlowly(client);
  ASSERT_TRUE(response.has_value());
  EXPECT_EQ(response->status, 408);
}

// The same on a keep-alive connection's next request, whose header timeout starts when its
// first bytes come (and a stalled body after a whole head still times out).
TEST_F(HttpServerTest, HeaderAndBodyTimeoutsOfTheNextRequestOnAConnection) {
  HttpServerOptions options;
  options.header_timeout = std::chrono::milliseconds(300);
  options.body_idle_timeout = std::chrono::milliseconds(200);
  StartServer(options);
  {
    TestClient client(server_->port());
    ASSERT_TRUE(client.Send(Get("/")));
    ASSERT_TRUE(client.ReadResponse().has_value());
    const std::optional<TestResponse> response = SendHeadSlowly(client);
    ASSERT_TRUE(response.has_value());
    EXPECT_EQ(response->status, 408);
  }
  TestClient client(server_->port());
  ASSERT_TRUE(client.Send(Get("/")));
  ASSERT_TRUE(client.ReadResponse().has_value());
  ASSERT_TRUE(client.Send("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nonly ten.."));
  std::optional<TestResponse> response = client.ReadResponse();
  ASSERT_TRUE(response.has_value());
  EXPECT_EQ(response->status, 408);
}

TEST_F(HttpServerTest, StalledBodyIs408) {
  HttpServerOptions options;
  options.body_idle_timeout = std::chrono::milliseconds(200);
  StartServer(options);
  ExpectRejected("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nonly ten..", 408);
  EXPECT_EQ(num_handled_, 1);
}

TEST_F(HttpServerTest, BodyIdleTimeoutRestartsWhenBytesArrive) {
  HttpServerOptions options;
  options.body_idle_timeout = std::chrono::milliseconds(400);
  StartServer(options);
  TestClient client(server_->port());
  ASSERT_TRUE(client.Send("POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 6\r\n\r\n"));
  // Paced sends, 600 ms in all, each well inside the idle timeout.
  for (char c : std::string("abcdef")) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ASSERT_TRUE(client.Send(std::string(1, c)));
  }
  std::optional<TestResponse> response = client.ReadResponse();
  ASSERT_TRUE(response.has_value());
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->body, "POST /b q= h=- b=abcdef");
}

TEST_F(HttpServerTest, IdleKeepAliveConnectionIsClosed) {
  HttpServerOptions options;
  options.keep_alive_timeout = std::chrono::milliseconds(200);
  StartServer(options);
  TestClient client(server_->port());
  ASSERT_TRUE(client.Send(Get("/")));
  ASSERT_TRUE(client.ReadResponse().has_value());
  EXPECT_TRUE(client.WaitForClose());
}

TEST_F(HttpServerTest, CustomErrorBody) {
  HttpServerOptions options;
  options.error_body = [](int status, std::string_view message) {
    return std::make_pair(std::string("text/plain"), fmt::format("{}: {}", status, message));
  };
  StartServer(options);
  TestClient client(server_->port());
  client.Send("NOT HTTP\r\n\r\n");
  std::optional<TestResponse> response = client.ReadResponse();
  ASSERT_TRUE(response.has_value());
  EXPECT_EQ(response->status, 400);
  EXPECT_EQ(response->Header("content-type"), "text/plain");
  EXPECT_EQ(response->body.rfind("400: ", 0), 0u) << response->body;
}

TEST(HttpServerResponseTest, NoContentHasNoBody) {
  absl::StatusOr<std::unique_ptr<HttpServer>> server =
      HttpServer::Start({}, [](HttpRequest request, std::shared_ptr<HttpResponder> responder) {
        if (request.path == "/none") {
          responder->Send(204, "", "dropped");
        } else {
          Echo(std::move(request), std::move(responder));
        }
      });
  ASSERT_TRUE(server.ok());
  TestClient client((*server)->port());
  ASSERT_TRUE(client.Send(Get("/none") + Get("/after")));
  std::optional<TestResponse> none = client.ReadResponse();
  ASSERT_TRUE(none.has_value());
  EXPECT_EQ(none->status, 204);
  EXPECT_EQ(none->Header("content-length"), std::nullopt);
  std::optional<TestResponse> after = client.ReadResponse();
  ASSERT_TRUE(after.has_value());
  EXPECT_EQ(after->body, "GET /after q= h=- b=");
}

TEST(HttpServerStartTest, RejectsBadOptionsAndBusyPorts) {
  HttpServerOptions options;
  options.num_threads = 0;
  EXPECT_EQ(HttpServer::Start(options, Echo).status().code(), absl::StatusCode::kInvalidArgument);

  options.num_threads = 1;
  absl::StatusOr<std::unique_ptr<HttpServer>> first = HttpServer::Start(options, Echo);
  ASSERT_TRUE(first.ok());
  EXPECT_GT((*first)->port(), 0);
  options.port = (*first)->port();
  EXPECT_FALSE(HttpServer::Start(options, Echo).ok());

  options.port = 0;
  options.host = "no such host.invalid";
  EXPECT_FALSE(HttpServer::Start(options, Echo).ok());
}

TEST(HttpServerStartTest, StopIsIdempotent) {
  absl::StatusOr<std::unique_ptr<HttpServer>> server = HttpServer::Start({}, Echo);
  ASSERT_TRUE(server.ok());
  (*server)->Stop();
  (*server)->Stop();
  TestClient client((*server)->port());
  EXPECT_FALSE(client.ok() && client.Send(Get("/")) && client.ReadResponse().has_value());
}

}  // namespace
}  // namespace switchyard::net
