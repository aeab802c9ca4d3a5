// HttpClient failures and how they are classified: before the first response byte
// (Unavailable, retryable elsewhere), after it (Internal), timeouts (DeadlineExceeded),
// Cancel and Stop (Cancelled), and a pooled connection the server closed.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "fmt/format.h"
#include "gtest/gtest.h"

#include "call_recorder.h"
#include "held_responders.h"
#include "net/http_client.h"
#include "net/http_server.h"
#include "raw_server.h"
#include "test_client.h"

namespace switchyard::net {
namespace {

using testing::CallRecorder;
using testing::HeldResponders;
using testing::Notification;
using testing::RawConnection;
using testing::RawServer;
using testing::StartClientOrDie;
using testing::StartOrDie;

constexpr std::string_view kOkResponse = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

HttpClientRequest Get(const std::string& upstream, std::string target = "/") {
  HttpClientRequest request;
  request.upstream = upstream;
  request.target = std::move(target);
  return request;
}

// A socket bound to a loopback port but not listening: connecting to it is refused at once.
class RefusingPort {
 public:
  RefusingPort() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address = {};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    if (::bind(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0 &&
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
      port_ = ntohs(address.sin_port);
    }
  }
  ~RefusingPort() { ::close(fd_); }
  std::string upstream() const { return fmt::format("127.0.0.1:{}", port_); }

