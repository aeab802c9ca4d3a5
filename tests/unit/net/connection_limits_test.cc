// The server's connection limits over real sockets on loopback: per client address, and in
// all with the longest-waiting connection shed for a new one; and the admission's accounting.
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
#include "net/internal/connection_admission.h"
#include "test_client.h"

namespace switchyard::net {
namespace {

using internal::ConnectionAdmission;
using internal::ConnectionSlot;
using testing::Get;
using testing::HeldResponders;
using testing::StartOrDie;
using testing::TestClient;
using testing::TestResponse;

void Ok(HttpRequest request, std::shared_ptr<HttpResponder> responder) {
  responder->Send(200, "text/plain", "ok " + request.path);
}

// A request on `client` answered 200.
bool Served(TestClient& client, std::string_view path = "/") {
  if (!client.ok() || !client.Send(Get(path)))
    return false;
  std::optional<TestResponse> response = client.ReadResponse();
  return response.has_value() && response->status == 200;
}

TEST(ConnectionLimitsTest, OneClientAddressGetsAtMostItsShare) {
  HttpServerOptions options;
  options.max_connections_per_client = 3;
  std::unique_ptr<HttpServer> server = StartOrDie(options, Ok);
  std::vector<std::unique_ptr<TestClient>> held;
  for (int i = 0; i < 3; ++i) {
    held.push_back(std::make_unique<TestClient>(server->port()));
    ASSERT_TRUE(Served(*held.back()));
  }
  // The fourth from the same address is closed without an answer.
  TestClient fourth(server->port());
  ASSERT_TRUE(fourth.ok());
  fourth.Send(Get("/"));
  EXPECT_TRUE(fourth.WaitForClose());
  // Another address is served while that one is at its limit.
  TestClient other(server->port(), 0, "127.0.0.2");
  EXPECT_TRUE(Served(other));
  // A freed slot is that address's again, once the server saw the close.
  held.front()->Close();
  const auto deadline = std::chrono::steady_clock::now() + testing::kTimeout;
  bool served_again = false;
  while (!served_again && std::chrono::steady_clock::now() < deadline) {
    TestClient again(server->port());
    served_again = Served(again);
    if (!served_again)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(served_again);
}

TEST(ConnectionLimitsTest, FullServerShedsTheLongestWaitingConnection) {
  HttpServerOptions options;
  options.max_connections = 3;
  options.max_connections_per_client = 0;
  std::unique_ptr<HttpServer> server = StartOrDie(options, Ok);
  // Two slow clients (heads never finished), then an idle keep-alive one.
  TestClient slowest(server->port());
  ASSERT_TRUE(slowest.Send("GET /slow HTTP/1.1\r\nHo"));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // distinct waiting times
  TestClient slow(server->port());
  ASSERT_TRUE(slow.Send("GET /slow HTTP/1.1\r\nHo"));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  TestClient idle(server->port());
  ASSERT_TRUE(Served(idle));
  // A new client is served: the slowest one made room.
  TestClient fresh(server->port());
  EXPECT_TRUE(Served(fresh, "/fresh"));
  EXPECT_TRUE(slowest.WaitForClose());
  // The others were left alone.
  ASSERT_TRUE(slow.Send("st: x\r\n\r\n"));
  std::optional<TestResponse> finished = slow.ReadResponse();
  ASSERT_TRUE(finished.has_value());
  EXPECT_EQ(finished->body, "ok /slow");
  EXPECT_TRUE(Served(idle, "/again"));
}

TEST(ConnectionLimitsTest, FullServerOfBusyConnectionsClosesTheNewOne) {
  HttpServerOptions options;
  options.max_connections = 2;
  options.max_connections_per_client = 0;
  HeldResponders held;
  std::unique_ptr<HttpServer> server = StartOrDie(options, held.Handler());
  TestClient first(server->port());
  TestClient second(server->port());
  ASSERT_TRUE(first.Send(Get("/1")) && second.Send(Get("/2")));
  ASSERT_NE(held.Wait(1), nullptr);
  // Both are being answered: nothing to shed, so the newcomer is the one closed.
  TestClient third(server->port());
  ASSERT_TRUE(third.ok());
  third.Send(Get("/3"));
  EXPECT_TRUE(third.WaitForClose());
  held.Wait(0)->Send(200, "text/plain", "one");
  held.Wait(1)->Send(200, "text/plain", "two");
  std::optional<TestResponse> one = first.ReadResponse();
  std::optional<TestResponse> two = second.ReadResponse();
  ASSERT_TRUE(one.has_value() && two.has_value());
  EXPECT_EQ(one->body, "one");
  EXPECT_EQ(two->body, "two");
}

TEST(ConnectionAdmissionTest, CountsPerClientAndInAll) {
  ConnectionAdmission admission(/*max_connections=*/2, /*max_per_client=*/2);
  ConnectionAdmission::Refusal refusal;
  ConnectionSlot a1 = admission.Take("10.0.0.1", &refusal);
  ASSERT_EQ(refusal, ConnectionAdmission::Refusal::kNone);
  ConnectionSlot a2 = admission.Take("10.0.0.1", &refusal);
  ASSERT_EQ(refusal, ConnectionAdmission::Refusal::kNone);
  EXPECT_FALSE(a2.over_capacity());
  ConnectionSlot a3 = admission.Take("10.0.0.1", &refusal);
  EXPECT_EQ(refusal, ConnectionAdmission::Refusal::kClientLimit);
  EXPECT_FALSE(a3.held());
  // Past max_connections: taken, marked for a shed.
  ConnectionSlot b1 = admission.Take("10.0.0.2", &refusal);
  ASSERT_EQ(refusal, ConnectionAdmission::Refusal::kNone);
  EXPECT_TRUE(b1.over_capacity());
  EXPECT_EQ(admission.open(), 3u);
  EXPECT_EQ(admission.OpenFrom("10.0.0.1"), 2u);
  // Moved slots are released once; released ones come back.
  ConnectionSlot moved = std::move(a1);
  moved.Release();
  moved.Release();
  a1.Release();
  EXPECT_EQ(admission.OpenFrom("10.0.0.1"), 1u);
  EXPECT_EQ(admission.open(), 2u);
  b1 = ConnectionSlot();
  EXPECT_EQ(admission.OpenFrom("10.0.0.2"), 0u);
  EXPECT_EQ(admission.open(), 1u);
}

TEST(ConnectionAdmissionTest, RefusesFarPastCapacity) {
  ConnectionAdmission admission(/*max_connections=*/1, /*max_per_client=*/0);
  ConnectionAdmission::Refusal refusal;
  std::vector<ConnectionSlot> slots;
  for (size_t i = 0; i < 1 + ConnectionAdmission::kMaxOverCapacity; ++i) {
    slots.push_back(admission.Take(fmt::format("10.0.{}.{}", i / 256, i % 256), &refusal));
    ASSERT_EQ(refusal, ConnectionAdmission::Refusal::kNone);
  }
  ConnectionSlot refused = admission.Take("10.1.0.0", &refusal);
  EXPECT_EQ(refusal, ConnectionAdmission::Refusal::kFull);
  EXPECT_FALSE(refused.held());
}

}  // namespace
}  // namespace switchyard::net
