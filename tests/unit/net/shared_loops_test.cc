// An HttpServer and an HttpClient on one EventLoops, as the router runs them: a handler's
// upstream call runs on the handler's own thread, and the server and the client each stop
// their own work while the loops keep running.
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "fmt/format.h"
#include "gtest/gtest.h"

#include "call_recorder.h"
#include "held_responders.h"
#include "net/event_loops.h"
#include "net/http_client.h"
#include "net/http_server.h"
#include "test_client.h"

namespace switchyard::net {
namespace {

using testing::CallRecorder;
using testing::HeldResponders;
using testing::StartOrDie;
using testing::TestClient;

HttpClientRequest Get(int port, std::string target) {
  HttpClientRequest request;
  request.upstream = fmt::format("127.0.0.1:{}", port);
  request.target = std::move(target);
  return request;
}

TEST(SharedLoopsTest, AHandlersUpstreamCallRunsOnTheHandlersThread) {
  std::unique_ptr<HttpServer> upstream =
      StartOrDie({}, [](HttpRequest request, std::shared_ptr<HttpResponder> responder) {
        responder->Send(200, "text/plain", "up:" + request.target);
      });
  ASSERT_NE(upstream, nullptr);
  absl::StatusOr<std::shared_ptr<EventLoops>> loops = EventLoops::Start(2, "sy-test");
  ASSERT_TRUE(loops.ok()) << loops.status();
  absl::StatusOr<std::unique_ptr<HttpClient>> client = HttpClient::Start({}, *loops);
  ASSERT_TRUE(client.ok()) << client.status();

  std::mutex mu;
  int calls = 0;
  int same_thread = 0;
  HttpHandler proxy = [&](HttpRequest request, std::shared_ptr<HttpResponder> responder) {
    const std::thread::id handler_thread = std::this_thread::get_id();
    EXPECT_TRUE((*loops)->CurrentLoop().has_value());
    auto body = std::make_shared<std::string>();
    HttpClientCallbacks callbacks;
    callbacks.on_body = [body](std::string_view chunk) {
      body->append(chunk);
      return true;
    };
    callbacks.on_done = [&, handler_thread, body, responder](const absl::Status& status) {
      {
        std::lock_guard<std::mutex> lock(mu);
        ++calls;
        same_thread += std::this_thread::get_id() == handler_thread ? 1 : 0;
      }
      responder->Send(status.ok() ? 200 : 502, "text/plain", *body);
    };
    (*client)->Send(Get(upstream->port(), request.target), std::move(callbacks));
  };
  absl::StatusOr<std::unique_ptr<HttpServer>> front = HttpServer::Start({}, proxy, *loops);
  ASSERT_TRUE(front.ok()) << front.status();

  for (int i = 0; i < 4; ++i) {
    TestClient connection((*front)->port());
    ASSERT_TRUE(connection.ok());
    const std::string target = fmt::format("/r{}", i);
    ASSERT_TRUE(connection.Send(testing::Get(target)));
    std::optional<testing::TestResponse> response = connection.ReadResponse();
    ASSERT_TRUE(response.has_value());
    EXPECT_EQ(response->status, 200);
    EXPECT_EQ(response->body, "up:" + target);
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(calls, 4);
    EXPECT_EQ(same_thread, 4);
  }
  EXPECT_FALSE((*loops)->CurrentLoop().has_value());
  (*front)->Stop();
  (*client)->Stop();
  (*loops)->Stop();
}

// A call started on its own loop starts at once, inside Send; a failure it finds then is
// still reported after Send returned, as from any other thread.
TEST(SharedLoopsTest, AFailureFoundInsideSendOnTheLoopIsReportedAfterSendReturns) {
  absl::StatusOr<std::shared_ptr<EventLoops>> loops = EventLoops::Start(1, "sy-test");
  ASSERT_TRUE(loops.ok()) << loops.status();
  absl::StatusOr<std::unique_ptr<HttpClient>> client = HttpClient::Start({}, *loops);
  ASSERT_TRUE(client.ok()) << client.status();

  HttpHandler proxy = [&](HttpRequest /*request*/, std::shared_ptr<HttpResponder> responder) {
    auto in_send = std::make_shared<bool>(true);
    HttpClientCallbacks callbacks;
    callbacks.on_done = [in_send, responder](const absl::Status& status) {
      responder->Send(*in_send ? 500 : 200, "text/plain", std::string(status.message()));
    };
    HttpClientRequest bad = Get(1, "/x");
    bad.headers.emplace_back("x-split", "a\r\nInjected: yes");
    (*client)->Send(std::move(bad), std::move(callbacks));
    *in_send = false;
  };
  absl::StatusOr<std::unique_ptr<HttpServer>> front = HttpServer::Start({}, proxy, *loops);
  ASSERT_TRUE(front.ok()) << front.status();

  TestClient connection((*front)->port());
  ASSERT_TRUE(connection.ok());
  ASSERT_TRUE(connection.Send(testing::Get("/")));
  std::optional<testing::TestResponse> response = connection.ReadResponse();
  ASSERT_TRUE(response.has_value());
  EXPECT_EQ(response->status, 200);
  EXPECT_NE(response->body.find("bad header"), std::string::npos) << response->body;

  (*front)->Stop();
  (*client)->Stop();
  (*loops)->Stop();
}

TEST(SharedLoopsTest, ClientStopCancelsItsCallsAndLeavesTheLoopsRunning) {
  HeldResponders held;
  std::unique_ptr<HttpServer> upstream = StartOrDie({}, held.Handler());
  ASSERT_NE(upstream, nullptr);
  absl::StatusOr<std::shared_ptr<EventLoops>> loops = EventLoops::Start(1, "sy-test");
  ASSERT_TRUE(loops.ok()) << loops.status();
  absl::StatusOr<std::unique_ptr<HttpClient>> client = HttpClient::Start({}, *loops);
  ASSERT_TRUE(client.ok()) << client.status();
  absl::StatusOr<std::unique_ptr<HttpServer>> server = HttpServer::Start(
      {},
      [](HttpRequest, std::shared_ptr<HttpResponder> responder) {
        responder->Send(200, "text/plain", "still here");
      },
      *loops);
  ASSERT_TRUE(server.ok()) << server.status();

  CallRecorder in_flight;
  (*client)->Send(Get(upstream->port(), "/held"), in_flight.Callbacks());
  ASSERT_NE(held.Wait(0), nullptr);
  (*client)->Stop();
  EXPECT_EQ(in_flight.done_calls(), 1);
  EXPECT_EQ(in_flight.status().code(), absl::StatusCode::kCancelled) << in_flight.status();

  CallRecorder after_stop;
  (*client)->Send(Get(upstream->port(), "/late"), after_stop.Callbacks());
  EXPECT_EQ(after_stop.done_calls(), 1);
  EXPECT_EQ(after_stop.status().code(), absl::StatusCode::kCancelled) << after_stop.status();

  // The server on the same loops still answers.
  TestClient connection((*server)->port());
  ASSERT_TRUE(connection.ok());
  ASSERT_TRUE(connection.Send(testing::Get("/")));
  std::optional<testing::TestResponse> response = connection.ReadResponse();
  ASSERT_TRUE(response.has_value());
  EXPECT_EQ(response->body, "still here");
  (*server)->Stop();
  client->reset();
  (*loops)->Stop();
}

}  // namespace
}  // namespace switchyard::net