 private:
  int fd_ = -1;
  int port_ = 0;
};

TEST(HttpClientFailureTest, ConnectionRefusedIsUnavailable) {
  RefusingPort port;
  std::unique_ptr<HttpClient> client = StartClientOrDie();
  ASSERT_NE(client, nullptr);
  CallRecorder call;
  client->Send(Get(port.upstream()), call.Callbacks());
  ASSERT_TRUE(call.WaitDone());
  EXPECT_EQ(call.status().code(), absl::StatusCode::kUnavailable) << call.status();
  EXPECT_EQ(call.head_calls(), 0);
}

TEST(HttpClientFailureTest, CloseOrResetBeforeAnyByteIsUnavailable) {
  RawServer server;
  ASSERT_TRUE(server.ok());
  std::unique_ptr<HttpClient> client = StartClientOrDie();
  ASSERT_NE(client, nullptr);
  for (const bool reset : {false, true}) {
    CallRecorder call;
    client->Send(Get(server.upstream()), call.Callbacks());
    RawConnection connection = server.Accept();
    ASSERT_TRUE(connection.ok());
    ASSERT_TRUE(connection.ReadRequest().has_value());
    if (reset) {
      connection.Reset();
    } else {
      connection.Close();
    }
    ASSERT_TRUE(call.WaitDone());
    EXPECT_EQ(call.status().code(), absl::StatusCode::kUnavailable)
        << "reset=" << reset << " " << call.status();
    EXPECT_EQ(call.head_calls(), 0);
  }
}

TEST(HttpClientFailureTest, LossAfterTheFirstByteIsInternal) {
  RawServer server;
  ASSERT_TRUE(server.ok());
  std::unique_ptr<HttpClient> client = StartClientOrDie();
  ASSERT_NE(client, nullptr);
  struct Case {
    std::string sent;
    bool reset;
    bool expect_head;
  };
  const std::vector<Case> cases = {
      // Reset mid-body, after the head.
      {"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789", true, true},
      // Closed mid-body.
      {"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789", false, true},
      // Closed mid-stream, before the last chunk.
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n", false, true},
      // Closed inside the head.
      {"HTTP/1.1 200 OK\r\nContent-Le", false, false},
  };
  for (const Case& c : cases) {
    CallRecorder call;
    client->Send(Get(server.upstream()), call.Callbacks());
    RawConnection connection = server.Accept();
    ASSERT_TRUE(connection.ok());
    ASSERT_TRUE(connection.ReadRequest().has_value());
    ASSERT_TRUE(connection.Send(c.sent));
    if (c.expect_head) {
      ASSERT_TRUE(call.WaitHead());
    }
    if (c.reset) {
      connection.Reset();
    } else {
      connection.Close();
    }
    ASSERT_TRUE(call.WaitDone());
    EXPECT_EQ(call.status().code(), absl::StatusCode::kInternal) << c.sent << call.status();
    EXPECT_EQ(call.head_calls(), c.expect_head ? 1 : 0);
  }
}

TEST(HttpClientFailureTest, MalformedOrOversizedHeadIsInternal) {
  RawServer server;
  ASSERT_TRUE(server.ok());
  HttpClientOptions options;
  options.max_header_bytes = 256;
  std::unique_ptr<HttpClient> client = StartClientOrDie(options);
  ASSERT_NE(client, nullptr);
  for (const std::string& sent :
       {std::string("HTTP/1.1 200 OK\r\nContent-Length: abc\r\n\r\n"),
        std::string("SMTP ready\r\n\r\n"),
        "HTTP/1.1 200 OK\r\nX-Big: " + std::string(400, 'b') + "\r\n\r\n"}) {
    CallRecorder call;
    client->Send(Get(server.upstream()), call.Callbacks());
    RawConnection connection = server.Accept();
    ASSERT_TRUE(connection.ok());
    ASSERT_TRUE(connection.ReadRequest().has_value());
    ASSERT_TRUE(connection.Send(sent));
    ASSERT_TRUE(call.WaitDone());
    EXPECT_EQ(call.status().code(), absl::StatusCode::kInternal) << sent << call.status();
    // The client dropped the connection.
    EXPECT_TRUE(connection.WaitForClose());
  }
}

TEST(HttpClientFailureTest, FirstByteTimeout) {
  HeldResponders held;
  std::unique_ptr<HttpServer> server = StartOrDie({}, held.Handler());
  ASSERT_NE(server, nullptr);
  HttpClientOptions options;
  options.first_byte_timeout = std::chrono::milliseconds(100);
  std::unique_ptr<HttpClient> client = StartClientOrDie(options);
  ASSERT_NE(client, nullptr);
  CallRecorder call;
  client->Send(Get(fmt::format("127.0.0.1:{}", server->port())), call.Callbacks());
  std::shared_ptr<HttpResponder> responder = held.Wait(0);
  ASSERT_NE(responder, nullptr);
  Notification closed;
  responder->OnClose([&closed] { closed.Notify(); });
  ASSERT_TRUE(call.WaitDone());
  EXPECT_EQ(call.status().code(), absl::StatusCode::kDeadlineExceeded) << call.status();
  EXPECT_EQ(call.head_calls(), 0);
  // The upstream sees the request abandoned.
  EXPECT_TRUE(closed.WaitFor());
}

// A request's own first-byte timeout overrides the client's, either way.
TEST(HttpClientFailureTest, ARequestsOwnFirstByteTimeout) {
  HeldResponders held;
  std::unique_ptr<HttpServer> server = StartOrDie({}, held.Handler());
  ASSERT_NE(server, nullptr);
  HttpClientOptions options;
  options.first_byte_timeout = std::chrono::milliseconds(100);
  std::unique_ptr<HttpClient> client = StartClientOrDie(options);
  ASSERT_NE(client, nullptr);
  const std::string upstream = fmt::format("127.0.0.1:{}", server->port());

  // Longer: answered after the client's timeout has passed (a call sent after it, with the
  // client's timeout, timed out first).
  HttpClientRequest patient = Get(upstream);
  patient.first_byte_timeout = std::chrono::seconds(30);
  CallRecorder answered;
  client->Send(patient, answered.Callbacks());
  std::shared_ptr<HttpResponder> first = held.Wait(0);
  ASSERT_NE(first, nullptr);
  CallRecorder timed_out;
  client->Send(Get(upstream), timed_out.Callbacks());
  ASSERT_TRUE(timed_out.WaitDone());
  EXPECT_EQ(timed_out.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_FALSE(answered.WaitDone(std::chrono::milliseconds(0)));
  first->Send(200, "text/plain", "late");
  ASSERT_TRUE(answered.WaitDone());
  EXPECT_TRUE(answered.status().ok()) << answered.status();
  EXPECT_EQ(answered.body(), "late");

  // Shorter than a client's that would wait long.
  options.first_byte_timeout = std::chrono::seconds(30);
  std::unique_ptr<HttpClient> slow_client = StartClientOrDie(options);
  ASSERT_NE(slow_client, nullptr);
  HttpClientRequest hasty = Get(upstream);
  hasty.first_byte_timeout = std::chrono::milliseconds(100);
  CallRecorder unanswered;
  slow_client->Send(hasty, unanswered.Callbacks());
  ASSERT_NE(held.Wait(2), nullptr);
  ASSERT_TRUE(unanswered.WaitDone());
  EXPECT_EQ(unanswered.status().code(), absl::StatusCode::kDeadlineExceeded) << unanswered.status();
  EXPECT_NE(unanswered.status().message().find("within 100 ms"), std::string_view::npos)
      << unanswered.status();
}

// A call's timer goes on to the loop's next call with its wait still pending (it ends at the
// first call's deadline): that wait must not end the next call early, and the next call still
// times out at its own deadline; the call after it runs as usual.
TEST(HttpClientFailureTest, TimeoutsOfCallsThatReuseATimer) {
  HeldResponders held;
  std::unique_ptr<HttpServer> server = StartOrDie({}, held.Handler());
  ASSERT_NE(server, nullptr);
  HttpClientOptions options;
  options.first_byte_timeout = std::chrono::milliseconds(200);
  std::unique_ptr<HttpClient> client = StartClientOrDie(options);
  ASSERT_NE(client, nullptr);
  const std::string upstream = fmt::format("127.0.0.1:{}", server->port());

  CallRecorder answered;
  client->Send(Get(upstream), answered.Callbacks());
  std::shared_ptr<HttpResponder> first = held.Wait(0);
  ASSERT_NE(first, nullptr);
  first->Send(200, "text/plain", "ok");
  ASSERT_TRUE(answered.WaitDone());
  EXPECT_TRUE(answered.status().ok()) << answered.status();

  const auto start = std::chrono::steady_clock::now();
  CallRecorder unanswered;
  client->Send(Get(upstream), unanswered.Callbacks());
  ASSERT_NE(held.Wait(1), nullptr);
  ASSERT_TRUE(unanswered.WaitDone());
  EXPECT_EQ(unanswered.status().code(), absl::StatusCode::kDeadlineExceeded) << unanswered.status();
  EXPECT_GE(std::chrono::steady_clock::now() - start, options.first_byte_timeout);

  CallRecorder next;
  client->Send(Get(upstream), next.Callbacks());
  std::shared_ptr<HttpResponder> third = held.Wait(2);
  ASSERT_NE(third, nullptr);
  third->Send(200, "text/plain", "ok");
  ASSERT_TRUE(next.WaitDone());
  EXPECT_TRUE(next.status().ok()) << next.status();
  EXPECT_EQ(next.body(), "ok");
}

TEST(HttpClientFailureTest, IdleTimeoutBetweenBodyBytes) {
  HeldResponders held;
  std::unique_ptr<HttpServer> server = StartOrDie({}, held.Handler());
  ASSERT_NE(server, nullptr);
  HttpClientOptions options;
  options.idle_timeout = std::chrono::milliseconds(100);
  std::unique_ptr<HttpClient> client = StartClientOrDie(options);
  ASSERT_NE(client, nullptr);
  CallRecorder call;
  client->Send(Get(fmt::format("127.0.0.1:{}", server->port())), call.Callbacks());
  std::shared_ptr<HttpResponder> responder = held.Wait(0);
  ASSERT_NE(responder, nullptr);
  responder->StartStream(200, "text/event-stream");
  responder->Write("data: 1\n\n");
  ASSERT_TRUE(call.WaitDone());
  EXPECT_EQ(call.status().code(), absl::StatusCode::kDeadlineExceeded) << call.status();
  EXPECT_EQ(call.head_status(), 200);
  EXPECT_EQ(call.body(), "data: 1\n\n");
}

// A listener whose accept queue is full drops new SYNs, so a connect to it neither
// succeeds nor fails until the client gives up: hermetic, unlike a non-routable address.
TEST(HttpClientFailureTest, ConnectTimeout) {
  RawServer server(/*backlog=*/0);
  ASSERT_TRUE(server.ok());
  std::vector<int> fillers;
  for (int i = 0; i < 4; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    sockaddr_in address = {};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(server.port()));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address));
    fillers.push_back(fd);
  }
  HttpClientOptions options;
  options.connect_timeout = std::chrono::milliseconds(200);
  std::unique_ptr<HttpClient> client = StartClientOrDie(options);
  ASSERT_NE(client, nullptr);
  CallRecorder call;
  client->Send(Get(server.upstream()), call.Callbacks());
  ASSERT_TRUE(call.WaitDone());
  EXPECT_EQ(call.status().code(), absl::StatusCode::kDeadlineExceeded) << call.status();
  for (const int fd : fillers)
    ::close(fd);
}

