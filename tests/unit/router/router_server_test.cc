// RouterServer over real HTTP upstreams on loopback (net::HttpServer answering as an
// OpenAI engine does, and recording what reached it): request ids, retries and the
// router's metrics. The e2e tests (tests/e2e/test_router.py) do the same over sim engines.
#include "router/router_server.h"

#include <chrono>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "fmt/format.h"
#include "gtest/gtest.h"

#include "base/mutex.h"
#include "net/http_client.h"
#include "net/http_server.h"
#include "router/endpoint.h"
#include "router/prometheus_text.h"

namespace switchyard::router {
namespace {

// An upstream that answers completions with `status` (an error status with an OpenAI error
// body naming the upstream) and a queue of `waiting` on /metrics, and records the headers of
// each completion request it was sent.
class Upstream {
 public:
  // `metrics_extra`: more lines for /metrics.
  Upstream(int status, int waiting, std::string metrics_extra = "")
      : status_(status), waiting_(waiting), metrics_extra_(std::move(metrics_extra)) {
    net::HttpServerOptions options;
    absl::StatusOr<std::unique_ptr<net::HttpServer>> server = net::HttpServer::Start(
        options, [this](net::HttpRequest request, std::shared_ptr<net::HttpResponder> r) {
          Handle(request, std::move(r));
        });
    EXPECT_TRUE(server.ok()) << server.status();
    if (server.ok())
      server_ = *std::move(server);
  }
  ~Upstream() {
    if (server_ != nullptr)
      server_->Stop();
    for (std::thread& t : delayed_)
      t.join();
  }
  // Completions are answered `delay` after they arrived (a request queued in a busy engine).
  void SetDelay(std::chrono::milliseconds delay) {
    base::MutexLock lock(&mu_);
    delay_ = delay;
  }
  std::string address() const { return fmt::format("127.0.0.1:{}", server_->port()); }
  // Stops listening: connections to address() are refused from now on.
  void Close() { server_->Stop(); }
  // The error body this upstream answers with, when its status is an error.
  std::string ErrorBody() const {
    return fmt::format(R"({{"error":{{"message":"overloaded: {}","type":"ServiceUnavailableError",)"
                       R"("param":null,"code":{}}}}})",
                       address(), status_);
  }
  // The headers of each completion request, in arrival order.
  std::vector<net::HeaderList> requests() {
    base::MutexLock lock(&mu_);
    return requests_;
  }
  // The values of the header `name` in each completion request, in arrival order.
  std::vector<std::vector<std::string>> HeaderValues(const std::string& name) {
    std::vector<std::vector<std::string>> out;
    for (const net::HeaderList& headers : requests()) {
      out.emplace_back();
      for (const auto& [k, value] : headers) {
        if (k == name)
          out.back().push_back(value);
      }
    }
    return out;
  }
  // The x-request-id values of each completion request, in arrival order.
  std::vector<std::vector<std::string>> ids() { return HeaderValues("x-request-id"); }
  // The Authorization headers of the router's scrapes (/metrics and /v1/models).
  std::set<std::string> scrape_authorizations() {
    base::MutexLock lock(&mu_);
    return scrape_authorizations_;
  }

 private:
  void Handle(const net::HttpRequest& request, std::shared_ptr<net::HttpResponder> responder) {
    if (request.method == "GET") {
      base::MutexLock lock(&mu_);
      scrape_authorizations_.insert(std::string(request.Header("authorization").value_or("")));
    }
    if (request.path == "/v1/models") {
      responder->Send(200, "application/json",
                      R"({"object":"list","data":[{"id":"m","object":"model","created":1700000000,)"
                      R"("owned_by":"vllm","root":"/models/m","max_model_len":1234}]})");
      return;
    }
    if (request.path == "/metrics") {
      responder->Send(200, "text/plain",
                      fmt::format("vllm:num_requests_waiting {}\nvllm:num_requests_running 0\n"
                                  "vllm:kv_cache_usage_perc 0\n{}",
                                  waiting_, metrics_extra_));
      return;
    }
    std::chrono::milliseconds delay;
    {
      base::MutexLock lock(&mu_);
      requests_.push_back(request.headers);
      delay = delay_;
    }
    if (delay.count() == 0) {
      Answer(*responder);
      return;
    }
    base::MutexLock lock(&mu_);
    delayed_.emplace_back([this, delay, responder] {
      std::this_thread::sleep_for(delay);
      Answer(*responder);
    });
  }

  void Answer(net::HttpResponder& responder) {
    responder.Send(status_, "application/json",
                   status_ >= 400 ? ErrorBody() : R"({"id":"cmpl-upstream","choices":[]})",
                   {{"x-request-id", "upstream-own-id"}});
  }

