// ProxyCall over real loopback HTTP: an upstream that dies after its response head but before
// any body byte (vLLM sends an SSE head as soon as it queues a request; a SIGKILLed engine
// leaves such requests behind) is retried on the next endpoint, streamed or buffered; a
// stream cut after its first body byte ends with an SSE error event; a client that closes a
// stream after its [DONE] event is counted as served, not as gone. The scripted upstream is a
// plain socket that writes fixed bytes and then closes (or holds the connection open); the
// healthy one is a net::HttpServer.
#include "router/internal/proxy_call.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fmt/format.h"
#include "gtest/gtest.h"

#include "api/response_writer.h"
#include "net/http_client.h"
#include "net/http_server.h"
#include "router/endpoint_table.h"
#include "router/prometheus_text.h"
#include "router/router_metrics.h"

namespace switchyard::router::internal {
namespace {

constexpr char kChunk[] = "data: {\"choices\":[{\"text\":\" the\"}]}\n\n";
constexpr char kJsonBody[] = R"({"choices":[{"text":" the the"}]})";
constexpr char kUsageBody[] =
    R"({"choices":[{"text":" a b c d e f g"}],"usage":{"prompt_tokens":3,"completion_tokens":7}})";
constexpr char kSseHead[] =
    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";

// A loopback TCP server that answers every connection with `reply` and closes it, as an
// engine killed mid-response does; or, with `hold_open`, keeps it open until the peer
// closes (a response whose end has not come yet). Counts the connections it took.
class ScriptedUpstream {
 public:
  explicit ScriptedUpstream(std::string reply, bool hold_open = false)
      : reply_(std::move(reply)), hold_open_(hold_open) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), len), 0);
    EXPECT_EQ(::listen(fd_, 8), 0);
    EXPECT_EQ(::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~ScriptedUpstream() {
    ::shutdown(fd_, SHUT_RDWR);  // wakes the blocked accept
    if (const int conn = held_.load(); conn >= 0)
      ::shutdown(conn, SHUT_RDWR);  // and a read on a held connection
    thread_.join();
    ::close(fd_);
  }
  std::string address() const { return fmt::format("127.0.0.1:{}", port_); }
  int connections() const { return connections_.load(); }

 private:
  void Serve() {
    for (;;) {
      const int conn = ::accept(fd_, nullptr, nullptr);
      if (conn < 0)
        return;
      ++connections_;
      ReadRequest(conn);
      EXPECT_EQ(::write(conn, reply_.data(), reply_.size()), static_cast<ssize_t>(reply_.size()));
      held_ = conn;
      char byte;
      while (hold_open_ && ::read(conn, &byte, 1) > 0) {
      }
      held_ = -1;
      ::close(conn);
    }
  }

  // Reads the head and the Content-Length body, so that the close is not a reset of
  // unread bytes.
  static void ReadRequest(int conn) {
    std::string in;
    char buf[4096];
    size_t need = std::string::npos;
    while (in.size() < need) {
      const ssize_t n = ::read(conn, buf, sizeof(buf));
      if (n <= 0)
        return;
      in.append(buf, static_cast<size_t>(n));
      const size_t head_end = in.find("\r\n\r\n");
      if (head_end == std::string::npos)
        continue;
      std::string head = in.substr(0, head_end);
      std::transform(head.begin(), head.end(), head.begin(),
                     [](unsigned char c) { return std::tolower(c); });
      const size_t cl = head.find("content-length:");
      need = head_end + 4 + (cl == std::string::npos ? 0 : std::stoul(head.substr(cl + 15)));
    }
  }

  const std::string reply_;
  const bool hold_open_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<int> connections_{0};
  std::atomic<int> held_{-1};
  std::thread thread_;
};

// An upstream that answers every request in full: an SSE stream of one chunk, or JSON.
class HealthyUpstream {
 public:
  HealthyUpstream() {
    absl::StatusOr<std::unique_ptr<net::HttpServer>> server = net::HttpServer::Start(
        {}, [](net::HttpRequest request, std::shared_ptr<net::HttpResponder> r) {
          if (request.body.find("\"stream\":true") != std::string::npos) {
            r->StartStream(200, "text/event-stream");
            r->Write(kChunk);
            r->Write(std::string(api::kSseDone));
            r->End();
          } else {
            r->Send(200, "application/json", kJsonBody);
          }
        });
    EXPECT_TRUE(server.ok()) << server.status();
    if (server.ok())
      server_ = *std::move(server);
  }
  ~HealthyUpstream() {
    if (server_ != nullptr)
      server_->Stop();
  }
  std::string address() const { return fmt::format("127.0.0.1:{}", server_->port()); }

 private:
  std::unique_ptr<net::HttpServer> server_;
};

struct Reply {
  int status = 0;
  net::HeaderList headers;
  std::string body;
  absl::Status done;

  std::string Header(const std::string& name) const {
    for (const auto& [k, v] : headers) {
      if (k == name)
        return v;
    }
    return "";
  }
};

