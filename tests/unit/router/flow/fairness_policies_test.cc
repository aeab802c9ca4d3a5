// The fairness policies, table-driven on a fixed clock: a band's flows with queued heads, the
// sequence of flows each policy picks as it dispatches one head at a time.
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "router/flow/fcfs_ordering_policy.h"
#include "router/flow/flow_policies.h"
#include "router/flow/program_aware_fairness_policy.h"

namespace switchyard::router::flow {
namespace {

using std::chrono::seconds;

const Clock::time_point kT0 = Clock::time_point() + std::chrono::hours(1);

struct Flow {
  std::string id;
  double weight;
  std::vector<std::pair<int, int64_t>> items;  // (enqueued s, cost tokens)
};

// Dispatches every item through `policy` at `now`, one pick at a time (every flow under its
// limits), and returns the flow ids in pick order.
std::vector<std::string> Drain(FairnessPolicy& policy, const std::vector<Flow>& flows,
                               Clock::time_point now) {
  std::map<std::string, std::deque<QueuedItem>> queues;
  std::map<std::string, double> weights;
  uint64_t seq = 0;
  for (const Flow& f : flows) {
    weights[f.id] = f.weight;
    for (const auto& [enqueued_s, cost] : f.items) {
      QueuedItem item;
      item.seq = ++seq;
      item.enqueued = kT0 + seconds(enqueued_s);
      item.request.cost_tokens = cost;
      queues[f.id].push_back(std::move(item));
    }
  }
  const FcfsOrderingPolicy fcfs;
  std::vector<std::string> picks;
  while (true) {
    std::vector<FlowCandidate> candidates;
    for (const auto& [id, queue] : queues) {
      if (!queue.empty())
        candidates.push_back({id, &queue.front(), weights[id]});
    }
    if (candidates.empty())
      return picks;
    const FlowCandidate& pick = candidates[policy.Pick(candidates, fcfs, now)];
    policy.Dispatched(pick, now);
    picks.push_back(std::string(pick.flow_id));
    queues[std::string(pick.flow_id)].pop_front();
  }
}

TEST(FairnessPoliciesTest, EachPicksFlowsInItsOrder) {
  const struct {
    std::string name;
    std::vector<Flow> flows;
    std::vector<std::string> expected;
  } cases[] = {
      // One queue across flows: the ordering policy's first head (FCFS) wherever it is.
      {"global-strict-fairness-policy",
       {{"a", 1, {{0, 1}, {1, 1}, {5, 1}}}, {"b", 1, {{2, 1}, {3, 1}}}, {"c", 1, {{4, 1}}}},
       {"a", "a", "b", "b", "c", "a"}},
      // Turns in flow id order, whatever the heads' ages; a drained flow drops out.
      {"round-robin-fairness-policy",
       {{"a", 1, {{9, 1}, {9, 1}, {9, 1}}}, {"b", 1, {{0, 1}}}, {"c", 1, {{5, 1}, {5, 1}}}},
       {"a", "b", "c", "a", "c", "a"}},
      // Least attained service: a's requests cost 300 tokens, b's 100; equal service (and
      // equal waits) go to the first flow by id.
      {"program-aware-fairness",
       {{"a", 1, {{0, 300}, {0, 300}, {0, 300}, {0, 300}}},
        {"b", 1, {{0, 100}, {0, 100}, {0, 100}, {0, 100}}}},
       {"a", "b", "b", "b", "a", "b", "a", "a"}},
      // The same with b's requests costing 300 at weight 3: the same turns.
      {"program-aware-fairness",
       {{"a", 1, {{0, 300}, {0, 300}, {0, 300}, {0, 300}}},
        {"b", 3, {{0, 300}, {0, 300}, {0, 300}, {0, 300}}}},
       {"a", "b", "b", "b", "a", "b", "a", "a"}},
      // On a cold start the older head goes first.
      {"program-aware-fairness", {{"a", 1, {{5, 10}}}, {"b", 1, {{1, 10}}}}, {"b", "a"}},
  };
  for (const auto& c : cases) {
    const std::optional<FairnessPolicyType> type = FairnessPolicyTypeNamed(c.name);
    ASSERT_TRUE(type.has_value()) << c.name;
    const std::unique_ptr<FairnessPolicy> policy = MakeFairnessPolicy(*type);
    EXPECT_EQ(policy->type(), c.name);
    EXPECT_EQ(Drain(*policy, c.flows, kT0 + seconds(10)), c.expected) << c.name;
  }
  EXPECT_FALSE(FairnessPolicyTypeNamed("fcfs-ordering-policy").has_value());
  EXPECT_FALSE(FairnessPolicyTypeNamed("program-aware-fairness-policy").has_value());
}

TEST(FairnessPoliciesTest, RoundRobinResumesAfterTheLastFlowEvenWhenItLeft) {
  auto policy = MakeFairnessPolicy(FairnessPolicyType::kRoundRobin);
  const FcfsOrderingPolicy fcfs;
  QueuedItem head;
  const std::vector<FlowCandidate> abc = {{"a", &head, 1}, {"b", &head, 1}, {"c", &head, 1}};
  EXPECT_EQ(policy->Pick(abc, fcfs, kT0), 0u);
  policy->Dispatched(abc[1], kT0);  // b went last
  // b has nothing queued now: c is next, then a wraps around.
  const std::vector<FlowCandidate> ac = {{"a", &head, 1}, {"c", &head, 1}};
  EXPECT_EQ(policy->Pick(ac, fcfs, kT0), 1u);
  policy->Dispatched(ac[1], kT0);
  EXPECT_EQ(policy->Pick(ac, fcfs, kT0), 0u);
}

TEST(FairnessPoliciesTest, AttainedServiceDecaysWithItsHalfLife) {
  ProgramAwareFairnessPolicy policy(
      {.weight_service = 0.8, .weight_head_wait = 0.2, .half_life = seconds(60)});
  QueuedItem item;
  item.request.cost_tokens = 1000;
  item.enqueued = kT0;
  policy.Dispatched({"a", &item, 1}, kT0);
  policy.Dispatched({"b", &item, 4}, kT0);  // weight 4: a quarter of the service
  EXPECT_DOUBLE_EQ(policy.AttainedService("a", kT0), 1000);
  EXPECT_DOUBLE_EQ(policy.AttainedService("b", kT0), 250);
  EXPECT_DOUBLE_EQ(policy.AttainedService("a", kT0 + seconds(60)), 500);
  EXPECT_DOUBLE_EQ(policy.AttainedService("a", kT0 + seconds(120)), 250);
  EXPECT_EQ(policy.AttainedService("c", kT0), 0);
  // Charged again a minute later: the decayed 500 plus 1000.
  policy.Dispatched({"a", &item, 1}, kT0 + seconds(60));
  EXPECT_DOUBLE_EQ(policy.AttainedService("a", kT0 + seconds(60)), 1500);

  // a (1500 decaying) against c (nothing yet): c goes first even with the younger head.
  QueuedItem old_head;
  old_head.enqueued = kT0;
  QueuedItem young_head;
  young_head.enqueued = kT0 + seconds(59);
  const FcfsOrderingPolicy fcfs;
  const std::vector<FlowCandidate> ac = {{"a", &old_head, 1}, {"c", &young_head, 1}};
  EXPECT_EQ(policy.Pick(ac, fcfs, kT0 + seconds(60)), 1u);
  // Ten half-lives on, a's service is down to about a token and a half: still more than c's
  // none, and min-max normalisation makes any difference in service outweigh the wait (0.8
  // against 0.2).
  EXPECT_EQ(policy.Pick(ac, fcfs, kT0 + seconds(660)), 1u);
  // Once a's service has decayed below a token it is forgotten: then equal, and the older
  // head wins.
  EXPECT_EQ(policy.Pick(ac, fcfs, kT0 + seconds(60 * 13)), 0u);
  EXPECT_EQ(policy.AttainedService("a", kT0 + seconds(60 * 13)), 0);
}

}  // namespace
}  // namespace switchyard::router::flow