  const int status_;
  const int waiting_;
  const std::string metrics_extra_;
  std::unique_ptr<net::HttpServer> server_;
  base::Mutex mu_;
  std::vector<net::HeaderList> requests_ ABSL_GUARDED_BY(mu_);
  std::chrono::milliseconds delay_ ABSL_GUARDED_BY(mu_){0};
  std::vector<std::thread> delayed_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> scrape_authorizations_ ABSL_GUARDED_BY(mu_);
};

class RouterServerTest : public ::testing::Test {
 protected:
  // `adjust` changes the test's config before the router starts.
  void StartRouter(const std::vector<Upstream*>& upstreams,
                   const std::function<void(RouterConfig&)>& adjust = nullptr) {
    RouterConfig config;
    config.host = "127.0.0.1";
    config.port = 0;
    config.threads = 1;
    config.model = "m";
    PoolConfig pool;
    pool.name = "default";
    for (Upstream* u : upstreams) {
      StaticEndpointConfig e;
      e.spec.name = u->address();
      e.spec.address = u->address();
      e.spec.pool = pool.name;
      pool.endpoints.push_back(e);
    }
    config.pools.push_back(pool);
    config.scrape_interval_ms = 20;
    // Load only, so that the upstream reporting the shorter queue is always tried first.
    config.scheduling_yaml = "plugins:\n- type: queue-scorer\n";
    if (adjust)
      adjust(config);
    absl::StatusOr<std::unique_ptr<RouterServer>> router = RouterServer::Start(config);
    ASSERT_TRUE(router.ok()) << router.status();
    router_ = *std::move(router);
    absl::StatusOr<std::unique_ptr<net::HttpClient>> client = net::HttpClient::Start({});
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
  }
  void TearDown() override {
    if (client_ != nullptr)
      client_->Stop();
    if (router_ != nullptr)
      router_->Stop();
  }

  net::HttpClient::Response Call(const std::string& method, const std::string& target,
                                 const std::string& body, net::HeaderList headers = {}) {
    net::HttpClientRequest request;
    request.method = method;
    request.upstream = fmt::format("127.0.0.1:{}", router_->port());
    request.target = target;
    request.headers = std::move(headers);
    if (!body.empty())
      request.headers.emplace_back("content-type", "application/json");
    request.body = body;
    std::promise<absl::StatusOr<net::HttpClient::Response>> done;
    client_->Fetch(std::move(request), [&done](absl::StatusOr<net::HttpClient::Response> r) {
      done.set_value(std::move(r));
    });
    absl::StatusOr<net::HttpClient::Response> response = done.get_future().get();
    EXPECT_TRUE(response.ok()) << response.status();
    return response.ok() ? *response : net::HttpClient::Response{};
  }

  std::vector<PromSample> Metrics() {
    absl::StatusOr<std::vector<PromSample>> samples =
        ParsePrometheusText(Call("GET", "/metrics", "").body);
    EXPECT_TRUE(samples.ok()) << samples.status();
    return samples.ok() ? *samples : std::vector<PromSample>{};
  }

  // Waits (bounded) until the router has scraped every endpoint once.
  void WaitForScrapes(size_t endpoints) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      size_t fresh = 0;
      for (const PromSample& s : Metrics()) {
        if (s.name == "switchyard_router_endpoint_metrics_age_seconds" && s.value >= 0)
          ++fresh;
      }
      if (fresh == endpoints)
        return;
    }
    ADD_FAILURE() << "endpoints not scraped";
  }

  static std::string Header(const net::HttpClient::Response& r, const std::string& name) {
    for (const auto& [k, v] : r.headers) {
      if (k == name)
        return v;
    }
    return "";
  }

  static double Sum(const std::vector<PromSample>& samples, const std::string& name,
                    const std::map<std::string, std::string>& labels) {
    double total = 0;
    for (const PromSample& s : samples) {
      bool match = s.name == name;
      for (const auto& [k, v] : labels)
        match = match && s.Label(k) == v;
      if (match)
        total += s.value;
    }
    return total;
  }

  std::unique_ptr<RouterServer> router_;
  std::unique_ptr<net::HttpClient> client_;
};

constexpr char kBody[] = R"({"model":"m","prompt":"hello","max_tokens":1})";

