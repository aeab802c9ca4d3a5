// Streamed responses, answers from other threads, disconnects, slow readers and Stop().
#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "fmt/format.h"
#include "gtest/gtest.h"

#include "held_responders.h"
#include "net/http_server.h"
#include "test_client.h"

namespace switchyard::net {
namespace {

using testing::Get;
using testing::HeldResponders;
using testing::kTimeout;
using testing::Notification;
using testing::StartOrDie;
using testing::TestClient;
using testing::TestResponse;

TEST(HttpStreamingTest, HundredChunksInOrderThenKeepAlive) {
  HeldResponders held;
  std::unique_ptr<HttpServer> server = StartOrDie({}, held.Handler());
  ASSERT_NE(server, nullptr);
  TestClient client(server->port());
  ASSERT_TRUE(client.Send(Get("/stream")));

  std::thread writer([&] {
    std::shared_ptr<HttpResponder> responder = held.Wait(0);
    if (responder == nullptr)
      return;
    responder->StartStream(200, "text/event-stream", {{"X-Request-Id", "r1"}});
    for (int i = 0; i < 100; ++i)
      EXPECT_TRUE(responder->Write(fmt::format("data: {}\n\n", i)));
    responder->End();
  });
  std::optional<TestResponse> response = client.ReadResponse();
  writer.join();
  ASSERT_TRUE(response.has_value());
  EXPECT_EQ(response->status, 200);
  EXPECT_TRUE(response->chunked);
  EXPECT_EQ(response->Header("content-type"), "text/event-stream");
  EXPECT_EQ(response->Header("cache-control"), "no-cache");
  EXPECT_EQ(response->Header("x-accel-buffering"), "no");
  EXPECT_EQ(response->Header("x-request-id"), "r1");
  ASSERT_EQ(response->chunks.size(), 100u);
  for (int i = 0; i < 100; ++i)
    EXPECT_EQ(response->chunks[i], fmt::format("data: {}\n\n", i));

  // The connection is reusable, and the old responder no longer reaches it.
  ASSERT_TRUE(client.Send(Get("/second")));
  std::shared_ptr<HttpResponder> second = held.Wait(1);
  ASSERT_NE(second, nullptr);
  held.Wait(0)->Send(500, "text/plain", "stale");
  second->Send(200, "text/plain", "fresh");
  std::optional<TestResponse> next = client.ReadResponse();
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->body, "fresh");
  EXPECT_EQ(held.request(1).path, "/second");
}

// The head is sent from inside the handler (on the loop) and the chunks from another
// thread before the handler returns: asio runs posts made inside a handler after posts
// from other threads, so only the responder's own FIFO keeps the head first.
TEST(HttpStreamingTest, HeadFromTheHandlerStaysAheadOfChunksFromAnotherThread) {
  std::thread writer;
  Notification written;
  std::unique_ptr<HttpServer> server =
      StartOrDie({}, [&](HttpRequest, std::shared_ptr<HttpResponder> responder) {
        responder->StartStream(200, "text/event-stream");
        writer = std::thread([responder, &written] {
          for (int i = 0; i < 20; ++i)
            responder->Write(fmt::format("data: {}\n\n", i));
          responder->End();
          written.Notify();
        });
        // Hold the loop inside the handler until every chunk has been handed over.
        written.WaitFor();
      });
  ASSERT_NE(server, nullptr);
  TestClient client(server->port());
  ASSERT_TRUE(client.Send(Get("/stream")));
  std::optional<TestResponse> response = client.ReadResponse();
  writer.join();
  ASSERT_TRUE(response.has_value());
  ASSERT_EQ(response->chunks.size(), 20u);
  for (int i = 0; i < 20; ++i)
    EXPECT_EQ(response->chunks[static_cast<size_t>(i)], fmt::format("data: {}\n\n", i));
}

TEST(HttpStreamingTest, Http10StreamRunsToTheClose) {
  HeldResponders held;
  std::unique_ptr<HttpServer> server = StartOrDie({}, held.Handler());
  ASSERT_NE(server, nullptr);
  TestClient client(server->port());
  ASSERT_TRUE(client.Send("GET /s HTTP/1.0\r\n\r\n"));
  std::shared_ptr<HttpResponder> responder = held.Wait(0);
  ASSERT_NE(responder, nullptr);
  responder->StartStream(200, "text/plain");
  responder->Write("one ");
  responder->Write("two");
  responder->End();
  std::optional<TestResponse> response = client.ReadResponse();
  ASSERT_TRUE(response.has_value());
  EXPECT_FALSE(response->chunked);
  EXPECT_EQ(response->body, "one two");
}

TEST(HttpStreamingTest, ClientGoneWhileQueuedRunsOnClose) {
  HeldResponders held;
  std::unique_ptr<HttpServer> server = StartOrDie({}, held.Handler());
  ASSERT_NE(server, nullptr);
  TestClient client(server->port());
  ASSERT_TRUE(client.Send(Get("/wait")));
  std::shared_ptr<HttpResponder> responder = held.Wait(0);
  ASSERT_NE(responder, nullptr);
  Notification closed;
  std::atomic<int> calls{0};
  responder->OnClose([&] {
    ++calls;
    closed.Notify();
  });
  EXPECT_FALSE(responder->closed());
  client.Close();
  ASSERT_TRUE(closed.WaitFor());
  EXPECT_TRUE(responder->closed());
  EXPECT_FALSE(responder->Write("dropped"));
  responder->Send(200, "text/plain", "too late");
  // Registered after the close: runs at once, on this thread.
  bool ran_here = false;
  responder->OnClose([&] { ran_here = true; });
  EXPECT_TRUE(ran_here);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(responder->pending_write_bytes(), 0u);
}

TEST(HttpStreamingTest, ClientGoneMidStreamRunsOnClose) {
  HeldResponders held;
  std::unique_ptr<HttpServer> server = StartOrDie({}, held.Handler());
  ASSERT_NE(server, nullptr);
  TestClient client(server->port());
  ASSERT_TRUE(client.Send(Get("/stream")));
  std::shared_ptr<HttpResponder> responder = held.Wait(0);
  ASSERT_NE(responder, nullptr);
  Notification closed;
  responder->OnClose([&] { closed.Notify(); });
  responder->StartStream(200, "text/event-stream");
  responder->Write("data: first\n\n");
  ASSERT_TRUE(client.ReadHead().has_value());
  EXPECT_EQ(client.ReadChunk(), "data: first\n\n");
  client.Close();
  ASSERT_TRUE(closed.WaitFor());
  EXPECT_TRUE(responder->closed());
  EXPECT_FALSE(responder->Write("data: second\n\n"));
}

TEST(HttpStreamingTest, SlowReaderIsClosedPastPendingLimit) {
  HeldResponders held;
  HttpServerOptions options;
  options.max_pending_write_bytes = 64 << 10;
  std::unique_ptr<HttpServer> server = StartOrDie(options, held.Handler());
  ASSERT_NE(server, nullptr);
  TestClient client(server->port(), /*receive_buffer_bytes=*/4096);
  ASSERT_TRUE(client.Send(Get("/flood")));
  std::shared_ptr<HttpResponder> responder = held.Wait(0);
  ASSERT_NE(responder, nullptr);
  Notification closed;
  responder->OnClose([&] { closed.Notify(); });
  responder->StartStream(200, "text/plain");
  // The client never reads. Writing stops once the server gives up on it; without the
  // limit this would queue 128 MiB.
  const std::string chunk(16 << 10, 'x');
  int writes = 0;
  constexpr int kMaxWrites = 8192;  // 128 MiB
  while (writes < kMaxWrites && responder->Write(chunk))
    ++writes;
  EXPECT_LT(writes, kMaxWrites);
  ASSERT_TRUE(closed.WaitFor());
  EXPECT_TRUE(responder->closed());
}

// Writes 16 KiB chunks until more than `bytes` wait for a client that does not read; returns
// how many it wrote.
int FillPast(HttpResponder* responder, size_t bytes) {
  const std::string chunk(16 << 10, 'z');
  int writes = 0;
  while (responder->pending_write_bytes() <= bytes && responder->Write(chunk))
    ++writes;
  return writes;
}

TEST(HttpStreamingTest, OnDrainedRunsOnceTheClientHasReadTheBacklog) {
  HeldResponders held;
  std::unique_ptr<HttpServer> server = StartOrDie({}, held.Handler());
  ASSERT_NE(server, nullptr);
  TestClient client(server->port(), /*receive_buffer_bytes=*/4096);
  ASSERT_TRUE(client.Send(Get("/stream")));
  std::shared_ptr<HttpResponder> responder = held.Wait(0);
  ASSERT_NE(responder, nullptr);
  responder->StartStream(200, "text/plain");
  Notification at_once;
  responder->OnDrained(1 << 20, [&] { at_once.Notify(); });
  EXPECT_TRUE(at_once.WaitFor());  // nothing waits yet

  // More than the kernel takes while the client reads nothing (a loopback sender's buffer
  // grows to a few MiB).
  const int writes = FillPast(responder.get(), 8 << 20);
  Notification drained;
  std::atomic<size_t> pending_when_run{0};
  responder->OnDrained(64 << 10, [&] {
    pending_when_run = responder->pending_write_bytes();
    drained.Notify();
  });
  // The client reads nothing, so nothing drains.
  EXPECT_FALSE(drained.WaitFor(std::chrono::milliseconds(200)));
  ASSERT_TRUE(client.ReadHead().has_value());
  for (int i = 0; i < writes; ++i) {
    const std::optional<std::string> chunk = client.ReadChunk();
    ASSERT_TRUE(chunk.has_value()) << i;
    ASSERT_EQ(chunk->size(), 16u << 10) << i;
  }
  ASSERT_TRUE(drained.WaitFor());
  EXPECT_LE(pending_when_run, 64u << 10);
  responder->End();
  EXPECT_FALSE(client.ReadChunk().has_value());  // the last chunk
}

TEST(HttpStreamingTest, OnDrainedIsDroppedWhenTheClientGoes) {
  HeldResponders held;
  std::unique_ptr<HttpServer> server = StartOrDie({}, held.Handler());
  ASSERT_NE(server, nullptr);
  TestClient client(server->port(), /*receive_buffer_bytes=*/4096);
  ASSERT_TRUE(client.Send(Get("/stream")));
  std::shared_ptr<HttpResponder> responder = held.Wait(0);
  ASSERT_NE(responder, nullptr);
  Notification closed;
  responder->OnClose([&] { closed.Notify(); });
  responder->StartStream(200, "text/plain");
  FillPast(responder.get(), 8 << 20);
  // Holds a reference that must go when the callback is dropped.
  auto token = std::make_shared<int>(0);
  std::atomic<bool> ran{false};
  responder->OnDrained(0, [&ran, token] { ran = true; });
  client.Close();
  ASSERT_TRUE(closed.WaitFor());
  const auto deadline = std::chrono::steady_clock::now() + kTimeout;
  while (token.use_count() > 1 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(token.use_count(), 1);
  EXPECT_FALSE(ran);
}

TEST(HttpStreamingTest, WriteWithoutProgressTimesOut) {
  HeldResponders held;
  HttpServerOptions options;
  options.write_timeout = std::chrono::milliseconds(300);
  std::unique_ptr<HttpServer> server = StartOrDie(options, held.Handler());
  ASSERT_NE(server, nullptr);
  TestClient client(server->port(), /*receive_buffer_bytes=*/4096);
  ASSERT_TRUE(client.Send(Get("/big")));
  std::shared_ptr<HttpResponder> responder = held.Wait(0);
  ASSERT_NE(responder, nullptr);
  Notification closed;
  responder->OnClose([&] { closed.Notify(); });
  // More than the socket buffers hold; the client never reads.
  responder->Send(200, "application/octet-stream", std::string(64 << 20, 'y'));
  ASSERT_TRUE(closed.WaitFor());
  EXPECT_TRUE(responder->closed());
  EXPECT_EQ(responder->pending_write_bytes(), 0u);
}

TEST(HttpStreamingTest, StopWithPendingRespondersRunsCallbacksAndReturns) {
  HeldResponders held;
  HttpServerOptions options;
  options.num_threads = 2;
  std::unique_ptr<HttpServer> server = StartOrDie(options, held.Handler());
  ASSERT_NE(server, nullptr);
  constexpr int kClients = 4;
  std::vector<std::unique_ptr<TestClient>> clients;
  std::vector<std::shared_ptr<HttpResponder>> responders;
  std::atomic<int> closes{0};
  for (int i = 0; i < kClients; ++i) {
    clients.push_back(std::make_unique<TestClient>(server->port()));
    ASSERT_TRUE(clients.back()->Send(Get(fmt::format("/{}", i))));
    responders.push_back(held.Wait(static_cast<size_t>(i)));
    ASSERT_NE(responders.back(), nullptr);
    responders.back()->OnClose([&] { ++closes; });
  }
  responders[0]->StartStream(200, "text/event-stream");
  responders[0]->Write("data: x\n\n");
  // An idle keep-alive connection too.
  TestClient idle(server->port());
  ASSERT_TRUE(idle.Send("GET / HTTP/1.1\r\nHost: x\r\n"));

  const auto start = std::chrono::steady_clock::now();
  server->Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(closes, kClients);
  ASSERT_TRUE(clients[0]->ReadHead().has_value());
  EXPECT_EQ(clients[0]->ReadChunk(), "data: x\n\n");
  for (const auto& client : clients)
    EXPECT_TRUE(client->WaitForClose());
  EXPECT_TRUE(idle.WaitForClose());

  // Responders outliving the server are inert.
  server.reset();
  for (const auto& responder : responders) {
    EXPECT_TRUE(responder->closed());
    EXPECT_FALSE(responder->Write("late"));
    responder->End();
    bool ran = false;
    responder->OnClose([&] { ran = true; });
    EXPECT_TRUE(ran);
  }
  held.Clear();
}

}  // namespace
}  // namespace switchyard::net