// An upstream that answers every request with `reply` (JSON) and keeps what it was sent.
class RecordingUpstream {
 public:
  explicit RecordingUpstream(std::string reply) : reply_(std::move(reply)) {
    absl::StatusOr<std::unique_ptr<net::HttpServer>> server = net::HttpServer::Start(
        {}, [this](net::HttpRequest request, std::shared_ptr<net::HttpResponder> r) {
          {
            std::lock_guard<std::mutex> lock(mu_);
            bodies_.push_back(request.body);
            prefiller_.push_back(std::string(request.Header("x-prefiller-host-port").value_or("")));
          }
          r->Send(200, "application/json", reply_);
        });
    EXPECT_TRUE(server.ok()) << server.status();
    if (server.ok())
      server_ = *std::move(server);
  }
  ~RecordingUpstream() {
    if (server_ != nullptr)
      server_->Stop();
  }
  std::string address() const { return fmt::format("127.0.0.1:{}", server_->port()); }
  std::vector<std::string> bodies() {
    std::lock_guard<std::mutex> lock(mu_);
    return bodies_;
  }
  // Each request's x-prefiller-host-port ("" when it had none).
  std::vector<std::string> prefiller_headers() {
    std::lock_guard<std::mutex> lock(mu_);
    return prefiller_;
  }

 private:
  const std::string reply_;
  std::mutex mu_;
  std::vector<std::string> bodies_;
  std::vector<std::string> prefiller_;
  std::unique_ptr<net::HttpServer> server_;
};

// Routes to the upstreams in the order given, with the table's in-flight accounting; with a
// `prefill` endpoint, every attempt is disaggregated with it.
class InOrder final : public ProxyRouting {
 public:
  InOrder(std::vector<std::string> upstreams, EndpointTable* table, RouterMetrics* metrics,
          std::atomic<int64_t>* generated, std::string prefill = "")
      : upstreams_(std::move(upstreams)),
        table_(table),
        metrics_(metrics),
        generated_(generated),
        prefill_(std::move(prefill)) {}

  std::optional<ProxyTarget> NextTarget(absl::Span<const std::string> tried) override {
    // The targets view it until the next call.
    snapshot_ = table_->Snapshot(std::chrono::steady_clock::now());
    for (const std::string& u : upstreams_) {
      if (std::find(tried.begin(), tried.end(), u) != tried.end())
        continue;
      for (const Endpoint& e : *snapshot_) {
        if (e.name != u)
          continue;
        ProxyTarget target{
            e.name,      e.address, e.pool, e.authorization, &metrics_->Endpoint(u, "default"),
            e.load.get()};
        for (const Endpoint& p : *snapshot_) {
          if (p.name == prefill_)
            target.prefill = ProxyTarget::Prefill{p.name, p.address, p.authorization, p.load.get()};
        }
        return target;
      }
    }
    return std::nullopt;
  }
  void Picked(const ProxyTarget& /*target*/) override {}
  std::string SessionToken(std::string_view /*endpoint*/) override { return "token"; }
  void AttemptEnded(const ProxyTarget& target, bool failed) override {
    if (!failed)
      EndpointTable::ReportRequestSuccess(target.load);
    else if (table_->ReportRequestFailure(target.name, target.load,
                                          std::chrono::steady_clock::now()))
      target.metrics->Ejected();
  }
  // As the router does.
  void Refused(const ProxyTarget& target, std::chrono::seconds retry_after) override {
    table_->ReportRefusing(std::string(target.name),
                           std::chrono::steady_clock::now() + retry_after);
  }
  void Generated(int64_t tokens) override { *generated_ += tokens; }

 private:
  const std::vector<std::string> upstreams_;
  EndpointTable* const table_;
  RouterMetrics* const metrics_;
  std::atomic<int64_t>* const generated_;
  const std::string prefill_;
  std::shared_ptr<const std::vector<Endpoint>> snapshot_;
};

// A front that proxies every request with ProxyCall to `upstreams`, tried in order.
class ProxyCallTest : public ::testing::Test {
 protected:
  // With `prefill`, every attempt has a prefill leg there first.
  void Start(const std::vector<std::string>& upstreams, const std::string& prefill = "") {
    std::vector<EndpointSpec> specs;
    std::vector<std::string> members = upstreams;
    if (!prefill.empty())
      members.push_back(prefill);
    for (const std::string& u : members)
      specs.push_back({.name = u,
                       .address = u,
                       .labels = {},
                       .engine = EngineKind::kVllm,
                       .pool = "default",
                       .authorization = "",
                       .credentials = ""});
    table_.SetPoolMembers("default", specs);
    absl::StatusOr<std::unique_ptr<net::HttpClient>> client = net::HttpClient::Start({});
    ASSERT_TRUE(client.ok()) << client.status();
    upstream_client_ = *std::move(client);
    absl::StatusOr<std::unique_ptr<net::HttpServer>> front = net::HttpServer::Start(
        {}, [this, upstreams, prefill](net::HttpRequest request,
                                       std::shared_ptr<net::HttpResponder> r) {
          ProxyRequest proxy;
          proxy.http.method = request.method;
          proxy.http.target = request.target;
          proxy.http.headers = {{"content-type", "application/json"}, {"x-request-id", "req-1"}};
          proxy.request_id_header = 1;
          proxy.stream = request.body.find("\"stream\":true") != std::string::npos;
          proxy.http.body = std::move(request.body);
          proxy.arrival = std::chrono::steady_clock::now();
          proxy.prompt_tokens = 3;
          auto call = std::make_shared<ProxyCall>(
              std::move(proxy), r, upstream_client_.get(), &metrics_,
              /*max_retries=*/2,
              std::make_unique<InOrder>(upstreams, &table_, &metrics_, &generated_, prefill));
          {
            std::lock_guard<std::mutex> lock(front_mu_);
            front_responder_ = std::move(r);
            front_call_ = call;
          }
          call->Start();
        });
    ASSERT_TRUE(front.ok()) << front.status();
    front_ = *std::move(front);
    client = net::HttpClient::Start({});
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
  }