TEST_F(RouterServerTest, RequestIdsAreKeptOrMadeAndSentUpstreamOnce) {
  Upstream upstream(200, 0);
  StartRouter({&upstream});
  // A client's id goes upstream once and comes back in place of the engine's own.
  net::HttpClient::Response r =
      Call("POST", "/v1/completions", kBody, {{"x-request-id", "client-id-1"}});
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(Header(r, "x-request-id"), "client-id-1");
  // No session-affinity plugin reads tokens back: none is issued.
  EXPECT_EQ(Header(r, "x-session-token"), "");
  // Without one the router makes one.
  r = Call("POST", "/v1/completions", kBody);
  EXPECT_EQ(r.status, 200);
  const std::string made = Header(r, "x-request-id");
  EXPECT_EQ(made.size(), 36u) << made;
  const std::vector<std::vector<std::string>> seen = upstream.ids();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], std::vector<std::string>{"client-id-1"});
  EXPECT_EQ(seen[1], std::vector<std::string>{made});
  // The router's own errors carry it too, and count under the code they answered.
  r = Call("POST", "/v1/completions", "{not json", {{"x-request-id", "bad-1"}});
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(Header(r, "x-request-id"), "bad-1");
  const std::vector<PromSample> m = Metrics();
  EXPECT_EQ(Sum(m, "switchyard_router_requests_total",
                {{"model", "m"}, {"endpoint", upstream.address()}, {"code", "200"}}),
            2);
  EXPECT_EQ(Sum(m, "switchyard_router_requests_total", {{"endpoint", ""}, {"code", "400"}}), 1);
  EXPECT_EQ(Sum(m, "switchyard_router_request_duration_seconds_count",
                {{"endpoint", upstream.address()}}),
            2);
  EXPECT_EQ(Sum(m, "switchyard_router_time_to_first_byte_seconds_count",
                {{"endpoint", upstream.address()}}),
            2);
  EXPECT_EQ(Sum(m, "switchyard_router_tokenize_duration_seconds_count", {}), 3);
  EXPECT_EQ(Sum(m, "switchyard_router_scheduler_duration_seconds_count", {}), 2);
  EXPECT_EQ(Sum(m, "switchyard_router_pool_size", {{"pool", "default"}}), 1);
}

class RouterRetryTest : public RouterServerTest, public ::testing::WithParamInterface<int> {};

TEST_P(RouterRetryTest, A502Or503IsRetriedElsewhereWithTheSameIdAndCounted) {
  const int status = GetParam();
  Upstream failing(status, 0);  // shortest queue: picked first every time
  Upstream healthy(200, 5);
  StartRouter({&failing, &healthy});
  WaitForScrapes(2);
  constexpr int kRequests = 5;
  for (int i = 0; i < kRequests; ++i) {
    const net::HttpClient::Response r = Call("POST", "/v1/completions", kBody);
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(Header(r, "x-switchyard-endpoint"), healthy.address());
  }
  const std::vector<std::vector<std::string>> first = failing.ids();
  const std::vector<std::vector<std::string>> second = healthy.ids();
  ASSERT_EQ(first.size(), static_cast<size_t>(kRequests));
  ASSERT_EQ(second.size(), static_cast<size_t>(kRequests));
  for (int i = 0; i < kRequests; ++i)
    EXPECT_EQ(first[static_cast<size_t>(i)], second[static_cast<size_t>(i)]);
  const std::vector<PromSample> m = Metrics();
  EXPECT_EQ(Sum(m, "switchyard_router_upstream_retries_total",
                {{"endpoint", failing.address()},
                 {"pool", "default"},
                 {"reason", fmt::format("http_{}", status)}}),
            kRequests);
  EXPECT_EQ(Sum(m, "switchyard_router_upstream_retries_total", {}), kRequests);
  EXPECT_EQ(Sum(m, "switchyard_router_requests_total",
                {{"endpoint", healthy.address()}, {"code", "200"}}),
            kRequests);
  EXPECT_EQ(Sum(m, "switchyard_router_endpoint_queue_size", {{"endpoint", healthy.address()}}), 5);
  EXPECT_EQ(Sum(m, "switchyard_router_endpoint_healthy", {}), 2);
  // Its fifth failure in a row (outlier detection's default) ejected the failing endpoint:
  // its scrapes are fine, but it is not ready.
  EXPECT_EQ(Sum(m, "switchyard_router_endpoint_ejected", {{"endpoint", failing.address()}}), 1);
  EXPECT_EQ(Sum(m, "switchyard_router_pool_ready_endpoints", {{"pool", "default"}}), 1);
}

INSTANTIATE_TEST_SUITE_P(Statuses, RouterRetryTest, ::testing::Values(502, 503));

// proxy.maxRetries N: a request goes to at most N + 1 endpoints, however many would fail.
constexpr int kMaxRetries = 1;
constexpr int kFailingEndpoints = 4;

