// EndpointScraper against real HTTP engines on loopback (net::HttpServer answering /metrics
// and /v1/models as an engine does): what reaches the endpoint table and EngineModels, the
// credentials the scrapes carry, one scrape in flight per endpoint, and Stop.
#include "router/endpoint_scraper.h"

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "fmt/format.h"
#include "gtest/gtest.h"

#include "base/mutex.h"
#include "net/http_server.h"

namespace switchyard::router {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr char kVllmMetrics[] =
    "vllm:num_requests_waiting 3\nvllm:num_requests_running 2\nvllm:kv_cache_usage_perc 0.25\n"
    "vllm:cache_config_info{block_size=\"16\",num_gpu_blocks=\"100\"} 1\n";
constexpr char kModels[] =
    R"({"object":"list","data":[{"id":"m","object":"model","created":1700000000,)"
    R"("owned_by":"vllm","root":"/models/m","max_model_len":1234}]})";

// An engine answering /metrics with `metrics_status` and `metrics` (or holding the answers
// back until Release) and /v1/models with kModels, recording what it was asked.
class Engine {
 public:
  explicit Engine(int metrics_status = 200, std::string metrics = kVllmMetrics)
      : metrics_status_(metrics_status), metrics_(std::move(metrics)) {
    absl::StatusOr<std::unique_ptr<net::HttpServer>> server = net::HttpServer::Start(
        {}, [this](net::HttpRequest request, std::shared_ptr<net::HttpResponder> r) {
          Handle(request, std::move(r));
        });
    EXPECT_TRUE(server.ok()) << server.status();
    if (server.ok())
      server_ = *std::move(server);
  }
  ~Engine() {
    if (server_ != nullptr)
      server_->Stop();
  }

  std::string address() const { return fmt::format("127.0.0.1:{}", server_->port()); }
  // From now on /metrics requests wait for Release.
  void Hold() {
    base::MutexLock lock(&mu_);
    holding_ = true;
  }
  // Answers the held /metrics requests and stops holding.
  void Release() {
    std::vector<std::shared_ptr<net::HttpResponder>> held;
    {
      base::MutexLock lock(&mu_);
      holding_ = false;
      held.swap(held_);
    }
    for (const std::shared_ptr<net::HttpResponder>& r : held)
      r->Send(metrics_status_, "text/plain", metrics_);
  }
  // Waits (bounded) until /metrics was asked at least `n` times; returns how often it was.
  int AwaitMetricsRequests(int n) {
    base::MutexLock lock(&mu_);
    cv_.WaitUntil(&mu_, Clock::now() + 10s,
                  [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return metrics_requests_ >= n; });
    return metrics_requests_;
  }
  // The Authorization header of each request, "" for none.
  std::vector<std::string> authorizations() {
    base::MutexLock lock(&mu_);
    return authorizations_;
  }

 private:
  void Handle(const net::HttpRequest& request, std::shared_ptr<net::HttpResponder> responder) {
    {
      base::MutexLock lock(&mu_);
      authorizations_.emplace_back(request.Header("authorization").value_or(""));
    }
    if (request.path == "/v1/models") {
      responder->Send(200, "application/json", kModels);
      return;
    }
    {
      base::MutexLock lock(&mu_);
      ++metrics_requests_;
      cv_.NotifyAll();
      if (holding_) {
        held_.push_back(std::move(responder));
        return;
      }
    }
    responder->Send(metrics_status_, "text/plain", metrics_);
  }

  const int metrics_status_;
  const std::string metrics_;
  std::unique_ptr<net::HttpServer> server_;
  base::Mutex mu_;
  base::CondVar cv_;
  bool holding_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::shared_ptr<net::HttpResponder>> held_ ABSL_GUARDED_BY(mu_);
  int metrics_requests_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::string> authorizations_ ABSL_GUARDED_BY(mu_);
};

// Counts the scraper's rounds (after_round) and lets a test wait for them.
class Rounds {
 public:
  std::function<void()> Callback() {
    return [this] {
      base::MutexLock lock(&mu_);
      ++rounds_;
      cv_.NotifyAll();
    };
  }
  // Waits (bounded) until `n` rounds ended; returns how many did.
  int Await(int n) {
    base::MutexLock lock(&mu_);
    cv_.WaitUntil(&mu_, Clock::now() + 10s,
                  [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return rounds_ >= n; });
    return rounds_;
  }

