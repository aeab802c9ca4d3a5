// ReplicaSync against a real redis-server (../../kvx/redis_test_server.h): two replicas, each
// with its own plugins, endpoint table and limiter, learn from each other through the stream;
// observations come from several threads while the sync threads run (TSan); with Redis
// killed a replica fails open and counts it, and shares again once Redis is back.
#include "router/shared/replica_sync.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

#include "../../kvx/redis_test_server.h"
#include "base/logging.h"
#include "router/flow/tenant_table.h"

namespace switchyard::router {
namespace {

using std::chrono::milliseconds;

constexpr char kScheduling[] =
    "plugins:\n"
    "- type: prefix-cache-scorer\n"
    "  parameters: {blockSizeTokens: 4}\n"
    "- type: session-affinity-scorer\n"
    "  parameters: {strategy: session_id}\n"
    "- type: max-score-picker\n"
    "schedulingProfiles:\n"
    "- name: default\n"
    "  plugins:\n"
    "  - {pluginRef: prefix-cache-scorer, weight: 1}\n"
    "  - {pluginRef: session-affinity-scorer, weight: 10}\n"
    "  - {pluginRef: max-score-picker}\n";

// Waits up to 10 s for `done`.
template <typename F>
bool Eventually(F done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline)
      return false;
    std::this_thread::sleep_for(milliseconds(5));
  }
  return true;
}

// One router replica's state and its sync.
struct Replica {
  Replica(const std::string& id, int redis_port) : table(milliseconds(60'000)) {
    auto set = PluginSet::FromYaml(kScheduling, "test");
    EXPECT_TRUE(set.ok()) << set.status();
    plugins = *std::move(set);
    table.SetPoolMembers("p", {{.name = "e0", .address = "127.0.0.1:1", .pool = "p"},
                               {.name = "e1", .address = "127.0.0.1:2", .pool = "p"}});
    flow::TenantsConfig tenants;
    tenants.tenants = {{.id = "t",
                        .api_key_digests = {flow::ApiKeyDigest("key")},
                        .limits = {.requests_per_second = 0.01, .burst = 4}}};
    tenant_table = std::make_unique<flow::TenantTable>(tenants, "secret");
    limiter = std::make_unique<flow::TenantLimiter>(*tenant_table);
    ReplicaSyncOptions options;
    options.redis_port = redis_port;
    options.stream_key = "test:replicas";
    options.replica_id = id;
    options.interval = milliseconds(5);
    options.load_stale = milliseconds(400);
    sync = std::make_unique<ReplicaSync>(options, plugins.get(), &table, limiter.get());
    sync->Start();
    plugins->observers().Install(sync.get());
  }
  ~Replica() {
    plugins->observers().Install(nullptr);
    sync->Stop();
  }

  // The profile's pick for `request` (its OnPicked hooks run, as the router's do).
  std::string Pick(const SchedulingRequest& request) {
    const auto snapshot = Snapshot();
    CycleState cycle;
    ProfileResult result = Run(request, *snapshot, cycle);
    plugins->profile("default")->NotifyPicked(request, cycle, *result.picked[0]);
    return result.picked[0]->name;
  }
  // The endpoint the profile scores highest now, without teaching anything.
  std::string Best(const SchedulingRequest& request) {
    const auto snapshot = Snapshot();
    CycleState cycle;
    ProfileResult result = Run(request, *snapshot, cycle);
    return result.totals[0] > result.totals[1]   ? "e0"
           : result.totals[1] > result.totals[0] ? "e1"
                                                 : "tie";
  }
  int64_t ElsewhereRequests(const std::string& endpoint) {
    const auto snapshot = Snapshot();
    const Endpoint& e = Find(*snapshot, endpoint);
    return e.active_requests() - e.own_active_requests();
  }
  std::shared_ptr<EndpointLoad> Load(const std::string& endpoint) {
    const auto snapshot = Snapshot();
    return Find(*snapshot, endpoint).load;
  }

  std::shared_ptr<const std::vector<Endpoint>> Snapshot() const {
    return table.Snapshot(std::chrono::steady_clock::now());
  }
  ProfileResult Run(const SchedulingRequest& request, const std::vector<Endpoint>& endpoints,
                    CycleState& cycle) {
    Candidates candidates;
    for (const Endpoint& e : endpoints)
      candidates.push_back(&e);
    return plugins->profile("default")->Run(request, cycle, candidates, rng);
  }
  static const Endpoint& Find(const std::vector<Endpoint>& endpoints, const std::string& name) {
    const auto it = std::find_if(endpoints.begin(), endpoints.end(),
                                 [&name](const Endpoint& e) { return e.name == name; });
    EXPECT_NE(it, endpoints.end()) << name;
    return *it;
  }

  std::unique_ptr<PluginSet> plugins;
  EndpointTable table;
  std::unique_ptr<flow::TenantTable> tenant_table;
  std::unique_ptr<flow::TenantLimiter> limiter;
  std::unique_ptr<ReplicaSync> sync;
  std::mt19937_64 rng{1};
};

// Prompt `seed` (0..255): 24 tokens of its own; the request views them (they live on).
SchedulingRequest Request(int seed, std::string session = "") {
  static const std::vector<std::vector<int32_t>> prompts = [] {
    std::vector<std::vector<int32_t>> all(256);
    for (int s = 0; s < 256; ++s) {
      for (int i = 0; i < 24; ++i)
        all[static_cast<size_t>(s)].push_back(s * 100 + i);
    }
    return all;
  }();
  SchedulingRequest r;
  r.model = "m";
  r.prompt_tokens = prompts.at(static_cast<size_t>(seed));
  r.session_id = std::move(session);
  return r;
}

class ReplicaSyncTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(redis_.Start().ok());
    // spdlog's registry is made on first use, inside its (uninstrumented) library: make it
    // here, before the sync threads log, as the router's main does before it starts threads.
    SY_LOG_INFO("replica sync test: redis-server on port {}", redis_.port());
  }
  kvx::RedisTestServer redis_;
};

