// HttpClient against our own HttpServer: round trips, keep-alive reuse, streaming,
// back-pressure, statuses that are not errors, Fetch, and bad requests.
#include "net/http_client.h"

#include <atomic>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "fmt/format.h"
#include "gtest/gtest.h"

#include "call_recorder.h"
#include "held_responders.h"
#include "net/http_server.h"
#include "test_client.h"

namespace switchyard::net {
namespace {

using testing::CallRecorder;
using testing::HeldResponders;
using testing::kTimeout;
using testing::Notification;
using testing::StartClientOrDie;
using testing::StartOrDie;

std::string Upstream(const HttpServer& server) {
  return fmt::format("127.0.0.1:{}", server.port());
}

// Answers every request with what it saw: "<method> <target> host=<Host> len=<Content-Length>
// x=<X-Test> body=<body>", from the connection's remote address in X-Remote.
HttpHandler EchoHandler() {
  return [](HttpRequest request, std::shared_ptr<HttpResponder> responder) {
    std::string body = fmt::format("{} {} host={} len={} x={} body={}", request.method,
                                   request.target, request.Header("host").value_or("-"),
                                   request.Header("content-length").value_or("-"),
                                   request.Header("x-test").value_or("-"), request.body);
    responder->Send(200, "text/plain", std::move(body), {{"X-Remote", request.remote_address}});
  };
}

HttpClientRequest Request(const std::string& upstream, std::string target,
                          std::string method = "GET", std::string body = "") {
  HttpClientRequest request;
  request.method = std::move(method);
  request.upstream = upstream;
  request.target = std::move(target);
  request.body = std::move(body);
  return request;
}

TEST(HttpClientTest, GetAndPostRoundTrip) {
  std::unique_ptr<HttpServer> server = StartOrDie({}, EchoHandler());
  ASSERT_NE(server, nullptr);
  std::unique_ptr<HttpClient> client = StartClientOrDie();
  ASSERT_NE(client, nullptr);
  const std::string upstream = Upstream(*server);

  CallRecorder get;
  HttpClientRequest get_request = Request(upstream, "/v1/models?x=1");
  // Framing headers are the client's own: these are left out.
  get_request.headers = {{"X-Test", "yes"}, {"Content-Length", "99"}, {"Host", "evil"}};
  client->Send(std::move(get_request), get.Callbacks());
  ASSERT_TRUE(get.WaitDone());
  EXPECT_TRUE(get.status().ok()) << get.status();
  EXPECT_EQ(get.head_status(), 200);
  EXPECT_EQ(get.Header("content-type"), "text/plain");
  EXPECT_EQ(get.body(), fmt::format("GET /v1/models?x=1 host={} len=- x=yes body=", upstream));

  CallRecorder post;
  client->Send(Request(upstream, "/v1/completions", "POST", "{\"prompt\":\"hi\"}"),
               post.Callbacks());
  ASSERT_TRUE(post.WaitDone());
  EXPECT_TRUE(post.status().ok()) << post.status();
  EXPECT_EQ(post.body(), fmt::format("POST /v1/completions host={} len=15 x=- body={{\"prompt\":"
                                     "\"hi\"}}",
                                     upstream));
  EXPECT_EQ(get.done_calls(), 1);
  EXPECT_EQ(post.done_calls(), 1);
  EXPECT_EQ(get.out_of_order() + post.out_of_order(), 0);

  // An empty POST still says Content-Length: 0.
  CallRecorder empty_post;
  client->Send(Request(upstream, "/e", "POST"), empty_post.Callbacks());
  ASSERT_TRUE(empty_post.WaitDone());
  EXPECT_EQ(empty_post.body(), fmt::format("POST /e host={} len=0 x=- body=", upstream));
}

// Send reads the request when called: the caller may change or send it again at once (a
// proxy's retry sends its one request to the next upstream).
TEST(HttpClientTest, SendReadsTheRequestOnce) {
  std::unique_ptr<HttpServer> server = StartOrDie({}, EchoHandler());
  ASSERT_NE(server, nullptr);
  std::unique_ptr<HttpClient> client = StartClientOrDie();
  ASSERT_NE(client, nullptr);
  const std::string upstream = Upstream(*server);

  HttpClientRequest request = Request(upstream, "/first", "POST", "one");
  request.headers = {{"X-Test", "1"}};
  CallRecorder first;
  client->Send(request, first.Callbacks());
  CallRecorder again;
  client->Send(request, again.Callbacks());
  request.target = "/second";
  request.headers[0].second = "2";
  request.body = "two";
  CallRecorder second;
  client->Send(request, second.Callbacks());
  for (CallRecorder* call : {&first, &again, &second})
    ASSERT_TRUE(call->WaitDone());
  EXPECT_EQ(first.body(), fmt::format("POST /first host={} len=3 x=1 body=one", upstream));
  EXPECT_EQ(again.body(), first.body());
  EXPECT_EQ(second.body(), fmt::format("POST /second host={} len=3 x=2 body=two", upstream));
}

TEST(HttpClientTest, KeepAliveReusesOneConnection) {
  std::unique_ptr<HttpServer> server = StartOrDie({}, EchoHandler());
  ASSERT_NE(server, nullptr);
  std::unique_ptr<HttpClient> client = StartClientOrDie();
  ASSERT_NE(client, nullptr);
  std::set<std::string> remotes;
  for (int i = 0; i < 5; ++i) {
    CallRecorder call;
    client->Send(Request(Upstream(*server), fmt::format("/{}", i)), call.Callbacks());
    ASSERT_TRUE(call.WaitDone());
    ASSERT_TRUE(call.status().ok()) << call.status();
    remotes.insert(call.Header("x-remote").value_or(""));
  }
  // One client port: every request went over the first connection.
  EXPECT_EQ(remotes.size(), 1u);
}

TEST(HttpClientTest, ConcurrentRequestsOpenConnectionsThenPoolThem) {
  HeldResponders held;
  std::unique_ptr<HttpServer> server = StartOrDie({}, held.Handler());
  ASSERT_NE(server, nullptr);
  std::unique_ptr<HttpClient> client = StartClientOrDie();
  ASSERT_NE(client, nullptr);
  // Three at once need three connections.
  std::vector<CallRecorder> calls(3);
  for (CallRecorder& call : calls)
    client->Send(Request(Upstream(*server), "/"), call.Callbacks());
  std::set<std::string> first_remotes;
  for (size_t i = 0; i < calls.size(); ++i) {
    ASSERT_NE(held.Wait(i), nullptr);
    first_remotes.insert(held.request(i).remote_address);
  }
  EXPECT_EQ(first_remotes.size(), 3u);
  for (size_t i = 0; i < calls.size(); ++i)
    held.Wait(i)->Send(200, "text/plain", "ok");
  for (CallRecorder& call : calls)
    ASSERT_TRUE(call.WaitDone());
  // The next three reuse them.
  std::vector<CallRecorder> again(3);
  for (CallRecorder& call : again)
    client->Send(Request(Upstream(*server), "/"), call.Callbacks());
  for (size_t i = 3; i < 6; ++i) {
    ASSERT_NE(held.Wait(i), nullptr);
    EXPECT_EQ(first_remotes.count(held.request(i).remote_address), 1u);
    held.Wait(i)->Send(200, "text/plain", "ok");
  }
  for (CallRecorder& call : again) {
    ASSERT_TRUE(call.WaitDone());
    EXPECT_TRUE(call.status().ok()) << call.status();
  }
}

TEST(HttpClientTest, ChunkedStreamArrivesIncrementallyInOrder) {
  HeldResponders held;
  std::unique_ptr<HttpServer> server = StartOrDie({}, held.Handler());
  ASSERT_NE(server, nullptr);
  std::unique_ptr<HttpClient> client = StartClientOrDie();
  ASSERT_NE(client, nullptr);
  CallRecorder call;
  client->Send(Request(Upstream(*server), "/stream"), call.Callbacks());

  // Each event is written only after the client saw the previous one, so the test passes
  // only if the client delivers body bytes as they arrive.
  std::string expected;
  std::thread writer([&] {
    std::shared_ptr<HttpResponder> responder = held.Wait(0);
    if (responder == nullptr)
      return;
    responder->StartStream(200, "text/event-stream");
    for (int i = 0; i < 50; ++i) {
      const std::string event = fmt::format("data: {}\n\n", i);
      expected += event;
      responder->Write(event);
      if (!call.WaitBody(expected.size()))
        return;
    }
    responder->End();
  });
  writer.join();
  ASSERT_TRUE(call.WaitDone());
  EXPECT_TRUE(call.status().ok()) << call.status();
  EXPECT_EQ(call.head_status(), 200);
  EXPECT_EQ(call.Header("content-type"), "text/event-stream");
  EXPECT_EQ(call.body(), expected);
  EXPECT_GE(call.pieces(), 50u);
  EXPECT_EQ(call.out_of_order(), 0);
}

TEST(HttpClientTest, BackPressurePausesUntilResumeAndLosesNothing) {
  std::string big(2 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i)
    big[i] = static_cast<char>('a' + (i * 7) % 26);
  std::unique_ptr<HttpServer> server =
      StartOrDie({}, [&big](HttpRequest, std::shared_ptr<HttpResponder> responder) {
        responder->Send(200, "application/octet-stream", big);
      });
  ASSERT_NE(server, nullptr);
  std::unique_ptr<HttpClient> client = StartClientOrDie();
  ASSERT_NE(client, nullptr);

  CallRecorder call;
  std::atomic<bool> paused{false};
  std::atomic<int> delivered_while_paused{0};
  call.set_accept_body([&](const std::string&) {
    if (paused.exchange(true))
      ++delivered_while_paused;
    return false;
  });
  std::shared_ptr<HttpRequestHandle> handle =
      client->Send(Request(Upstream(*server), "/big"), call.Callbacks());
  size_t seen = 0;
  while (call.done_calls() == 0) {
    ASSERT_TRUE(call.WaitPiecesOrDone(seen));
    seen = call.pieces();
    paused = false;
    handle->Resume();
  }
  EXPECT_TRUE(call.status().ok()) << call.status();
  EXPECT_EQ(delivered_while_paused, 0);
  EXPECT_GT(call.pieces(), 1u);
  EXPECT_TRUE(call.body() == big);
  handle->Resume();  // harmless after the end
}

TEST(HttpClientTest, BadGatewayIsAHeadNotAnError) {
  std::unique_ptr<HttpServer> server =
      StartOrDie({}, [](HttpRequest, std::shared_ptr<HttpResponder> responder) {
        responder->Send(502, "application/json", "{\"error\":\"down\"}");
      });
  ASSERT_NE(server, nullptr);
  std::unique_ptr<HttpClient> client = StartClientOrDie();
  ASSERT_NE(client, nullptr);
  CallRecorder call;
  client->Send(Request(Upstream(*server), "/"), call.Callbacks());
  ASSERT_TRUE(call.WaitDone());
  EXPECT_TRUE(call.status().ok()) << call.status();
  EXPECT_EQ(call.head_status(), 502);
  EXPECT_EQ(call.body(), "{\"error\":\"down\"}");
}

TEST(HttpClientTest, HeadAndNoContentHaveNoBody) {
  std::unique_ptr<HttpServer> server =
      StartOrDie({}, [](HttpRequest request, std::shared_ptr<HttpResponder> responder) {
        responder->Send(request.path == "/204" ? 204 : 200, "text/plain", "some body");
      });
  ASSERT_NE(server, nullptr);
  std::unique_ptr<HttpClient> client = StartClientOrDie();
  ASSERT_NE(client, nullptr);
  CallRecorder head;
  client->Send(Request(Upstream(*server), "/", "HEAD"), head.Callbacks());
  ASSERT_TRUE(head.WaitDone());
  EXPECT_TRUE(head.status().ok()) << head.status();
  EXPECT_EQ(head.Header("content-length"), "9");
  EXPECT_EQ(head.body(), "");
  CallRecorder no_content;
  client->Send(Request(Upstream(*server), "/204"), no_content.Callbacks());
  ASSERT_TRUE(no_content.WaitDone());
  EXPECT_TRUE(no_content.status().ok()) << no_content.status();
  EXPECT_EQ(no_content.head_status(), 204);
  EXPECT_EQ(no_content.body(), "");
}

TEST(HttpClientTest, FetchCollectsTheBodyUpToTheLimit) {
  std::unique_ptr<HttpServer> server =
      StartOrDie({}, [](HttpRequest request, std::shared_ptr<HttpResponder> responder) {
        if (request.path == "/stream") {
          responder->StartStream(200, "text/plain");
          for (int i = 0; i < 10; ++i)
            responder->Write(std::string(100, 'x'));
          responder->End();
          return;
        }
        responder->Send(200, "text/plain", std::string(request.path == "/big" ? 5000 : 10, 'm'),
                        {{"X-Id", "7"}});
      });
  ASSERT_NE(server, nullptr);
  HttpClientOptions options;
  options.max_response_bytes = 512;
  std::unique_ptr<HttpClient> client = StartClientOrDie(options);
  ASSERT_NE(client, nullptr);

  struct Result {
    Notification done;
    absl::StatusOr<HttpClient::Response> response = absl::UnknownError("none");
  };
  const auto fetch = [&](const std::string& target, Result* result) {
    client->Fetch(Request(Upstream(*server), target),
                  [result](absl::StatusOr<HttpClient::Response> response) {
                    result->response = std::move(response);
                    result->done.Notify();
                  });
    return result->done.WaitFor();
  };
  Result small;
  ASSERT_TRUE(fetch("/small", &small));
  ASSERT_TRUE(small.response.ok()) << small.response.status();
  EXPECT_EQ(small.response->status, 200);
  EXPECT_EQ(small.response->body, std::string(10, 'm'));
  bool has_id = false;
  for (const auto& [name, value] : small.response->headers)
    has_id = has_id || (name == "x-id" && value == "7");
  EXPECT_TRUE(has_id);

  Result big;  // Content-Length over the limit
  ASSERT_TRUE(fetch("/big", &big));
  EXPECT_EQ(big.response.status().code(), absl::StatusCode::kResourceExhausted)
      << big.response.status();
  Result stream;  // chunks that add up past the limit
  ASSERT_TRUE(fetch("/stream", &stream));
  EXPECT_EQ(stream.response.status().code(), absl::StatusCode::kResourceExhausted)
      << stream.response.status();
}

TEST(HttpClientTest, BadRequestsAreInvalidArgument) {
  std::unique_ptr<HttpClient> client = StartClientOrDie();
  ASSERT_NE(client, nullptr);
  std::vector<HttpClientRequest> requests;
  for (const char* upstream : {"nohost", ":80", "host:", "host:0", "host:70000", "host:8x",
                               "a b:80", "[::1:80", "user@host:80"}) {
    requests.push_back(Request(upstream, "/"));
  }
  requests.push_back(Request("127.0.0.1:1", "/a b"));
  requests.push_back(Request("127.0.0.1:1", "/", "GE T"));
  requests.push_back(Request("127.0.0.1:1", "/"));
  requests.back().headers = {{"X-Evil", "a\r\nInjected: b"}};
  for (HttpClientRequest& request : requests) {
    const std::string what = request.upstream + " " + request.method + " " + request.target;
    CallRecorder call;
    client->Send(std::move(request), call.Callbacks());
    ASSERT_TRUE(call.WaitDone()) << what;
    EXPECT_EQ(call.status().code(), absl::StatusCode::kInvalidArgument) << what << call.status();
    EXPECT_EQ(call.head_calls(), 0);
  }
}

TEST(HttpClientTest, ResolvesNamesAndBracketedAddresses) {
  std::unique_ptr<HttpServer> server = StartOrDie({}, EchoHandler());
  ASSERT_NE(server, nullptr);
  std::unique_ptr<HttpClient> client = StartClientOrDie();
  ASSERT_NE(client, nullptr);
  CallRecorder by_name;
  client->Send(Request(fmt::format("localhost:{}", server->port()), "/"), by_name.Callbacks());
  ASSERT_TRUE(by_name.WaitDone());
  EXPECT_TRUE(by_name.status().ok()) << by_name.status();
  // The server listens on IPv4 only: [::1] is refused, which shows the brackets parsed.
  CallRecorder v6;
  client->Send(Request(fmt::format("[::1]:{}", server->port()), "/"), v6.Callbacks());
  ASSERT_TRUE(v6.WaitDone());
  EXPECT_NE(v6.status().code(), absl::StatusCode::kInvalidArgument) << v6.status();
}

}  // namespace
}  // namespace switchyard::net