 private:
  base::Mutex mu_;
  base::CondVar cv_;
  int rounds_ ABSL_GUARDED_BY(mu_) = 0;
};

EndpointSpec Spec(const Engine& engine, EngineKind kind = EngineKind::kVllm,
                  std::string authorization = "") {
  EndpointSpec spec;
  spec.name = engine.address();
  spec.address = engine.address();
  spec.engine = kind;
  spec.pool = "p";
  spec.authorization = std::move(authorization);
  return spec;
}

// Polls `done` (what the scraper reports from its client's loop, which no callback shows)
// until it holds or 10 s passed.
bool Eventually(const std::function<bool()>& done) {
  const Clock::time_point deadline = Clock::now() + 10s;
  while (!done()) {
    if (Clock::now() > deadline)
      return false;
    std::this_thread::yield();
  }
  return true;
}

class EndpointScraperTest : public ::testing::Test {
 protected:
  EndpointScraperTest() : table_(10s) {}

  void Start(const std::vector<EndpointSpec>& members, EndpointScraperOptions options) {
    table_.SetPoolMembers("p", members);
    options.model = "m";
    if (!options.after_round)
      options.after_round = rounds_.Callback();
    absl::StatusOr<std::unique_ptr<EndpointScraper>> scraper =
        EndpointScraper::Start(std::move(options), &table_, &models_);
    ASSERT_TRUE(scraper.ok()) << scraper.status();
    scraper_ = *std::move(scraper);
  }
  void TearDown() override {
    if (scraper_ != nullptr)
      scraper_->Stop();
  }

  EndpointStatus Status(const std::string& name) {
    for (const EndpointStatus& s : table_.Statuses(Clock::now())) {
      if (s.endpoint.name == name)
        return s;
    }
    ADD_FAILURE() << "no endpoint " << name;
    return {};
  }