TEST_F(ReplicaSyncTest, WhatOneReplicaLearnsTheOtherUses) {
  Replica a("a", redis_.port()), b("b", redis_.port());
  ASSERT_TRUE(Eventually([&] { return a.sync->Stats().connected && b.sync->Stats().connected; }));
  // Prefixes a picks for, from several threads at once: b scores their endpoints highest.
  std::vector<std::string> picked(16);
  std::vector<std::thread> threads;
  std::mutex mu;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = t; i < 16; i += 4) {
        const std::string e = [&] {
          std::lock_guard<std::mutex> lock(mu);  // a's rng and picks: one at a time
          return a.Pick(Request(i));
        }();
        picked[static_cast<size_t>(i)] = e;
      }
    });
  }
  for (std::thread& t : threads)
    t.join();
  for (int i = 0; i < 16; ++i) {
    EXPECT_TRUE(Eventually([&] { return b.Best(Request(i)) == picked[static_cast<size_t>(i)]; }))
        << i;
  }
  // A session a bound is bound on b, whatever the prompt.
  const std::string bound = a.Pick(Request(100, "session-1"));
  EXPECT_TRUE(Eventually([&] { return b.Best(Request(200, "session-1")) == bound; }));
  // a's requests in flight count on b.
  std::shared_ptr<EndpointLoad> load = a.Load("e1");
  load->Started(10);
  load->Started(10);
  EXPECT_TRUE(Eventually([&] { return b.ElsewhereRequests("e1") == 2; }));
  EXPECT_EQ(a.ElsewhereRequests("e1"), 0);
  load->Ended(10, 0, true);
  load->Ended(10, 0, true);
  EXPECT_TRUE(Eventually([&] { return b.ElsewhereRequests("e1") == 0; }));
  // The tenant's burst of 4 holds across both: 2 here, 2 there, then neither admits.
  const flow::Tenant& ta = a.tenant_table->tenants()[1];
  const flow::Tenant& tb = b.tenant_table->tenants()[1];
  const auto now = flow::Clock::now();
  ASSERT_EQ(a.limiter->Admit(ta, 1, now), std::nullopt);
  ASSERT_EQ(a.limiter->Admit(ta, 1, now), std::nullopt);
  ASSERT_EQ(b.limiter->Admit(tb, 1, now), std::nullopt);
  ASSERT_EQ(b.limiter->Admit(tb, 1, now), std::nullopt);
  EXPECT_TRUE(Eventually([&] {
    return a.limiter->CheckRequestRate(ta, flow::Clock::now()).has_value() &&
           b.limiter->CheckRequestRate(tb, flow::Clock::now()).has_value();
  }));
  EXPECT_GT(a.sync->Stats().updates_received, 0u);
  EXPECT_EQ(a.sync->Stats().replicas, 1);
}

TEST_F(ReplicaSyncTest, FailsOpenWhileRedisIsDownAndSharesAgainAfter) {
  const int port = redis_.port();
  Replica a("a", port), b("b", port);
  ASSERT_TRUE(Eventually([&] { return a.sync->Stats().connected && b.sync->Stats().connected; }));
  redis_.Kill();
  ASSERT_TRUE(Eventually([&] { return !a.sync->Stats().connected; }));
  EXPECT_GE(a.sync->Stats().errors, 1u);
  // Still scheduling (on its own view), and observations queue, bounded.
  for (int i = 0; i < 8; ++i)
    a.Pick(Request(i));
  ASSERT_TRUE(redis_.Start(port).ok());
  ASSERT_TRUE(Eventually([&] { return a.sync->Stats().connected && b.sync->Stats().connected; }));
  const std::string e = a.Pick(Request(50));
  EXPECT_TRUE(Eventually([&] { return b.Best(Request(50)) == e; }));
}

TEST_F(ReplicaSyncTest, AReplicaThatStartsLaterReadsTheHistory) {
  std::vector<std::string> picked;
  {
    Replica a("a", redis_.port());
    ASSERT_TRUE(Eventually([&] { return a.sync->Stats().connected; }));
    for (int i = 0; i < 8; ++i)
      picked.push_back(a.Pick(Request(i)));
    const uint64_t sent = a.sync->Stats().updates_sent;
    ASSERT_TRUE(Eventually([&] { return a.sync->Stats().updates_sent >= sent + 2; }));
  }
  Replica late("late", redis_.port());
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(late.Best(Request(i)), picked[static_cast<size_t>(i)]) << i;
}

}  // namespace
}  // namespace switchyard::router
