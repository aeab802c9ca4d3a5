#include "kube/api_client.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace switchyard::kube {
namespace {

// A one-connection HTTP server on loopback: it reads the request head, records it, writes
// `answer` piece by piece (libcurl hands each chunk of a chunked body to the write callback
// on its own, so an event split across chunks arrives in parts), then holds the connection open
// until the test ends.
class OneShotServer {
 public:
  explicit OneShotServer(std::vector<std::string> answer) : answer_(std::move(answer)) {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr = {};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    socklen_t len = sizeof(addr);
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    EXPECT_EQ(::listen(listener_, 1), 0);
    thread_ = std::thread([this] { Serve(); });
  }
  ~OneShotServer() {
    ::shutdown(listener_, SHUT_RDWR);
    if (connection_ >= 0)
      ::shutdown(connection_, SHUT_RDWR);
    thread_.join();
    ::close(listener_);
    if (connection_ >= 0)
      ::close(connection_);
  }

  KubeConfig Config() const {
    KubeConfig c;
    c.server = "http://127.0.0.1:" + std::to_string(port_);
    c.token = "t0ken";
    c.source = "test";
    return c;
  }
  // The request head, once the server has answered.
  std::string request() const { return request_; }

 private:
  void Serve() {
    connection_ = ::accept(listener_, nullptr, nullptr);
    if (connection_ < 0)
      return;
    char buffer[4096];
    while (request_.find("\r\n\r\n") == std::string::npos) {
      const ssize_t n = ::read(connection_, buffer, sizeof(buffer));
      if (n <= 0)
        return;
      request_.append(buffer, static_cast<size_t>(n));
    }
    for (const std::string& piece : answer_) {
      EXPECT_EQ(::write(connection_, piece.data(), piece.size()),
                static_cast<ssize_t>(piece.size()));
    }
    while (::read(connection_, buffer, sizeof(buffer)) > 0) {
    }
  }

  std::vector<std::string> answer_;
  int listener_ = -1;
  int connection_ = -1;
  int port_ = 0;
  std::string request_;
  std::thread thread_;
};

std::string Chunk(const std::string& data) {
  char size[16];
  std::snprintf(size, sizeof(size), "%zx\r\n", data.size());
  return size + data + "\r\n";
}

TEST(ApiClientTest, WatchSplitsLinesAcrossReadsAndStopsAtInterrupt) {
  const std::string added =
      R"({"type":"ADDED","object":{"metadata":{"name":"a","namespace":"ns","resourceVersion":"5"}}})";
  OneShotServer server(
      {"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
       "Transfer-Encoding: chunked\r\n\r\n",
       Chunk(added.substr(0, 20)), Chunk(added.substr(20) + "\n" + added.substr(0, 7)),
       Chunk(added.substr(7) + "\n")});
  absl::StatusOr<std::unique_ptr<ApiClient>> client = ApiClient::Create(server.Config());
  ASSERT_TRUE(client.ok()) << client.status();
  std::vector<std::string> keys;
  std::thread interrupter;
  const ResourceQuery query{"/api/v1/namespaces/ns/pods", "app=x,role in (a)", ""};
  auto start = std::chrono::steady_clock::now();
  const absl::Status status = (*client)->Watch(query, "3", 60, [&](WatchEvent event) {
    keys.push_back(event.object.Key());
    if (keys.size() == 2) {
      start = std::chrono::steady_clock::now();
      interrupter = std::thread([&] { (*client)->Interrupt(); });
    }
    return absl::OkStatus();
  });
  const auto waited = std::chrono::steady_clock::now() - start;
  interrupter.join();
  EXPECT_TRUE(absl::IsCancelled(status)) << status;
  EXPECT_LT(waited, std::chrono::milliseconds(500));
  EXPECT_EQ(keys, (std::vector<std::string>{"ns/a", "ns/a"}));
  const std::string request = server.request();
  EXPECT_NE(
      request.find("GET /api/v1/namespaces/ns/pods?labelSelector=app%3Dx%2Crole%20in%20%28a%29"
                   "&watch=1&allowWatchBookmarks=true&resourceVersion=3&timeoutSeconds=60 "),
      std::string::npos)
      << request;
  EXPECT_NE(request.find("Authorization: Bearer t0ken\r\n"), std::string::npos) << request;
  // Interrupted for good: later calls return at once.
  EXPECT_TRUE(absl::IsCancelled((*client)->List(query).status()));
}

TEST(ApiClientTest, HttpErrorsCarryTheServersMessage) {
  const std::string body =
      R"({"kind":"Status","status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401})";
  OneShotServer server(
      {"HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\n"
       "Content-Length: " +
       std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body});
  absl::StatusOr<std::unique_ptr<ApiClient>> client = ApiClient::Create(server.Config());
  ASSERT_TRUE(client.ok());
  const absl::StatusOr<ObjectList> list = (*client)->List({"/api/v1/pods", "", "metadata.name=p"});
  EXPECT_EQ(list.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_NE(list.status().message().find("HTTP 401: Unauthorized"), std::string::npos)
      << list.status();
  EXPECT_NE(list.status().message().find("fieldSelector=metadata.name%3Dp"), std::string::npos);
}

TEST(ApiClientTest, ListDecodesTheBodyAndGoneIsItsOwnCode) {
  const std::string list = R"({"kind":"PodList","metadata":{"resourceVersion":"9"},"items":[]})";
  OneShotServer ok({"HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(list.size()) +
                    "\r\nConnection: close\r\n\r\n" + list});
  absl::StatusOr<ObjectList> listed =
      (*ApiClient::Create(ok.Config()))->List({"/api/v1/pods", "", ""});
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(listed->resource_version, "9");

  const std::string gone = R"({"kind":"Status","message":"too old resource version","code":410})";
  OneShotServer expired({"HTTP/1.1 410 Gone\r\nContent-Length: " + std::to_string(gone.size()) +
                         "\r\nConnection: close\r\n\r\n" + gone});
  const absl::Status watch =
      (*ApiClient::Create(expired.Config()))
          ->Watch({"/api/v1/pods", "", ""}, "1", 10, [](WatchEvent) { return absl::OkStatus(); });
  EXPECT_TRUE(IsGone(watch)) << watch;
}

}  // namespace
}  // namespace switchyard::kube
