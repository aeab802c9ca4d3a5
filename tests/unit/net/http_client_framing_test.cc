// HttpClient against hand-written responses: bodies that run to the close, Connection:
// close, interim 1xx heads, and which connections go back to the pool.
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "gtest/gtest.h"

#include "call_recorder.h"
#include "net/http_client.h"
#include "raw_server.h"

namespace switchyard::net {
namespace {

using testing::CallRecorder;
using testing::RawConnection;
using testing::RawServer;
using testing::StartClientOrDie;

HttpClientRequest Get(const std::string& upstream, std::string target) {
  HttpClientRequest request;
  request.upstream = upstream;
  request.target = std::move(target);
  return request;
}

class HttpClientFramingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.ok());
    client_ = StartClientOrDie();
    ASSERT_NE(client_, nullptr);
  }

  // Sends a request that `connection` (accepted now when not given) answers with
  // `response`; returns the connection it went over.
  RawConnection Exchange(std::string_view response, CallRecorder& call,
                         RawConnection connection = RawConnection()) {
    client_->Send(Get(server_.upstream(), "/"), call.Callbacks());
    if (!connection.ok())
      connection = server_.Accept();
    EXPECT_TRUE(connection.ok());
    EXPECT_TRUE(connection.ReadRequest().has_value());
    EXPECT_TRUE(connection.Send(response));
    return connection;
  }

  RawServer server_;
  std::unique_ptr<HttpClient> client_;
};

TEST_F(HttpClientFramingTest, BodyThatRunsToTheCloseEndsOkAndIsNotPooled) {
  CallRecorder call;
  RawConnection connection = Exchange("HTTP/1.1 200 OK\r\n\r\nuntil the close", call);
  ASSERT_TRUE(call.WaitBody(15));
  connection.Close();
  ASSERT_TRUE(call.WaitDone());
  EXPECT_TRUE(call.status().ok()) << call.status();
  EXPECT_EQ(call.body(), "until the close");
}

TEST_F(HttpClientFramingTest, ConnectionCloseIsNotPooled) {
  CallRecorder call;
  RawConnection connection =
      Exchange("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", call);
  ASSERT_TRUE(call.WaitDone());
  EXPECT_TRUE(call.status().ok()) << call.status();
  EXPECT_EQ(call.body(), "ok");
  // The client closed it instead of keeping it.
  EXPECT_TRUE(connection.WaitForClose());
}

TEST_F(HttpClientFramingTest, StrayBytesAfterTheResponseAreNotPooled) {
  CallRecorder call;
  RawConnection connection = Exchange(
      "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
      call);
  ASSERT_TRUE(call.WaitDone());
  EXPECT_TRUE(call.status().ok()) << call.status();
  EXPECT_EQ(call.body(), "ok");
  // The client closed it instead of keeping it.
  EXPECT_TRUE(connection.WaitForClose());
}

TEST_F(HttpClientFramingTest, InterimHeadsAreSkipped) {
  CallRecorder call;
  RawConnection connection = Exchange(
      "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
      "HTTP/1.1 201 Created\r\nContent-Length: 4\r\n\r\ndone",
      call);
  ASSERT_TRUE(call.WaitDone());
  EXPECT_TRUE(call.status().ok()) << call.status();
  EXPECT_EQ(call.head_calls(), 1);
  EXPECT_EQ(call.head_status(), 201);
  EXPECT_EQ(call.body(), "done");
}

TEST_F(HttpClientFramingTest, ChunkedWithExtensionsAndTrailersThenReuse) {
  CallRecorder call;
  RawConnection connection = Exchange(
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5;ext=1\r\nhello\r\n1\r\n \r\n5\r\nworld\r\n0\r\nX-Trailer: t\r\n\r\n",
      call);
  ASSERT_TRUE(call.WaitDone());
  EXPECT_TRUE(call.status().ok()) << call.status();
  EXPECT_EQ(call.body(), "hello world");
  // The connection was kept: the next request arrives on it.
  CallRecorder next;
  connection =
      Exchange("HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nmore", next, std::move(connection));
  ASSERT_TRUE(next.WaitDone());
  EXPECT_TRUE(next.status().ok()) << next.status();
  EXPECT_EQ(next.body(), "more");
}

}  // namespace
}  // namespace switchyard::net