  void TearDown() override {
    if (client_ != nullptr)
      client_->Stop();
    if (front_ != nullptr)
      front_->Stop();
    if (upstream_client_ != nullptr)
      upstream_client_->Stop();
  }

  // With `close_after`, the client closes the connection as soon as the body received ends
  // with it (the openai client closes at [DONE]).
  Reply Post(bool stream, std::string_view close_after = "",
             std::chrono::seconds timeout = std::chrono::seconds(60)) {
    net::HttpClientRequest request;
    request.method = "POST";
    request.upstream = fmt::format("127.0.0.1:{}", front_->port());
    request.target = "/v1/completions";
    request.headers = {{"content-type", "application/json"}};
    request.body = fmt::format(R"({{"model":"m","prompt":"hi","stream":{}}})", stream);
    auto reply = std::make_shared<Reply>();
    auto handle = std::make_shared<std::promise<std::shared_ptr<net::HttpRequestHandle>>>();
    std::shared_future<std::shared_ptr<net::HttpRequestHandle>> handle_future =
        handle->get_future().share();
    std::promise<void> done;
    net::HttpClientCallbacks callbacks;
    callbacks.on_head = [reply](int status, const net::HeaderList& headers) {
      reply->status = status;
      reply->headers = headers;
    };
    callbacks.on_body = [reply, close_after, handle_future](std::string_view chunk) {
      reply->body.append(chunk);
      if (!close_after.empty() && reply->body.ends_with(close_after))
        handle_future.get()->Cancel();
      return true;
    };
    callbacks.on_done = [reply, &done](const absl::Status& status) {
      reply->done = status;
      done.set_value();
    };
    std::future<void> finished = done.get_future();
    handle->set_value(client_->Send(std::move(request), std::move(callbacks)));
    if (finished.wait_for(timeout) != std::future_status::ready) {
      ADD_FAILURE() << "no response within " << timeout.count() << " s";
      handle_future.get()->Cancel();
      finished.wait();
    }
    return *reply;
  }

  // The router's requests_total for `endpoint` by code, once `n` requests were counted
  // (ProxyCall counts a request when its upstream attempt ends, after the client may have
  // left).
  std::map<std::string, double> Codes(const std::string& endpoint, double n) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (;;) {
      absl::StatusOr<std::vector<PromSample>> samples = ParsePrometheusText(metrics_.Serialize());
      EXPECT_TRUE(samples.ok()) << samples.status();
      std::map<std::string, double> codes;
      double total = 0;
      for (const PromSample& s : samples.ok() ? *samples : std::vector<PromSample>{}) {
        if (s.name == "switchyard_router_requests_total" && s.Label("endpoint") == endpoint) {
          codes[std::string(s.Label("code"))] += s.value;
          total += s.value;
        }
      }
      if (total >= n || std::chrono::steady_clock::now() > deadline)
        return codes;
    }
  }

  // The router's retries after failed attempts on `endpoint` (for `reason`, if given).
  double Retries(const std::string& endpoint, std::string_view reason = "") {
    absl::StatusOr<std::vector<PromSample>> samples = ParsePrometheusText(metrics_.Serialize());
    EXPECT_TRUE(samples.ok()) << samples.status();
    double total = 0;
    for (const PromSample& s : samples.ok() ? *samples : std::vector<PromSample>{}) {
      if (s.name == "switchyard_router_upstream_retries_total" && s.Label("endpoint") == endpoint &&
          (reason.empty() || s.Label("reason") == reason))
        total += s.value;
    }
    return total;
  }

  // switchyard_router_pd_decisions_total{outcome}.
  double PdDecisions(std::string_view outcome) {
    absl::StatusOr<std::vector<PromSample>> samples = ParsePrometheusText(metrics_.Serialize());
    EXPECT_TRUE(samples.ok()) << samples.status();
    double total = 0;
    for (const PromSample& s : samples.ok() ? *samples : std::vector<PromSample>{}) {
      if (s.name == "switchyard_router_pd_decisions_total" && s.Label("outcome") == outcome)
        total += s.value;
    }
    return total;
  }

  // Nothing is left in flight in the router's accounting.
  void ExpectIdle() {
    for (const EndpointStatus& s : table_.Statuses(std::chrono::steady_clock::now())) {
      EXPECT_EQ(s.endpoint.active_requests(), 0) << s.endpoint.name;
      EXPECT_EQ(s.endpoint.inflight_prompt_tokens(), 0) << s.endpoint.name;
      EXPECT_EQ(s.endpoint.inflight_tokens(), 0) << s.endpoint.name;
    }
  }

  // The front's responder of the last request.
  std::shared_ptr<net::HttpResponder> FrontResponder() {
    std::lock_guard<std::mutex> lock(front_mu_);
    return front_responder_;
  }

  // The front's call of the last request.
  std::shared_ptr<ProxyCall> FrontCall() {
    std::lock_guard<std::mutex> lock(front_mu_);
    return front_call_;
  }

  // What the routing was told the responses generated (ProxyRouting::Generated).
  std::atomic<int64_t> generated_{0};
  std::mutex front_mu_;
  std::shared_ptr<net::HttpResponder> front_responder_;
  std::shared_ptr<ProxyCall> front_call_;
  EndpointTable table_{std::chrono::milliseconds(2000)};
  RouterMetrics metrics_{"m", {"default"}};
  std::unique_ptr<net::HttpClient> upstream_client_;
  std::unique_ptr<net::HttpServer> front_;
  std::unique_ptr<net::HttpClient> client_;
};

