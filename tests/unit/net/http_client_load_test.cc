// HttpClient under concurrency: many requests from many threads across four loops, to
// four upstream loops, streamed and whole, some cancelled (run under TSan in CI).
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "fmt/format.h"
#include "gtest/gtest.h"

#include "base/thread_pool.h"
#include "call_recorder.h"
#include "held_responders.h"
#include "net/http_client.h"
#include "net/http_server.h"
#include "test_client.h"

namespace switchyard::net {
namespace {

using testing::CallRecorder;
using testing::Notification;
using testing::StartClientOrDie;
using testing::StartOrDie;

TEST(HttpClientLoadTest, ManyConcurrentRequestsAcrossFourLoops) {
  // Streams are written from pool threads, whole answers from the server's loops.
  base::ThreadPool pool(4, "httpc-answer");
  HttpServerOptions server_options;
  server_options.num_threads = 4;
  std::unique_ptr<HttpServer> server = StartOrDie(
      server_options, [&pool](HttpRequest request, std::shared_ptr<HttpResponder> responder) {
        if (request.path == "/whole") {
          responder->Send(200, "text/plain", request.body);
          return;
        }
        pool.Submit([body = std::move(request.body), responder = std::move(responder)] {
          responder->StartStream(200, "text/event-stream");
          for (int i = 0; i < 5; ++i)
            responder->Write(fmt::format("data: {} {}\n\n", body, i));
          responder->End();
        });
      });
  ASSERT_NE(server, nullptr);
  HttpClientOptions options;
  options.num_threads = 4;
  std::unique_ptr<HttpClient> client = StartClientOrDie(options);
  ASSERT_NE(client, nullptr);
  const std::string upstream = fmt::format("127.0.0.1:{}", server->port());

  constexpr int kThreads = 8;
  constexpr int kRequests = 40;
  std::atomic<int> ok{0};
  std::atomic<int> cancelled{0};
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kRequests; ++i) {
        const std::string id = fmt::format("{}-{}", t, i);
        HttpClientRequest request;
        request.method = "POST";
        request.upstream = upstream;
        request.body = id;
        if (i % 4 == 0) {
          // Fetch, round-robin.
          request.target = "/whole";
          Notification done;
          client->Fetch(std::move(request), [&](absl::StatusOr<HttpClient::Response> response) {
            if (response.ok() && response->body == id) {
              ++ok;
            } else {
              ++bad;
            }
            done.Notify();
          });
          EXPECT_TRUE(done.WaitFor());
          continue;
        }
        request.target = i % 2 == 0 ? "/whole" : "/stream";
        CallRecorder call;
        // Pinned to a loop by the hint (negative ones too).
        std::shared_ptr<HttpRequestHandle> handle =
            client->Send(std::move(request), call.Callbacks(), t - i);
        if (i % 7 == 3)
          handle->Cancel();
        EXPECT_TRUE(call.WaitDone());
        const absl::Status status = call.status();
        std::string expected = id;
        if (i % 2 == 1) {
          expected.clear();
          for (int k = 0; k < 5; ++k)
            expected += fmt::format("data: {} {}\n\n", id, k);
        }
        if (status.ok() && call.body() == expected && call.out_of_order() == 0) {
          ++ok;
        } else if (status.code() == absl::StatusCode::kCancelled && i % 7 == 3) {
          ++cancelled;
        } else {
          ++bad;
        }
      }
    });
  }
  for (std::thread& thread : threads)
    thread.join();
  EXPECT_EQ(bad, 0);
  EXPECT_EQ(ok + cancelled, kThreads * kRequests);
  client->Stop();
  server->Stop();
}

}  // namespace
}  // namespace switchyard::net