TEST_F(RouterServerTest, RetriesStopAtMaxRetriesAndTheLastErrorGoesToTheClient) {
  std::vector<std::unique_ptr<Upstream>> owned;
  std::vector<Upstream*> upstreams;
  for (int i = 0; i < kFailingEndpoints; ++i) {
    owned.push_back(std::make_unique<Upstream>(i % 2 == 0 ? 502 : 503, 0));
    upstreams.push_back(owned.back().get());
  }
  StartRouter(upstreams, [](RouterConfig& c) { c.max_retries = kMaxRetries; });
  WaitForScrapes(kFailingEndpoints);
  constexpr int kRequests = 6;
  std::map<std::string, int> last_codes;  // "502"/"503": client answers with that status
  for (int i = 0; i < kRequests; ++i) {
    const net::HttpClient::Response r =
        Call("POST", "/v1/completions", kBody, {{"x-request-id", fmt::format("bound-{}", i)}});
    // The last endpoint's own error answer, as it sent it, marked with where it came from.
    const std::string last = Header(r, "x-switchyard-endpoint");
    Upstream* answered = nullptr;
    for (Upstream* u : upstreams) {
      if (u->address() == last)
        answered = u;
    }
    ASSERT_NE(answered, nullptr) << last;
    EXPECT_TRUE(r.status == 502 || r.status == 503) << r.status;
    EXPECT_EQ(r.body, answered->ErrorBody());
    EXPECT_EQ(Header(r, "content-type"), "application/json");
    EXPECT_EQ(Header(r, "x-request-id"), fmt::format("bound-{}", i));
    ++last_codes[std::to_string(r.status)];
  }
  // Each request reached exactly N + 1 distinct endpoints.
  std::map<std::string, std::set<std::string>> reached;  // request id -> endpoints
  size_t attempts = 0;
  for (Upstream* u : upstreams) {
    for (const std::vector<std::string>& ids : u->ids()) {
      ASSERT_EQ(ids.size(), 1u);
      reached[ids[0]].insert(u->address());
      ++attempts;
    }
  }
  EXPECT_EQ(attempts, static_cast<size_t>(kRequests * (kMaxRetries + 1)));
  ASSERT_EQ(reached.size(), static_cast<size_t>(kRequests));
  for (const auto& [id, endpoints] : reached)
    EXPECT_EQ(endpoints.size(), static_cast<size_t>(kMaxRetries + 1)) << id;
  const std::vector<PromSample> m = Metrics();
  EXPECT_EQ(Sum(m, "switchyard_router_upstream_retries_total", {}), kRequests * kMaxRetries);
  EXPECT_EQ(Sum(m, "switchyard_router_upstream_retries_total", {{"reason", "http_502"}}) +
                Sum(m, "switchyard_router_upstream_retries_total", {{"reason", "http_503"}}),
            kRequests * kMaxRetries);
  for (const auto& [code, n] : last_codes)
    EXPECT_EQ(Sum(m, "switchyard_router_requests_total", {{"code", code}}), n) << code;
}

TEST_F(RouterServerTest, RetriesStopAtMaxRetriesWithTheRoutersOwnErrorWhenNoneAnswers) {
  std::vector<std::unique_ptr<Upstream>> owned;
  std::vector<Upstream*> upstreams;
  for (int i = 0; i < kFailingEndpoints; ++i) {
    owned.push_back(std::make_unique<Upstream>(200, 0));
    owned.back()->Close();  // refuses connections
    upstreams.push_back(owned.back().get());
  }
  // One scrape only (it fails, which alone does not take an endpoint out of the snapshot).
  StartRouter(upstreams, [](RouterConfig& c) {
    c.max_retries = kMaxRetries;
    c.scrape_interval_ms = 600'000;
  });
  constexpr int kRequests = 3;
  for (int i = 0; i < kRequests; ++i) {
    const net::HttpClient::Response r = Call("POST", "/v1/completions", kBody);
    EXPECT_EQ(r.status, 503);
    EXPECT_EQ(Header(r, "content-type"), "application/json");
    EXPECT_EQ(Header(r, "x-request-id").size(), 36u);
    EXPECT_NE(r.body.find(R"({"error":{"message":"No endpoint could serve the request ()" +
                          std::to_string(kMaxRetries + 1) + " tried;"),
              std::string::npos)
        << r.body;
    EXPECT_NE(r.body.find(R"("type":"ServiceUnavailableError","param":null,"code":503}})"),
              std::string::npos)
        << r.body;
  }
  const std::vector<PromSample> m = Metrics();
  EXPECT_EQ(Sum(m, "switchyard_router_upstream_retries_total", {{"reason", "connect"}}),
            kRequests * kMaxRetries);
  EXPECT_EQ(Sum(m, "switchyard_router_upstream_retries_total", {}), kRequests * kMaxRetries);
  EXPECT_EQ(Sum(m, "switchyard_router_requests_total", {{"code", "503"}}), kRequests);
}