  EndpointTable table_;
  EngineModels models_;
  Rounds rounds_;
  // What on_metrics saw, for a test that sets it: the endpoints, and the table's metrics age
  // for the first.
  base::Mutex seen_mu_;
  std::vector<std::string> seen_ ABSL_GUARDED_BY(seen_mu_);
  double age_when_seen_ ABSL_GUARDED_BY(seen_mu_) = 0;
  std::unique_ptr<EndpointScraper> scraper_;
};

TEST_F(EndpointScraperTest, MetricsAndTheModelCardReachTheTableWithTheCredentials) {
  Engine engine;
  EndpointScraperOptions options;
  options.interval = 20ms;
  options.on_metrics = [this](const std::string& endpoint, const EndpointMetrics& m) {
    base::MutexLock lock(&seen_mu_);
    if (seen_.empty())
      age_when_seen_ = Status(endpoint).metrics_age_s;
    seen_.push_back(endpoint);
    EXPECT_EQ(m.waiting_requests, 3);
    EXPECT_EQ(m.num_gpu_blocks, 100);
    EXPECT_EQ(m.block_size, 16);
  };
  Start({Spec(engine, EngineKind::kVllm, "Bearer engine-key")}, std::move(options));
  ASSERT_TRUE(Eventually([&] { return Status(engine.address()).metrics_age_s >= 0; }));
  {
    base::MutexLock lock(&seen_mu_);
    ASSERT_FALSE(seen_.empty());
    EXPECT_EQ(seen_[0], engine.address());
    EXPECT_EQ(age_when_seen_, -1);  // on_metrics ran before the table had them
  }
  const EndpointStatus status = Status(engine.address());
  EXPECT_TRUE(status.healthy);
  EXPECT_EQ(status.scrape_error, "");
  EXPECT_EQ(status.endpoint.metrics.waiting_requests, 3);
  EXPECT_EQ(status.endpoint.metrics.running_requests, 2);
  EXPECT_DOUBLE_EQ(status.endpoint.metrics.kv_cache_usage, 0.25);
  ASSERT_TRUE(
      Eventually([&] { return models_.Card("m", {engine.address()}).created == 1700000000; }));
  const api::ModelCard card = models_.Card("m", {engine.address()});
  EXPECT_EQ(card.owned_by, "vllm");
  EXPECT_EQ(card.max_model_len, 1234);
  scraper_->Stop();
  for (const std::string& authorization : engine.authorizations())
    EXPECT_EQ(authorization, "Bearer engine-key");
}

TEST_F(EndpointScraperTest, FailedScrapesAreReportedWithTheirReason) {
  Engine unauthorized(401, "");
  Engine broken(500, "");
  Engine garbled(200, "not prometheus {");
  Engine no_metrics(404, "");  // llama-cpp-python's server: no /metrics route
  EndpointScraperOptions options;
  options.interval = 5ms;
  Start({Spec(unauthorized), Spec(broken), Spec(garbled), Spec(no_metrics, EngineKind::kLlamaCpp)},
        std::move(options));
  // Three failures in a row take an endpoint out.
  ASSERT_TRUE(Eventually([&] {
    return !Status(unauthorized.address()).healthy && !Status(broken.address()).healthy &&
           !Status(garbled.address()).healthy;
  }));
  const EndpointStatus keyless = Status(unauthorized.address());
  EXPECT_TRUE(keyless.scrape_unauthorized);
  EXPECT_NE(keyless.scrape_error.find("HTTP 401 on /metrics: the endpoint wants an API key"),
            std::string::npos)
      << keyless.scrape_error;
  EXPECT_EQ(Status(broken.address()).scrape_error, "HTTP 500 on /metrics");
  EXPECT_FALSE(Status(broken.address()).scrape_unauthorized);
  EXPECT_NE(Status(garbled.address()).scrape_error, "");
  // An engine without metrics is reachable: healthy, its metrics never known.
  const EndpointStatus reachable = Status(no_metrics.address());
  EXPECT_TRUE(reachable.healthy);
  EXPECT_EQ(reachable.scrape_error, "");
  EXPECT_EQ(reachable.metrics_age_s, -1);
}

TEST_F(EndpointScraperTest, ASlowEndpointHasOneScrapeInFlight) {
  Engine slow;
  slow.Hold();
  EndpointScraperOptions options;
  options.interval = 1ms;
  options.timeout = 60s;  // the held scrape must not time out meanwhile
  Start({Spec(slow)}, std::move(options));
  ASSERT_EQ(slow.AwaitMetricsRequests(1), 1);
  // Rounds go on while it has not answered, and ask it nothing more.
  const int rounds = rounds_.Await(1) + 20;
  ASSERT_GE(rounds_.Await(rounds), rounds);
  EXPECT_EQ(slow.AwaitMetricsRequests(1), 1);
  // Once it answered, it is scraped again.
  slow.Release();
  EXPECT_GE(slow.AwaitMetricsRequests(2), 2);
}

TEST_F(EndpointScraperTest, StopEndsTheWaitBetweenRoundsAtOnce) {
  Engine engine;
  EndpointScraperOptions options;
  options.interval = 10min;
  Start({Spec(engine)}, std::move(options));
  ASSERT_EQ(rounds_.Await(1), 1);
  const Clock::time_point start = Clock::now();
  scraper_->Stop();
  EXPECT_LT(Clock::now() - start, 5s);
  EXPECT_EQ(rounds_.Await(1), 1);
  scraper_->Stop();  // idempotent
}

}  // namespace
}  // namespace switchyard::router