TEST(HttpClientFailureTest, CancelMidStreamClosesTheUpstreamConnection) {
  HeldResponders held;
  std::unique_ptr<HttpServer> server = StartOrDie({}, held.Handler());
  ASSERT_NE(server, nullptr);
  std::unique_ptr<HttpClient> client = StartClientOrDie();
  ASSERT_NE(client, nullptr);
  CallRecorder call;
  std::shared_ptr<HttpRequestHandle> handle =
      client->Send(Get(fmt::format("127.0.0.1:{}", server->port())), call.Callbacks());
  std::shared_ptr<HttpResponder> responder = held.Wait(0);
  ASSERT_NE(responder, nullptr);
  Notification closed;
  responder->OnClose([&closed] { closed.Notify(); });
  responder->StartStream(200, "text/event-stream");
  responder->Write("data: first\n\n");
  ASSERT_TRUE(call.WaitBody(13));
  handle->Cancel();
  ASSERT_TRUE(call.WaitDone());
  EXPECT_EQ(call.status().code(), absl::StatusCode::kCancelled) << call.status();
  EXPECT_TRUE(closed.WaitFor());
  EXPECT_FALSE(responder->Write("data: late\n\n"));
  handle->Cancel();  // harmless twice
  handle->Resume();
  client->Stop();
  EXPECT_EQ(call.done_calls(), 1);
  EXPECT_EQ(call.out_of_order(), 0);
}