TEST_F(ProxyCallTest, AStreamWhoseUpstreamDiesAfterItsHeadIsRetried) {
  ScriptedUpstream dying(kSseHead);
  HealthyUpstream healthy;
  Start({dying.address(), healthy.address()});
  const Reply r = Post(/*stream=*/true);
  EXPECT_TRUE(r.done.ok()) << r.done;
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, std::string(kChunk) + std::string(api::kSseDone));
  EXPECT_EQ(r.Header("x-switchyard-endpoint"), healthy.address());
  EXPECT_EQ(r.Header("x-request-id"), "req-1");
  EXPECT_EQ(dying.connections(), 1);
  EXPECT_EQ(Retries(dying.address()), 1);
  ExpectIdle();
}

TEST_F(ProxyCallTest, AStreamsChunksCountAsGeneratedTokens) {
  HealthyUpstream healthy;
  Start({healthy.address()});
  // One completion chunk: one token, for the routing and, until the end, the endpoint.
  EXPECT_TRUE(Post(/*stream=*/true).done.ok());
  EXPECT_EQ(generated_, 1);
  ExpectIdle();
}

TEST_F(ProxyCallTest, ABufferedAnswersUsageIsItsGeneratedTokens) {
  ScriptedUpstream counted(
      fmt::format("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
                  "{}\r\n\r\n{}",
                  sizeof(kUsageBody) - 1, kUsageBody));
  Start({counted.address()});
  const Reply r = Post(/*stream=*/false);
  EXPECT_TRUE(r.done.ok()) << r.done;
  EXPECT_EQ(r.body, kUsageBody);
  EXPECT_EQ(generated_, 7);
  ExpectIdle();
}

TEST_F(ProxyCallTest, ABufferedResponseCutShortIsRetried) {
  ScriptedUpstream dying(
      "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{\"cho");
  HealthyUpstream healthy;
  Start({dying.address(), healthy.address()});
  const Reply r = Post(/*stream=*/false);
  EXPECT_TRUE(r.done.ok()) << r.done;
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, kJsonBody);
  EXPECT_EQ(r.Header("x-switchyard-endpoint"), healthy.address());
  EXPECT_EQ(dying.connections(), 1);
  EXPECT_EQ(Retries(dying.address()), 1);
  ExpectIdle();
}

TEST_F(ProxyCallTest, AStreamCutAfterItsFirstByteEndsWithAnErrorEvent) {
  // Chunked framing: one whole chunk (kChunk), then the connection closes.
  ScriptedUpstream dying(fmt::format("{}{:x}\r\n{}\r\n", kSseHead, sizeof(kChunk) - 1, kChunk));
  HealthyUpstream healthy;
  Start({dying.address(), healthy.address()});
  const Reply r = Post(/*stream=*/true);
  EXPECT_TRUE(r.done.ok()) << r.done;  // the router ends its response properly
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.Header("x-switchyard-endpoint"), dying.address());
  // The chunk that was passed on, then an error event naming the endpoint, then [DONE]:
  // not retried (the client has text already), never a normal finish.
  ASSERT_TRUE(r.body.starts_with(kChunk)) << r.body;
  const std::string rest = r.body.substr(sizeof(kChunk) - 1);
  EXPECT_TRUE(rest.starts_with("data: {\"error\":")) << rest;
  EXPECT_NE(rest.find(dying.address()), std::string::npos) << rest;
  EXPECT_TRUE(rest.ends_with(api::kSseDone)) << rest;
  EXPECT_EQ(Retries(dying.address()), 0);
  ExpectIdle();
}