TEST_F(RouterServerTest, ClientRoutingHeadersAreNeitherHonouredNorForwarded) {
  Upstream a(200, 0);
  Upstream b(200, 0);
  StartRouter({&a, &b}, [](RouterConfig& c) {
    c.scheduling_yaml = "plugins:\n- type: round-robin-picker\n";
  });
  // Every request names `a` as llm-d's gateway would, with a token no router issued.
  constexpr int kRequests = 6;
  std::map<std::string, int> served;
  for (int i = 0; i < kRequests; ++i) {
    const net::HttpClient::Response r =
        Call("POST", "/v1/completions", kBody,
             {{"x-gateway-destination-endpoint", a.address()},
              {"x-session-token", "forged-token-for-" + a.address()}});
    EXPECT_EQ(r.status, 200);
    ++served[Header(r, "x-switchyard-endpoint")];
  }
  // Round robin as if the headers were absent: both get half.
  EXPECT_EQ(served[a.address()], kRequests / 2);
  EXPECT_EQ(served[b.address()], kRequests / 2);
  for (Upstream* u : {&a, &b}) {
    const std::vector<net::HeaderList> requests = u->requests();
    EXPECT_EQ(requests.size(), static_cast<size_t>(kRequests / 2));
    for (const net::HeaderList& headers : requests) {
      for (const auto& [name, value] : headers) {
        EXPECT_NE(name, "x-gateway-destination-endpoint") << value;
        EXPECT_NE(name, "x-session-token") << value;
      }
    }
  }
}

// A completion request whose prompt is token ids first .. first + n - 1.
std::string TokenPrompt(int first, int n) {
  std::string ids;
  for (int i = 0; i < n; ++i)
    ids += fmt::format("{}{}", i == 0 ? "" : ",", first + i);
  return fmt::format(R"({{"model":"m","prompt":[{}],"max_tokens":1}})", ids);
}

TEST_F(RouterServerTest, ScrapedKvCacheSizeBoundsTheApproximatePrefixIndex) {
  // 2 blocks of 16 tokens: the router's index keeps 2 of its 16-token blocks for it.
  Upstream upstream(200, 0, "vllm:cache_config_info{block_size=\"16\",num_gpu_blocks=\"2\"} 1\n");
  StartRouter({&upstream}, [](RouterConfig& c) {
    c.scheduling_yaml =
        "plugins:\n- type: prefix-cache-scorer\n"
        "  parameters: {mode: approximate, blockSizeTokens: 16}\n";
  });
  WaitForScrapes(1);
  // 32 tokens fit: the repeat is predicted cached. 64 do not: the first blocks are gone (it
  // would be predicted in full under the default lruCapacityPerServer).
  for (const std::string& body :
       {TokenPrompt(1, 32), TokenPrompt(1, 32), TokenPrompt(100, 64), TokenPrompt(100, 64)})
    EXPECT_EQ(Call("POST", "/v1/completions", body).status, 200);
  const std::vector<PromSample> m = Metrics();
  EXPECT_EQ(Sum(m, "switchyard_router_prefix_prompt_tokens_total", {}), 32 + 32 + 64 + 64);
  EXPECT_EQ(Sum(m, "switchyard_router_prefix_predicted_cached_tokens_total", {}), 32);
}

// The prefix-cache scorer predicts without steering (weight 0), round robin picks, and the
// p2p-source-producer names a peer holding at least 16 more of the prompt's tokens.
constexpr char kP2pScheduling[] = R"(plugins:
- type: prefix-cache-scorer
  parameters: {mode: approximate, blockSizeTokens: 16}
- type: round-robin-picker
- type: p2p-source-producer
  parameters: {minExtraTokens: 16}
schedulingProfiles:
- name: default
  plugins:
  - {pluginRef: prefix-cache-scorer, weight: 0}
  - {pluginRef: round-robin-picker}
  - {pluginRef: p2p-source-producer}
)";

// Two upstreams named "a" and "b" (round robin's order) with KV ports 7001 and 7002.
void NameAandBWithKvPorts(RouterConfig& c) {
  c.scheduling_yaml = kP2pScheduling;
  for (size_t i = 0; i < 2; ++i) {
    StaticEndpointConfig& e = c.pools[0].endpoints[i];
    e.spec.name = i == 0 ? "a" : "b";
    e.spec.labels[kKvPortLabel] = fmt::format("700{}", i + 1);
  }
}

constexpr char kKvSourceHeader[] = "x-kv-cache-source-host-port";
using Values = std::vector<std::vector<std::string>>;

