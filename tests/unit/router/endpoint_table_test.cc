#include "router/endpoint_table.h"

#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "net/http_client.h"

namespace switchyard::router {
namespace {

using std::chrono::milliseconds;

EndpointSpec Spec(std::string name) {
  EndpointSpec s;
  s.name = name;
  s.address = name;
  return s;
}

TEST(EndpointTableTest, MembershipHealthStalenessAndInflight) {
  EndpointTable table(milliseconds(2000));
  const auto t0 = EndpointTable::Clock::now();
  table.SetPoolMembers("p", {Spec("a"), Spec("b")});
  std::vector<Endpoint> snap = *table.Snapshot(t0);
  ASSERT_EQ(snap.size(), 2u);
  EXPECT_FALSE(snap[0].metrics.fresh);  // never scraped

  EndpointMetrics m;
  m.waiting_requests = 4;
  table.ReportMetrics("a", m, t0);
  snap = *table.Snapshot(t0 + milliseconds(1000));
  EXPECT_TRUE(snap[0].metrics.fresh);
  EXPECT_EQ(snap[0].metrics.waiting_requests, 4);
  EXPECT_FALSE((*table.Snapshot(t0 + milliseconds(2500)))[0].metrics.fresh);

  // One or two failed scrapes in a row keep "b" routable; the third takes it out; a good
  // scrape brings it back with a fresh count.
  for (int i = 1; i < EndpointTable::kUnhealthyAfterFailures; ++i) {
    table.ReportScrapeFailure("b");
    EXPECT_EQ(table.Snapshot(t0)->size(), 2u) << i;
  }
  table.ReportScrapeFailure("b");
  snap = *table.Snapshot(t0);
  ASSERT_EQ(snap.size(), 1u);
  EXPECT_EQ(snap[0].name, "a");
  table.ReportMetrics("b", m, t0);
  EXPECT_EQ(table.Snapshot(t0)->size(), 2u);
  table.ReportScrapeFailure("b");
  EXPECT_EQ(table.Snapshot(t0)->size(), 2u);
  for (int i = 1; i < EndpointTable::kUnhealthyAfterFailures; ++i)
    table.ReportScrapeFailure("b");
  EXPECT_EQ(table.Snapshot(t0)->size(), 1u);
  table.ReportReachable("b");  // answers, without metrics: routable, metrics unknown
  snap = *table.Snapshot(t0);
  ASSERT_EQ(snap.size(), 2u);
  EXPECT_TRUE(snap[1].metrics.fresh);  // the metrics of the good scrape above are kept

  // Requests account on the load their snapshot handed out; later snapshots see it.
  EndpointLoad& load = *snap[0].load;
  load.Started(100);
  load.Started(50);
  load.PrefillDone(100);
  table.ReportMetrics("a", m, t0);  // a new snapshot: the same load
  snap = *table.Snapshot(t0);
  EXPECT_EQ(snap[0].load.get(), &load);
  EXPECT_EQ(snap[0].active_requests(), 2);
  EXPECT_EQ(snap[0].inflight_prompt_tokens(), 50);
  // Held KV: both prompts and what the first generated.
  load.Generated(7);
  EXPECT_EQ(snap[0].inflight_tokens(), 157);
  load.Ended(100, 7, false);
  load.Ended(50, 0, true);
  snap = *table.Snapshot(t0);
  EXPECT_EQ(snap[0].active_requests(), 0);
  EXPECT_EQ(snap[0].inflight_prompt_tokens(), 0);
  EXPECT_EQ(snap[0].inflight_tokens(), 0);

  // Survivors keep their state; the departed go; other pools are untouched.
  table.SetPoolMembers("q", {Spec("c")});
  table.SetPoolMembers("p", {Spec("a")});
  std::vector<EndpointSpec> members = table.Members();
  ASSERT_EQ(members.size(), 2u);
  snap = *table.Snapshot(t0 + milliseconds(10));
  EXPECT_EQ(snap[0].metrics.waiting_requests, 4);
  EXPECT_NE(table.DebugJson(t0).find("\"name\":\"c\""), std::string::npos);
}

TEST(EndpointTableTest, DebugJsonShowsEachEndpointsEngineKindAndLabels) {
  EndpointTable table(milliseconds(2000));
  EndpointSpec vllm = Spec("v");
  EndpointSpec sglang = Spec("s");
  sglang.engine = EngineKind::kSglang;
  sglang.labels = {{"hw", "h100"}, {kRoleLabel, "decode"}};
  EndpointSpec llamacpp = Spec("l");
  llamacpp.engine = EngineKind::kLlamaCpp;
  table.SetPoolMembers("p", {vllm, sglang, llamacpp});
  const std::string json = table.DebugJson(EndpointTable::Clock::now());
  // In name order: l, s, v.
  EXPECT_NE(json.find(R"({"name":"l","address":"l","pool":"p","engine":"llamacpp","labels":{},)"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find(R"({"name":"s","address":"s","pool":"p","engine":"sglang",)"
                      R"("labels":{"hw":"h100","llm-d.ai/role":"decode"},)"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find(R"({"name":"v","address":"v","pool":"p","engine":"vllm","labels":{},)"),
            std::string::npos)
      << json;
}

// A request handle that only records its cancellation.
class RecordingHandle final : public net::HttpRequestHandle {
 public:
  void Cancel() override { ++cancels; }
  void Resume() override {}
  int cancels = 0;
};

TEST(EndpointTableTest, OutlierEjectionTakesAnEndpointOutForItsTimeAndWakesItsWaiters) {
  OutlierDetectionConfig outlier;
  outlier.consecutive_5xx = 3;
  outlier.base_ejection_time = milliseconds(1000);
  EndpointTable table(milliseconds(2000), outlier);
  const auto t0 = EndpointTable::Clock::now();
  table.SetPoolMembers("p", {Spec("a"), Spec("b")});
  std::shared_ptr<const std::vector<Endpoint>> snap = table.Snapshot(t0);
  EndpointLoad* a = (*snap)[0].load.get();
  // A request waits on "a".
  EndpointWaiter waiter;
  auto handle = std::make_shared<RecordingHandle>();
  a->waiters.Add(&waiter, handle);

  // A success resets the count: two failures, a success, two failures eject nothing.
  EXPECT_FALSE(table.ReportRequestFailure("a", a, t0));
  EXPECT_FALSE(table.ReportRequestFailure("a", a, t0));
  EndpointTable::ReportRequestSuccess(a);
  EXPECT_FALSE(table.ReportRequestFailure("a", a, t0));
  EXPECT_FALSE(table.ReportRequestFailure("a", a, t0));
  EXPECT_EQ(table.Snapshot(t0)->size(), 2u);
  EXPECT_EQ(handle->cancels, 0);
  // The third in a row ejects it, and the waiting request is cancelled (to retry elsewhere).
  EXPECT_TRUE(table.ReportRequestFailure("a", a, t0));
  EXPECT_EQ(handle->cancels, 1);
  EXPECT_TRUE(a->waiters.Remove(&waiter));
  ASSERT_EQ(table.Snapshot(t0)->size(), 1u);
  EXPECT_EQ((*table.Snapshot(t0))[0].name, "b");
  const std::vector<EndpointStatus> statuses = table.Statuses(t0);
  EXPECT_TRUE(statuses[0].ejected);
  EXPECT_TRUE(statuses[0].healthy);  // its scrapes are another matter
  EXPECT_FALSE(statuses[0].routable());
  EXPECT_EQ(statuses[0].ejections, 1u);
  EXPECT_NE(table.DebugJson(t0).find(R"("outlier":{"ejected":true,"ejected_for_s":1.000,)"),
            std::string::npos)
      << table.DebugJson(t0);
  // A request that picked it from an older snapshot is woken as it starts waiting.
  auto late = std::make_shared<RecordingHandle>();
  a->waiters.Add(&waiter, late);
  EXPECT_EQ(late->cancels, 1);
  EXPECT_TRUE(a->waiters.Remove(&waiter));

  // Failures of attempts under way when it was ejected do not add up to the next ejection.
  for (int i = 0; i < 3; ++i)
    EXPECT_FALSE(table.ReportRequestFailure("a", a, t0 + milliseconds(10)));
  EXPECT_EQ(a->consecutive_failures.load(), 0);

  // "b" may not go too while "a" is out (10% of two: one at a time).
  EndpointLoad* b = (*snap)[1].load.get();
  for (int i = 0; i < 5; ++i)
    EXPECT_FALSE(table.ReportRequestFailure("b", b, t0));
  EXPECT_EQ(table.Snapshot(t0)->size(), 1u);

  // Back when its time is up (the cached snapshot knows when), and waiting works again.
  snap = table.Snapshot(t0 + milliseconds(1000));
  ASSERT_EQ(snap->size(), 2u);
  auto fresh = std::make_shared<RecordingHandle>();
  a->waiters.Add(&waiter, fresh);
  EXPECT_FALSE(a->waiters.Remove(&waiter));
  EXPECT_EQ(fresh->cancels, 0);
}

TEST(EndpointTableTest, FailedScrapesWakeTheRequestsWaitingOnTheEndpoint) {
  EndpointTable table(milliseconds(2000));
  const auto t0 = EndpointTable::Clock::now();
  table.SetPoolMembers("p", {Spec("a")});
  EndpointLoad* a = (*table.Snapshot(t0))[0].load.get();
  EndpointWaiter first;
  EndpointWaiter second;
  auto h1 = std::make_shared<RecordingHandle>();
  auto h2 = std::make_shared<RecordingHandle>();
  a->waiters.Add(&first, h1);
  a->waiters.Add(&second, h2);
  EXPECT_FALSE(a->waiters.Remove(&second));  // it got its first byte: not waiting any more
  for (int i = 0; i < EndpointTable::kUnhealthyAfterFailures; ++i)
    table.ReportScrapeFailure("a");
  EXPECT_EQ(h1->cancels, 1);
  EXPECT_EQ(h2->cancels, 0);
  EXPECT_TRUE(a->waiters.Remove(&first));
  EXPECT_FALSE(a->waiters.Remove(&first));  // once
}

}  // namespace
}  // namespace switchyard::router