TEST_F(ProxyCallTest, AClientThatClosesAfterDoneIsCountedAsServed) {
  // The stream's event and [DONE] came, the end of its framing has not: the client closes.
  const std::string events = std::string(kChunk) + std::string(api::kSseDone);
  ScriptedUpstream sse(fmt::format("{}{:x}\r\n{}\r\n", kSseHead, events.size(), events),
                       /*hold_open=*/true);
  Start({sse.address()});
  const Reply r = Post(/*stream=*/true, /*close_after=*/api::kSseDone);
  EXPECT_TRUE(absl::IsCancelled(r.done)) << r.done;
  EXPECT_EQ(r.body, events);
  EXPECT_EQ(Codes(sse.address(), 1), (std::map<std::string, double>{{"200", 1}}));
  ExpectIdle();
}

TEST_F(ProxyCallTest, AClientThatClosesBeforeDoneIsGone) {
  ScriptedUpstream sse(fmt::format("{}{:x}\r\n{}\r\n", kSseHead, sizeof(kChunk) - 1, kChunk),
                       /*hold_open=*/true);
  Start({sse.address()});
  const Reply r = Post(/*stream=*/true, /*close_after=*/kChunk);
  EXPECT_TRUE(absl::IsCancelled(r.done)) << r.done;
  EXPECT_EQ(Codes(sse.address(), 1), (std::map<std::string, double>{{"499", 1}}));
  ExpectIdle();
}

TEST_F(ProxyCallTest, AStreamWithNoEndpointLeftGetsAnHttpErrorNotAStream) {
  ScriptedUpstream dying(kSseHead);
  Start({dying.address()});
  const Reply r = Post(/*stream=*/true);
  EXPECT_TRUE(r.done.ok()) << r.done;
  EXPECT_EQ(r.status, 503);
  EXPECT_NE(r.body.find("\"error\""), std::string::npos) << r.body;
  EXPECT_EQ(r.Header("x-request-id"), "req-1");
  ExpectIdle();
}

// Chunked framing of one chunk holding `body`.
std::string Chunk(std::string_view body) {
  return fmt::format("{:x}\r\n{}\r\n", body.size(), body);
}

TEST_F(ProxyCallTest, AStreamCutMidEventDropsThePartialEventBeforeItsErrorEvent) {
  // One whole event and half of the next, then the engine dies.
  ScriptedUpstream dying(
      fmt::format("{}{}", kSseHead, Chunk(std::string(kChunk) + "data: {\"id\":\"x\",\"cho")));
  Start({dying.address()});
  const Reply r = Post(/*stream=*/true);
  EXPECT_TRUE(r.done.ok()) << r.done;
  EXPECT_EQ(r.status, 200);
  // The whole event, then the router's error event on a line of its own: every event parses.
  ASSERT_TRUE(r.body.starts_with(kChunk)) << r.body;
  const std::string rest = r.body.substr(sizeof(kChunk) - 1);
  EXPECT_TRUE(rest.starts_with("data: {\"error\":")) << rest;
  EXPECT_EQ(rest.find("cho"), std::string::npos) << rest;
  EXPECT_TRUE(rest.ends_with(api::kSseDone)) << rest;
  EXPECT_EQ(Codes(dying.address(), 1), (std::map<std::string, double>{{"error", 1}}));
  ExpectIdle();
}

TEST_F(ProxyCallTest, AStreamThatEndsWithoutDoneIsAFailure) {
  // A proper end of the chunked body, but no [DONE] event: the stream was cut short.
  ScriptedUpstream ending(fmt::format("{}{}0\r\n\r\n", kSseHead, Chunk(kChunk)));
  Start({ending.address()});
  const Reply r = Post(/*stream=*/true);
  EXPECT_TRUE(r.done.ok()) << r.done;
  ASSERT_TRUE(r.body.starts_with(kChunk)) << r.body;
  EXPECT_TRUE(r.body.substr(sizeof(kChunk) - 1).starts_with("data: {\"error\":")) << r.body;
  EXPECT_EQ(Codes(ending.address(), 1), (std::map<std::string, double>{{"error", 1}}));
  ExpectIdle();
}

TEST_F(ProxyCallTest, AJsonAnswerToAStreamRequestStaysJsonWhenItFails) {
  // The upstream answers a stream request with JSON and dies mid-body: the client gets a JSON
  // error, not SSE written into a JSON body.
  ScriptedUpstream dying(
      "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{\"cho");
  Start({dying.address()});
  const Reply r = Post(/*stream=*/true);
  EXPECT_TRUE(r.done.ok()) << r.done;
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.Header("content-type"), "application/json");
  EXPECT_TRUE(r.body.starts_with("{\"error\":")) << r.body;
  EXPECT_EQ(r.body.find("data:"), std::string::npos) << r.body;
  ExpectIdle();
}