TEST(HttpClientFailureTest, CancelBeforeAnythingHappened) {
  RawServer server;
  ASSERT_TRUE(server.ok());
  std::unique_ptr<HttpClient> client = StartClientOrDie();
  ASSERT_NE(client, nullptr);
  CallRecorder call;
  client->Send(Get(server.upstream()), call.Callbacks())->Cancel();
  ASSERT_TRUE(call.WaitDone());
  EXPECT_EQ(call.status().code(), absl::StatusCode::kCancelled) << call.status();
  client->Stop();
  EXPECT_EQ(call.done_calls(), 1);
}

// The server closed the pooled connection while it was idle: the next request notices
// before sending (or on its first write or read) and goes over a fresh connection.
TEST(HttpClientFailureTest, PooledConnectionClosedWhileIdleIsReplaced) {
  RawServer server;
  ASSERT_TRUE(server.ok());
  std::unique_ptr<HttpClient> client = StartClientOrDie();
  ASSERT_NE(client, nullptr);
  CallRecorder first;
  client->Send(Get(server.upstream(), "/1"), first.Callbacks());
  RawConnection connection = server.Accept();
  ASSERT_TRUE(connection.ok());
  ASSERT_TRUE(connection.ReadRequest().has_value());
  ASSERT_TRUE(connection.Send(kOkResponse));
  ASSERT_TRUE(first.WaitDone());
  ASSERT_TRUE(first.status().ok()) << first.status();
  connection.Close();

  CallRecorder second;
  client->Send(Get(server.upstream(), "/2"), second.Callbacks());
  RawConnection fresh = server.Accept();
  ASSERT_TRUE(fresh.ok());
  std::optional<std::string> request = fresh.ReadRequest();
  ASSERT_TRUE(request.has_value());
  EXPECT_EQ(request->substr(0, 7), "GET /2 ");
  ASSERT_TRUE(fresh.Send(kOkResponse));
  ASSERT_TRUE(second.WaitDone());
  EXPECT_TRUE(second.status().ok()) << second.status();
  EXPECT_EQ(second.body(), "ok");
}