TEST_F(RouterServerTest, AKvSourceGoesUpstreamOnlyWhenAPeerHoldsMoreOfThePrompt) {
  Upstream a(200, 0);
  Upstream b(200, 0);
  StartRouter({&a, &b}, &NameAandBWithKvPorts);
  WaitForScrapes(2);
  // Each request also carries a client's own source header, which never goes up.
  const net::HeaderList forged = {{kKvSourceHeader, "10.9.9.9:1"}};
  // 1: a, which holds nothing, nor does b. 2: b, while a holds the 32 tokens: a is the source.
  // 3: a, both hold them. 4: b, a new prompt nobody holds.
  for (const auto& [body, endpoint] :
       std::vector<std::pair<std::string, std::string>>{{TokenPrompt(1, 32), "a"},
                                                        {TokenPrompt(1, 32), "b"},
                                                        {TokenPrompt(1, 32), "a"},
                                                        {TokenPrompt(500, 32), "b"}}) {
    const net::HttpClient::Response r = Call("POST", "/v1/completions", body, forged);
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(Header(r, "x-switchyard-endpoint"), endpoint);
  }
  EXPECT_EQ(a.HeaderValues(kKvSourceHeader), (Values{{}, {}}));
  EXPECT_EQ(b.HeaderValues(kKvSourceHeader), (Values{{"127.0.0.1:7001"}, {}}));
  const std::vector<PromSample> m = Metrics();
  EXPECT_EQ(Sum(m, "switchyard_router_kv_source_requests_total",
                {{"endpoint", "b"}, {"pool", "default"}}),
            1);
  EXPECT_EQ(Sum(m, "switchyard_router_kv_source_requests_total", {}), 1);
}

// An attempt with a source fails (502) and the retry goes to the source itself: the retry
// carries no source, and each attempt its own Authorization.
TEST_F(RouterServerTest, ARetryCarriesNoStaleKvSource) {
  Upstream a(200, 0);
  Upstream b(502, 0);
  StartRouter({&a, &b}, [](RouterConfig& c) {
    NameAandBWithKvPorts(c);
    c.pools[0].endpoints[1].spec.authorization = "Bearer engine-key";
  });
  WaitForScrapes(2);
  net::HttpClient::Response r = Call("POST", "/v1/completions", TokenPrompt(1, 32));
  EXPECT_EQ(Header(r, "x-switchyard-endpoint"), "a");
  r = Call("POST", "/v1/completions", TokenPrompt(1, 32), {{"authorization", "Bearer client-key"}});
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(Header(r, "x-switchyard-endpoint"), "a");
  EXPECT_EQ(b.HeaderValues(kKvSourceHeader), (Values{{"127.0.0.1:7001"}}));
  EXPECT_EQ(b.HeaderValues("authorization"), (Values{{"Bearer engine-key"}}));
  EXPECT_EQ(a.HeaderValues(kKvSourceHeader), (Values{{}, {}}));
  EXPECT_EQ(a.HeaderValues("authorization"), (Values{{}, {"Bearer client-key"}}));
  const std::vector<PromSample> m = Metrics();
  EXPECT_EQ(Sum(m, "switchyard_router_kv_source_requests_total", {{"endpoint", "b"}}), 1);
  EXPECT_EQ(Sum(m, "switchyard_router_kv_source_requests_total", {}), 1);
  EXPECT_EQ(Sum(m, "switchyard_router_upstream_retries_total", {{"endpoint", "b"}}), 1);
}

TEST_F(RouterServerTest, OutlierDetectionEjectsAnEndpointThatFailsRequestsButScrapesFine) {
  Upstream failing(500, 0);  // shortest queue: the scheduler's favourite
  Upstream healthy(200, 5);
  StartRouter({&failing, &healthy}, [](RouterConfig& c) {
    c.outlier_detection.consecutive_5xx = 3;
    c.outlier_detection.base_ejection_time = std::chrono::minutes(5);
  });
  WaitForScrapes(2);
  constexpr int kRequests = 10;
  int served = 0;
  for (int i = 0; i < kRequests; ++i)
    served += Call("POST", "/v1/completions", kBody).status == 200 ? 1 : 0;
  // A 500 is not retried (the engine may have done the work): three reach the client, then
  // the endpoint is out and the rest go to the healthy one.
  EXPECT_EQ(failing.ids().size(), 3u);
  EXPECT_EQ(served, kRequests - 3);
  const std::vector<PromSample> m = Metrics();
  EXPECT_EQ(Sum(m, "switchyard_router_endpoint_ejections_total",
                {{"endpoint", failing.address()}, {"pool", "default"}}),
            1);
  EXPECT_EQ(Sum(m, "switchyard_router_endpoint_ejected", {{"endpoint", failing.address()}}), 1);
  EXPECT_EQ(Sum(m, "switchyard_router_endpoint_ejected", {{"endpoint", healthy.address()}}), 0);
  EXPECT_EQ(Sum(m, "switchyard_router_endpoint_healthy", {{"endpoint", failing.address()}}), 1);
  const std::string debug = Call("GET", "/debug/endpoints", "").body;
  EXPECT_NE(debug.find(R"("outlier":{"ejected":true,)"), std::string::npos) << debug;
  EXPECT_NE(debug.find(R"("ejections":1,)"), std::string::npos) << debug;
}

