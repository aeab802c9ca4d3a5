// Many loops and clients at once, the connection limit, and random bytes.
#include <atomic>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "fmt/format.h"
#include "gtest/gtest.h"

#include "base/thread_pool.h"
#include "net/http_server.h"
#include "test_client.h"

namespace switchyard::net {
namespace {

using testing::Get;
using testing::Post;
using testing::TestClient;
using testing::TestResponse;

std::string Answer(const HttpRequest& request) {
  return fmt::format("{} {} {}", request.method, request.target, request.body);
}

TEST(HttpLoadTest, FourLoopsManyClients) {
  // Half the answers come from pool threads, half from the loops themselves.
  base::ThreadPool pool(4, "http-answer");
  HttpServerOptions options;
  options.num_threads = 4;
  absl::StatusOr<std::unique_ptr<HttpServer>> server =
      HttpServer::Start(options, [&pool](HttpRequest request, std::shared_ptr<HttpResponder> r) {
        if (request.path == "/inline") {
          r->Send(200, "text/plain", Answer(request));
          return;
        }
        pool.Submit([request = std::move(request), r = std::move(r)] {
          r->StartStream(200, "text/plain");
          r->Write(Answer(request));
          r->Write("!");
          r->End();
        });
      });
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();

  constexpr int kThreads = 32;
  constexpr int kRequests = 20;
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::unique_ptr<TestClient> client;
      for (int i = 0; i < kRequests; ++i) {
        // Every fifth request opens a new connection; the rest reuse it.
        if (client == nullptr || i % 5 == 0)
          client = std::make_unique<TestClient>(port);
        const std::string path = i % 2 == 0 ? "/inline" : "/pool";
        const std::string body = fmt::format("t{}-r{}", t, i);
        if (!client->Send(Post(path, body)))
          continue;
        std::optional<TestResponse> response = client->ReadResponse();
        const std::string want = fmt::format("POST {} {}{}", path, body, i % 2 == 0 ? "" : "!");
        if (response.has_value() && response->status == 200 && response->body == want)
          ++ok;
      }
    });
  }
  for (auto& thread : threads)
    thread.join();
  EXPECT_EQ(ok, kThreads * kRequests);
}

// Random bytes, and valid requests with random bytes changed, never bring the server down:
// each connection ends (answered or not) and good requests keep being answered.
TEST(HttpLoadTest, RandomBytesNeverBreakTheServer) {
  HttpServerOptions options;
  options.num_threads = 2;
  options.max_header_bytes = 2048;
  options.max_body_bytes = 4096;
  absl::StatusOr<std::unique_ptr<HttpServer>> server =
      HttpServer::Start(options, [](HttpRequest request, std::shared_ptr<HttpResponder> r) {
        if (request.body.size() % 2 == 0) {
          r->Send(200, "text/plain", request.body);
        } else {
          r->StartStream(200, "text/plain");
          r->Write(request.body);
          r->End();
        }
      });
  ASSERT_TRUE(server.ok());
  const int port = (*server)->port();
  const std::vector<std::string> seeds = {
      Get("/a?b=c", "X-A: 1\r\n"),
      Post("/p", "hello world"),
      "POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
      "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
  };
  std::mt19937 rng(20240611);
  for (int i = 0; i < 400; ++i) {
    std::string bytes;
    if (i % 2 == 0) {
      bytes.resize(std::uniform_int_distribution<size_t>(1, 3000)(rng));
      for (char& c : bytes)
        c = static_cast<char>(rng());
      if (i % 4 == 0)
        bytes += "\r\n\r\n";
    } else {
      bytes = seeds[rng() % seeds.size()];
      const int edits = std::uniform_int_distribution<int>(1, 4)(rng);
      for (int e = 0; e < edits; ++e)
        bytes[rng() % bytes.size()] = static_cast<char>(rng());
    }
    {
      TestClient client(port);
      ASSERT_TRUE(client.ok()) << "iteration " << i;
      client.Send(bytes);
      // The end of stream makes the server give up on a request it is still waiting for.
      client.ShutdownWrite();
      while (client.ReadResponse().has_value()) {
      }
    }
    if (i % 20 == 0) {
      TestClient good(port);
      ASSERT_TRUE(good.Send(Post("/ok", "fine")));
      std::optional<TestResponse> response = good.ReadResponse();
      ASSERT_TRUE(response.has_value()) << "iteration " << i;
      EXPECT_EQ(response->body, "fine");
    }
  }
}

}  // namespace
}  // namespace switchyard::net