// The server takes the request on the pooled connection and closes it without a byte: the
// client sends it again, once, on a fresh connection; when that one fails the same way,
// the request is Unavailable.
TEST(HttpClientFailureTest, PooledConnectionDeadOnUseIsRetriedOnceOnAFreshOne) {
  RawServer server;
  ASSERT_TRUE(server.ok());
  std::unique_ptr<HttpClient> client = StartClientOrDie();
  ASSERT_NE(client, nullptr);
  for (const bool fresh_answers : {true, false}) {
    CallRecorder first;
    client->Send(Get(server.upstream(), "/1"), first.Callbacks());
    RawConnection pooled = server.Accept();
    ASSERT_TRUE(pooled.ok());
    ASSERT_TRUE(pooled.ReadRequest().has_value());
    ASSERT_TRUE(pooled.Send(kOkResponse));
    ASSERT_TRUE(first.WaitDone());
    ASSERT_TRUE(first.status().ok()) << first.status();

    CallRecorder second;
    client->Send(Get(server.upstream(), "/2"), second.Callbacks());
    ASSERT_TRUE(pooled.ReadRequest().has_value());
    pooled.Close();
    RawConnection fresh = server.Accept();
    ASSERT_TRUE(fresh.ok());
    std::optional<std::string> again = fresh.ReadRequest();
    ASSERT_TRUE(again.has_value());
    EXPECT_EQ(again->substr(0, 7), "GET /2 ");
    if (fresh_answers) {
      ASSERT_TRUE(fresh.Send(kOkResponse));
      ASSERT_TRUE(second.WaitDone());
      EXPECT_TRUE(second.status().ok()) << second.status();
      EXPECT_EQ(second.body(), "ok");
      // Leave the pool empty for the next round.
      fresh.Close();
      client->Stop();
      client = StartClientOrDie();
      ASSERT_NE(client, nullptr);
    } else {
      fresh.Close();
      ASSERT_TRUE(second.WaitDone());
      EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable) << second.status();
    }
  }
}

TEST(HttpClientFailureTest, StopCancelsEverythingInFlightOnce) {
  HeldResponders held;
  HttpServerOptions server_options;
  server_options.num_threads = 2;
  std::unique_ptr<HttpServer> server = StartOrDie(server_options, held.Handler());
  ASSERT_NE(server, nullptr);
  HttpClientOptions options;
  options.num_threads = 2;
  std::unique_ptr<HttpClient> client = StartClientOrDie(options);
  ASSERT_NE(client, nullptr);
  std::vector<CallRecorder> calls(10);
  for (CallRecorder& call : calls)
    client->Send(Get(fmt::format("127.0.0.1:{}", server->port())), call.Callbacks());
  for (size_t i = 0; i < calls.size(); ++i)
    ASSERT_NE(held.Wait(i), nullptr);
  Notification closed;
  held.Wait(0)->OnClose([&closed] { closed.Notify(); });
  client->Stop();
  for (CallRecorder& call : calls) {
    EXPECT_EQ(call.done_calls(), 1);
    EXPECT_EQ(call.status().code(), absl::StatusCode::kCancelled) << call.status();
  }
  EXPECT_TRUE(closed.WaitFor());

  // After Stop: reported at once, on the caller's thread.
  CallRecorder late;
  client->Send(Get(fmt::format("127.0.0.1:{}", server->port())), late.Callbacks());
  EXPECT_EQ(late.done_calls(), 1);
  EXPECT_EQ(late.status().code(), absl::StatusCode::kCancelled) << late.status();
  absl::Status fetched = absl::UnknownError("not called");
  client->Fetch(
      Get(fmt::format("127.0.0.1:{}", server->port())),
      [&fetched](absl::StatusOr<HttpClient::Response> response) { fetched = response.status(); });
  EXPECT_EQ(fetched.code(), absl::StatusCode::kCancelled) << fetched;
  client->Stop();  // idempotent
}

}  // namespace
}  // namespace switchyard::net