TEST_F(RouterServerTest, OutlierDetectionEjectsNoMoreThanItsShareOfAPool) {
  Upstream a(500, 0);
  Upstream b(500, 0);
  Upstream c(500, 0);
  // 40% of three is one endpoint; with 10% (the default) one is still allowed.
  StartRouter({&a, &b, &c}, [](RouterConfig& config) {
    config.outlier_detection.consecutive_5xx = 1;
    config.outlier_detection.max_ejection_percent = 40;
  });
  WaitForScrapes(3);
  for (int i = 0; i < 12; ++i)
    EXPECT_EQ(Call("POST", "/v1/completions", kBody).status, 500);
  const std::vector<PromSample> m = Metrics();
  EXPECT_EQ(Sum(m, "switchyard_router_endpoint_ejected", {}), 1);
  EXPECT_EQ(Sum(m, "switchyard_router_endpoint_ejections_total", {}), 1);
  EXPECT_EQ(Sum(m, "switchyard_router_pool_ready_endpoints", {{"pool", "default"}}), 2);
}

TEST_F(RouterServerTest, ClientErrorsNeverEject) {
  Upstream refusing(400, 0);
  StartRouter({&refusing}, [](RouterConfig& c) { c.outlier_detection.consecutive_5xx = 1; });
  WaitForScrapes(1);
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(Call("POST", "/v1/completions", kBody).status, 400);
  EXPECT_EQ(refusing.ids().size(), 5u);
  EXPECT_EQ(Sum(Metrics(), "switchyard_router_endpoint_ejections_total", {}), 0);
}

TEST_F(RouterServerTest, NoHealthyEndpointIs503WithRetryAfter) {
  Upstream gone(200, 0);
  gone.Close();
  StartRouter({&gone}, [](RouterConfig& c) { c.scrape_timeout_ms = 100; });
  // Three failed scrapes take the only endpoint out.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (Sum(Metrics(), "switchyard_router_pool_ready_endpoints", {{"pool", "default"}}) != 0 &&
         std::chrono::steady_clock::now() < deadline) {
  }
  const net::HttpClient::Response r = Call("POST", "/v1/completions", kBody);
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(Header(r, "retry-after"), "1");
  EXPECT_NE(r.body.find(R"("type":"ServiceUnavailableError","param":null,"code":503}})"),
            std::string::npos)
      << r.body;
  EXPECT_EQ(Sum(Metrics(), "switchyard_router_requests_total", {{"code", "503"}}), 1);
}

TEST_F(RouterServerTest, ABufferedRequestMayWaitPastTheFirstByteTimeout) {
  // A non-streamed request queued in a healthy engine gets its head only with its whole
  // completion: the first-byte timeout (a stream's liveness check) does not apply to it,
  // the request timeout does.
  Upstream busy(200, 0);
  busy.SetDelay(std::chrono::milliseconds(1500));
  StartRouter({&busy}, [](RouterConfig& c) {
    c.first_byte_timeout_ms = 300;
    c.request_timeout_ms = 10'000;
  });
  WaitForScrapes(1);
  const net::HttpClient::Response r = Call("POST", "/v1/completions", kBody);
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(busy.ids().size(), 1u);  // not retried either
  EXPECT_EQ(Sum(Metrics(), "switchyard_router_upstream_retries_total", {}), 0);
}

TEST_F(RouterServerTest, ABufferedRequestEndsAtTheRequestTimeout) {
  Upstream stuck(200, 0);
  stuck.SetDelay(std::chrono::milliseconds(1500));
  StartRouter({&stuck}, [](RouterConfig& c) { c.request_timeout_ms = 300; });
  WaitForScrapes(1);
  const net::HttpClient::Response r = Call("POST", "/v1/completions", kBody);
  EXPECT_EQ(r.status, 504) << r.body;
  EXPECT_EQ(stuck.ids().size(), 1u);
}

// The router's /v1/models carries the engine's card (not created 0, max_model_len 0).
TEST_F(RouterServerTest, ModelsCarryTheEnginesCard) {
  Upstream upstream(200, 0);
  StartRouter({&upstream});
  std::string body;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    body = Call("GET", "/v1/models", "").body;
    if (body.find("1700000000") != std::string::npos)
      break;
  }
  EXPECT_EQ(body, R"({"object":"list","data":[{"id":"m","object":"model","created":1700000000,)"
                  R"("owned_by":"vllm","root":"/models/m","parent":null,"max_model_len":1234}]})");
}