TEST_F(ProxyCallTest, AWholeJsonSuccessToAStreamRequestIsRetriedElsewhere) {
  // A 200 JSON completion to a stream request reads as an empty stream to an SSE client: the
  // endpoint failed, and the next one serves the stream.
  ScriptedUpstream wrong(fmt::format(
      "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{}",
      sizeof(kJsonBody) - 1, kJsonBody));
  ScriptedUpstream right(
      fmt::format("{}{}{}0\r\n\r\n", kSseHead, Chunk(kChunk), Chunk(std::string(api::kSseDone))));
  Start({wrong.address(), right.address()});
  const Reply r = Post(/*stream=*/true);
  EXPECT_TRUE(r.done.ok()) << r.done;
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.Header("content-type"), "text/event-stream");
  EXPECT_EQ(r.body, std::string(kChunk) + std::string(api::kSseDone));
  ExpectIdle();
}

TEST_F(ProxyCallTest, AJsonAnswerToAStreamRequestPassesAsJson) {
  const std::string json = R"({"error":{"message":"no streams here","code":400}})";
  ScriptedUpstream upstream(
      fmt::format("HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\n"
                  "content-length: {}\r\n\r\n{}",
                  json.size(), json));
  Start({upstream.address()});
  const Reply r = Post(/*stream=*/true);
  EXPECT_TRUE(r.done.ok()) << r.done;
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.Header("content-type"), "application/json");
  EXPECT_EQ(r.Header("content-length"), std::to_string(json.size()));  // whole, not chunked
  EXPECT_EQ(r.body, json);
  ExpectIdle();
}

TEST_F(ProxyCallTest, KeepAliveCommentsBeforeTheFirstEventKeepAStreamRetryable) {
  // A queued stream: the engine sent its head and keep-alive comments, then died. Nothing
  // reached the client, so the request goes to the next endpoint.
  ScriptedUpstream dying(
      fmt::format("{}{}{}", kSseHead, Chunk(": keep-alive\n\n"), Chunk(": keep-alive\n\n")));
  HealthyUpstream healthy;
  Start({dying.address(), healthy.address()});
  const Reply r = Post(/*stream=*/true);
  EXPECT_TRUE(r.done.ok()) << r.done;
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, std::string(kChunk) + std::string(api::kSseDone));
  EXPECT_EQ(r.Header("x-switchyard-endpoint"), healthy.address());
  EXPECT_EQ(Retries(dying.address()), 1);
  ExpectIdle();
}

TEST_F(ProxyCallTest, NoEndpointAtAllIs503WithRetryAfterNot429) {
  Start({});
  const Reply r = Post(/*stream=*/false);
  EXPECT_TRUE(r.done.ok()) << r.done;
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.Header("retry-after"), "1");
  EXPECT_NE(r.body.find("\"type\":\"ServiceUnavailableError\""), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("\"code\":503"), std::string::npos) << r.body;
  EXPECT_EQ(r.Header("x-request-id"), "req-1");
}

TEST_F(ProxyCallTest, ARequestWaitingOnAnEndpointThatGoesDownIsRetriedElsewhere) {
  // A frozen engine: it takes the request and answers nothing, closing nothing.
  ScriptedUpstream frozen("", /*hold_open=*/true);
  HealthyUpstream healthy;
  Start({frozen.address(), healthy.address()});
  std::future<Reply> reply =
      std::async(std::launch::async, [this] { return Post(/*stream=*/false); });
  // Once the request waits there, the endpoint's scrapes fail: it leaves the routing set.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (frozen.connections() == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_EQ(frozen.connections(), 1);
  for (int i = 0; i < EndpointTable::kUnhealthyAfterFailures; ++i)
    table_.ReportScrapeFailure(frozen.address());
  ASSERT_EQ(reply.wait_for(std::chrono::seconds(10)), std::future_status::ready)
      << "the request still waits on the frozen endpoint";
  const Reply r = reply.get();
  EXPECT_TRUE(r.done.ok()) << r.done;
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, kJsonBody);
  EXPECT_EQ(r.Header("x-switchyard-endpoint"), healthy.address());
  EXPECT_EQ(Retries(frozen.address(), "unhealthy"), 1);
  ExpectIdle();
}

