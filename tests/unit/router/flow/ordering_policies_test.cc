// The ordering policies, each over a table of items on a fixed clock: the order Before gives.
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "router/flow/edf_ordering_policy.h"
#include "router/flow/fcfs_ordering_policy.h"
#include "router/flow/flow_policies.h"
#include "router/flow/slo_deadline_ordering_policy.h"

namespace switchyard::router::flow {
namespace {

using std::chrono::seconds;

const Clock::time_point kT0 = Clock::time_point() + std::chrono::hours(1);

struct ItemSpec {
  uint64_t seq;
  int enqueued_s;
  int received_s;
  int ttl_s;                 // 0: none
  std::optional<int> slo_s;  // deadline, from kT0
};

// The seqs of `specs` in `policy`'s order.
std::vector<uint64_t> Order(const OrderingPolicy& policy, const std::vector<ItemSpec>& specs) {
  std::vector<QueuedItem> items;
  for (const ItemSpec& s : specs) {
    QueuedItem item;
    item.seq = s.seq;
    item.enqueued = kT0 + seconds(s.enqueued_s);
    item.request.received = kT0 + seconds(s.received_s);
    item.ttl = seconds(s.ttl_s);
    if (s.slo_s.has_value())
      item.request.slo_deadline = kT0 + seconds(*s.slo_s);
    items.push_back(std::move(item));
  }
  std::vector<const QueuedItem*> sorted;
  for (const QueuedItem& item : items)
    sorted.push_back(&item);
  std::sort(sorted.begin(), sorted.end(),
            [&](const QueuedItem* a, const QueuedItem* b) { return policy.Before(*a, *b); });
  std::vector<uint64_t> seqs;
  for (const QueuedItem* item : sorted)
    seqs.push_back(item->seq);
  return seqs;
}

TEST(OrderingPoliciesTest, EachOrdersItsTable) {
  const struct {
    std::string name;
    std::vector<ItemSpec> items;
    std::vector<uint64_t> expected;
  } cases[] = {
      // FCFS: by enqueue time (not receipt), arrival order on a tie.
      {"fcfs-ordering-policy",
       {{1, 5, 0, 60, 1}, {2, 3, 9, 60, std::nullopt}, {3, 5, 0, 0, std::nullopt}, {4, 1, 1, 1, 0}},
       {4, 2, 1, 3}},
      // EDF: enqueue + TTL; no TTL after all with one; equal deadlines by enqueue time.
      {"edf-ordering-policy",
       {{1, 0, 0, 60, std::nullopt},
        {2, 10, 10, 10, std::nullopt},  // deadline 20
        {3, 0, 0, 0, std::nullopt},     // none
        {4, 15, 15, 5, std::nullopt},   // deadline 20, enqueued later than 2
        {5, 0, 0, 0, std::nullopt},     // none, arrived after 3
        {6, 50, 50, 10, std::nullopt}},
       {2, 4, 1, 6, 3, 5}},
      // SLO: earlier deadline first; none after all with one; ties by receipt, then arrival.
      {"slo-deadline-ordering-policy",
       {{1, 0, 5, 60, 30},
        {2, 0, 1, 60, std::nullopt},
        {3, 0, 2, 60, 10},
        {4, 0, 0, 60, 30},  // same deadline as 1, received earlier
        {5, 0, 0, 60, std::nullopt},
        {6, 0, 0, 60, std::nullopt}},
       {3, 4, 1, 5, 6, 2}},
  };
  for (const auto& c : cases) {
    const std::optional<OrderingPolicyType> type = OrderingPolicyTypeNamed(c.name);
    ASSERT_TRUE(type.has_value()) << c.name;
    const std::unique_ptr<OrderingPolicy> policy = MakeOrderingPolicy(*type);
    EXPECT_EQ(policy->type(), c.name);
    EXPECT_EQ(Order(*policy, c.items), c.expected) << c.name;
  }
  EXPECT_FALSE(OrderingPolicyTypeNamed("lifo-ordering-policy").has_value());
  EXPECT_FALSE(OrderingPolicyTypeNamed("round-robin-fairness-policy").has_value());
}

}  // namespace
}  // namespace switchyard::router::flow