// An endpoint's credentials go with its scrapes and, in place of the client's own, with the
// requests forwarded to it; an endpoint without any gets the client's header. The first
// attempt here fails (502) on the keyed endpoint and is retried on the other.
TEST_F(RouterServerTest, CredentialsGoUpstreamInPlaceOfTheClients) {
  Upstream keyed(502, 0);
  Upstream open(200, 5);
  StartRouter({&keyed, &open}, [&](RouterConfig& c) {
    c.pools[0].endpoints[0].spec.authorization = "Bearer engine-key";
    c.pools[0].endpoints[0].spec.credentials = "env ENGINE_KEY";
  });
  WaitForScrapes(2);
  const net::HttpClient::Response r =
      Call("POST", "/v1/completions", kBody, {{"authorization", "Bearer client-key"}});
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(Header(r, "x-switchyard-endpoint"), open.address());
  auto authorizations = [](Upstream& u) {
    std::vector<std::string> out;
    for (const net::HeaderList& headers : u.requests()) {
      for (const auto& [name, value] : headers) {
        if (name == "authorization")
          out.push_back(value);
      }
    }
    return out;
  };
  EXPECT_EQ(authorizations(keyed), std::vector<std::string>{"Bearer engine-key"});
  EXPECT_EQ(authorizations(open), std::vector<std::string>{"Bearer client-key"});
  EXPECT_EQ(keyed.scrape_authorizations(), std::set<std::string>{"Bearer engine-key"});
  EXPECT_EQ(open.scrape_authorizations(), std::set<std::string>{""});
  const std::string debug = Call("GET", "/debug/endpoints", "").body;
  EXPECT_NE(debug.find(R"("credentials":"env ENGINE_KEY")"), std::string::npos) << debug;
  EXPECT_EQ(debug.find("engine-key"), std::string::npos) << debug;
}

// A known path asked with another method is 405 with the allowed method in Allow and an
// OpenAI error body, as the engine answers; an unknown path stays 404. Neither reaches an
// engine.
TEST_F(RouterServerTest, AKnownPathWithAnotherMethodIs405WithAllow) {
  Upstream upstream(200, 0);
  StartRouter({&upstream});
  struct Case {
    std::string method;
    std::string path;
    std::string allowed;
  };
  for (const Case& c : std::vector<Case>{{"GET", "/v1/completions", "POST"},
                                         {"PUT", "/v1/chat/completions", "POST"},
                                         {"POST", "/health", "GET"},
                                         {"DELETE", "/debug/endpoints", "GET"},
                                         {"POST", "/v1/models", "GET"},
                                         {"POST", "/metrics", "GET"}}) {
    const net::HttpClient::Response r = Call(c.method, c.path, "");
    EXPECT_EQ(r.status, 405) << c.method << " " << c.path;
    EXPECT_EQ(Header(r, "allow"), c.allowed) << c.path;
    EXPECT_EQ(Header(r, "content-type"), "application/json");
    EXPECT_EQ(r.body, fmt::format(R"({{"error":{{"message":"Method {} is not allowed on {}; use )"
                                  R"({}.","type":"MethodNotAllowedError","param":null,)"
                                  R"("code":405}}}})",
                                  c.method, c.path, c.allowed));
  }
  const net::HttpClient::Response unknown = Call("GET", "/nope", "");
  EXPECT_EQ(unknown.status, 404);
  EXPECT_EQ(Header(unknown, "allow"), "");
  EXPECT_EQ(unknown.body,
            R"({"error":{"message":"Not Found","type":"NotFoundError","param":null,"code":404}})");
  EXPECT_TRUE(upstream.requests().empty());
}

// Draining: /health says not ready, new requests are refused with 503, Retry-After and
// Connection: close; with nothing in flight the drain is over at once.
TEST_F(RouterServerTest, DrainingRefusesNewRequests) {
  Upstream upstream(200, 0);
  StartRouter({&upstream});
  router_->StartDrain();
  EXPECT_EQ(Call("GET", "/health", "").status, 503);
  const net::HttpClient::Response r = Call("POST", "/v1/completions", kBody);
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(Header(r, "retry-after"), "1");
  EXPECT_EQ(Header(r, "connection"), "close");
  EXPECT_NE(r.body.find("shutting down"), std::string::npos) << r.body;
  EXPECT_TRUE(upstream.requests().empty());
  EXPECT_TRUE(router_->WaitDrained(std::chrono::steady_clock::now()));
}

}  // namespace
}  // namespace switchyard::router