TEST_F(ProxyCallTest, AStreamWaitingOnAnEndpointThatGoesDownIsRetriedElsewhere) {
  // Queued in a frozen engine: head and a keep-alive comment came, then nothing.
  ScriptedUpstream frozen(fmt::format("{}{}", kSseHead, Chunk(": keep-alive\n\n")),
                          /*hold_open=*/true);
  HealthyUpstream healthy;
  Start({frozen.address(), healthy.address()});
  std::future<Reply> reply =
      std::async(std::launch::async, [this] { return Post(/*stream=*/true); });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (frozen.connections() == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_EQ(frozen.connections(), 1);
  for (int i = 0; i < EndpointTable::kUnhealthyAfterFailures; ++i)
    table_.ReportScrapeFailure(frozen.address());
  ASSERT_EQ(reply.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  const Reply r = reply.get();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, std::string(kChunk) + std::string(api::kSseDone));
  EXPECT_EQ(r.Header("x-switchyard-endpoint"), healthy.address());
  EXPECT_EQ(Retries(frozen.address(), "unhealthy"), 1);
  ExpectIdle();
}

// An upstream that streams kPieces MiB at once, each MiB an SSE event of one letter, then
// [DONE]: far more than the socket buffers between it and the client hold.
class FloodingUpstream {
 public:
  static constexpr int kPieces = 64;

  FloodingUpstream() {
    net::HttpServerOptions options;
    options.max_pending_write_bytes = (kPieces + 1) << 20;
    absl::StatusOr<std::unique_ptr<net::HttpServer>> server = net::HttpServer::Start(
        options, [this](net::HttpRequest /*request*/, std::shared_ptr<net::HttpResponder> r) {
          {
            std::lock_guard<std::mutex> lock(mu_);
            responder_ = r;
          }
          r->StartStream(200, "text/event-stream");
          for (int i = 0; i < kPieces; ++i)
            r->Write(Piece(i));
          r->Write(std::string(api::kSseDone));
          r->End();
        });
    EXPECT_TRUE(server.ok()) << server.status();
    if (server.ok())
      server_ = *std::move(server);
  }
  ~FloodingUpstream() {
    if (server_ != nullptr)
      server_->Stop();
  }
  std::string address() const { return fmt::format("127.0.0.1:{}", server_->port()); }
  static std::string Piece(int i) {
    return "data: " + std::string((1 << 20) - 8, static_cast<char>('a' + i % 26)) + "\n\n";
  }
  // Bytes of the stream the upstream has not yet written to its socket.
  size_t pending() {
    std::lock_guard<std::mutex> lock(mu_);
    return responder_ == nullptr ? 0 : responder_->pending_write_bytes();
  }

 private:
  std::mutex mu_;
  std::shared_ptr<net::HttpResponder> responder_;
  std::unique_ptr<net::HttpServer> server_;
};

TEST_F(ProxyCallTest, ASlowClientPausesTheUpstreamAndLosesNothing) {
  FloodingUpstream upstream;
  Start({upstream.address()});
  // A client that takes the first body piece, then stops reading until resumed.
  auto body = std::make_shared<std::string>();
  std::promise<void> paused;
  std::promise<absl::Status> done;
  net::HttpClientCallbacks callbacks;
  callbacks.on_body = [body, &paused](std::string_view chunk) {
    const bool first = body->empty();
    body->append(chunk);
    if (first)
      paused.set_value();
    return !first;
  };
  callbacks.on_done = [&done](const absl::Status& status) { done.set_value(status); };
  net::HttpClientRequest request;
  request.method = "POST";
  request.upstream = fmt::format("127.0.0.1:{}", front_->port());
  request.target = "/v1/completions";
  request.headers = {{"content-type", "application/json"}};
  request.body = R"({"model":"m","prompt":"hi","stream":true})";
  const std::shared_ptr<net::HttpRequestHandle> handle =
      client_->Send(std::move(request), std::move(callbacks));
  ASSERT_EQ(paused.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);

  // While the client reads nothing, what waits in the router for it stays near the pause
  // level (without back-pressure the router would read the whole stream and queue it), and
  // the rest stays with the upstream.
  const std::shared_ptr<net::HttpResponder> front = FrontResponder();
  ASSERT_NE(front, nullptr);
  size_t most_queued = 0;
  for (int i = 0; i < 50; ++i) {
    most_queued = std::max(most_queued, front->pending_write_bytes());
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_LE(most_queued, ProxyCall::kStreamPauseBytes + (1 << 20));
  EXPECT_GT(upstream.pending(), 0u);

  handle->Resume();
  std::future<absl::Status> finished = done.get_future();
  ASSERT_EQ(finished.wait_for(std::chrono::seconds(60)), std::future_status::ready);
  EXPECT_TRUE(finished.get().ok());
  ASSERT_EQ(body->size(),
            (static_cast<size_t>(FloodingUpstream::kPieces) << 20) + api::kSseDone.size());
  for (int i = 0; i < FloodingUpstream::kPieces; ++i) {
    ASSERT_EQ(std::string_view(*body).substr(static_cast<size_t>(i) << 20, 1 << 20),
              FloodingUpstream::Piece(i))
        << "piece " << i;
  }
  EXPECT_TRUE(body->ends_with(api::kSseDone));
  EXPECT_EQ(Codes(upstream.address(), 1), (std::map<std::string, double>{{"200", 1}}));
  ExpectIdle();
}

// A draining engine refuses with 503 and Retry-After: the request goes to the next endpoint,
// and the refusing one leaves the snapshots for that long (no new request reaches it).
TEST_F(ProxyCallTest, ARefusalWithRetryAfterIsRetriedAndKeepsTheEndpointOut) {
  ScriptedUpstream refusing(
      "HTTP/1.1 503 Service Unavailable\r\nretry-after: 30\r\ncontent-type: "
      "application/json\r\ncontent-length: 2\r\n\r\n{}");
  HealthyUpstream healthy;
  Start({refusing.address(), healthy.address()});
  for (int i = 0; i < 3; ++i) {
    Reply r = Post(false);
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.Header("x-switchyard-endpoint"), healthy.address());
  }
  EXPECT_EQ(refusing.connections(), 1);
  std::shared_ptr<const std::vector<Endpoint>> snapshot =
      table_.Snapshot(std::chrono::steady_clock::now());
  ASSERT_EQ(snapshot->size(), 1u);
  EXPECT_EQ((*snapshot)[0].name, healthy.address());
  // Back once its Retry-After has passed.
  EXPECT_EQ(table_.Snapshot(std::chrono::steady_clock::now() + std::chrono::seconds(31))->size(),
            2u);
  ExpectIdle();
}

// The router shuts down with a buffered request in flight: the client gets 503 with
// Retry-After, and the upstream request is cancelled.
TEST_F(ProxyCallTest, AbortBeforeTheFirstByteAnswers503WithRetryAfter) {
  ScriptedUpstream held("", /*hold_open=*/true);
  Start({held.address()});
  std::future<Reply> reply = std::async(std::launch::async, [this] { return Post(false); });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (held.connections() == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::yield();
  ASSERT_EQ(held.connections(), 1);
  FrontCall()->Abort(absl::UnavailableError("shutting down"));
  Reply r = reply.get();
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.Header("retry-after"), "1");
  EXPECT_NE(r.body.find("shutting down"), std::string::npos) << r.body;
  FrontCall()->Abort(absl::UnavailableError("again"));  // harmless once ended
  ExpectIdle();
}

TEST_F(ProxyCallTest, ThePrefillLegsKvTransferParamsGoToTheDecodeEndpoint) {
  RecordingUpstream prefill(R"({"choices":[],"kv_transfer_params":{"remote_port":7}})");
  RecordingUpstream decode(kJsonBody);
  Start({decode.address()}, prefill.address());
  const Reply r = Post(false);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, kJsonBody);
  EXPECT_EQ(r.Header("x-switchyard-endpoint"), decode.address());
  EXPECT_EQ(r.Header("x-switchyard-prefill-endpoint"), prefill.address());
  ASSERT_EQ(prefill.bodies().size(), 1u);
  EXPECT_EQ(prefill.bodies()[0],
            R"({"model":"m","prompt":"hi","kv_transfer_params":{"do_remote_decode":true,)"
            R"("do_remote_prefill":false,"remote_engine_id":null,"remote_block_ids":null,)"
            R"("remote_host":null,"remote_port":null},"stream":false,"max_tokens":1})");
  ASSERT_EQ(decode.bodies().size(), 1u);
  EXPECT_EQ(decode.bodies()[0],
            R"({"model":"m","prompt":"hi","stream":false,"kv_transfer_params":{"remote_port":7}})");
  EXPECT_EQ(decode.prefiller_headers(), std::vector<std::string>{prefill.address()});
  EXPECT_EQ(PdDecisions("disaggregated"), 1);
  EXPECT_EQ(PdDecisions("fallback"), 0);
  ExpectIdle();
}

