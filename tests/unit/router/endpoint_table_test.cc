#include "router/endpoint_table.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

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
  load.Ended(100, false);
  load.Ended(50, true);
  snap = *table.Snapshot(t0);
  EXPECT_EQ(snap[0].active_requests(), 0);
  EXPECT_EQ(snap[0].inflight_prompt_tokens(), 0);

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

}  // namespace
}  // namespace switchyard::router