TEST_F(ProxyCallTest, APrefillAnswerWithoutKvTransferParamsFallsBackToTheDecodeEndpoint) {
  RecordingUpstream prefill(kJsonBody);
  RecordingUpstream decode(kJsonBody);
  Start({decode.address()}, prefill.address());
  const Reply r = Post(false);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.Header("x-switchyard-endpoint"), decode.address());
  EXPECT_EQ(r.Header("x-switchyard-prefill-endpoint"), "");
  EXPECT_EQ(decode.bodies(),
            std::vector<std::string>{R"({"model":"m","prompt":"hi","stream":false})"});
  EXPECT_EQ(decode.prefiller_headers(), std::vector<std::string>{""});
  EXPECT_EQ(PdDecisions("fallback"), 1);
  EXPECT_EQ(PdDecisions("disaggregated"), 0);
  ExpectIdle();
}

TEST_F(ProxyCallTest, ADeadPrefillEndpointFallsBackToTheDecodeEndpointsStream) {
  std::string gone;
  {
    RecordingUpstream closed("{}");
    gone = closed.address();
  }
  HealthyUpstream decode;
  Start({decode.address()}, gone);
  const Reply r = Post(true);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, std::string(kChunk) + std::string(api::kSseDone));
  EXPECT_EQ(r.Header("x-switchyard-endpoint"), decode.address());
  EXPECT_EQ(r.Header("x-switchyard-prefill-endpoint"), "");
  EXPECT_EQ(PdDecisions("fallback"), 1);
  EXPECT_EQ(PdDecisions("disaggregated"), 0);
  ExpectIdle();
}

}  // namespace
}  // namespace switchyard::router::internal
