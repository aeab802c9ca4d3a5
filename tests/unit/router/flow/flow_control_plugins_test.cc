// An EndpointPickerConfig's flow control as the router builds it: the feature gate, the
// saturation detector it names (llm-d's default made when none is declared), flow-control
// policies declared as plugins; and the FleetGate over an endpoint table.
#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

#include "router/endpoint_table.h"
#include "router/flow/concurrency_detector.h"
#include "router/flow/fleet_gate.h"
#include "router/scheduling/picker_config.h"

namespace switchyard::router::flow {
namespace {

using Clock = std::chrono::steady_clock;

TEST(FlowControlPluginsTest, TheGateOnMakesTheDefaultDetectorWhenNoneIsDeclared) {
  auto set =
      PluginSet::FromYaml("featureGates: [flowControl]\nplugins:\n- type: queue-scorer\n", "t");
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_TRUE((*set)->flow_control().enabled);
  EXPECT_EQ((*set)->flow_control().saturation_detector, "utilization-detector");
  EXPECT_NE((*set)->saturation_detector("utilization-detector"), nullptr);
  // Gate off: flow control is parsed, nothing is made.
  set =
      PluginSet::FromYaml("plugins:\n- type: queue-scorer\nflowControl: {maxRequests: 10}\n", "t");
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_FALSE((*set)->flow_control().enabled);
  EXPECT_EQ((*set)->flow_control().max_requests, 10);
  EXPECT_EQ((*set)->saturation_detector("utilization-detector"), nullptr);
}

TEST(FlowControlPluginsTest, PoliciesAndDetectorsAreFoundByPluginName) {
  auto set = PluginSet::FromYaml(
      "featureGates: [flowControl]\n"
      "plugins:\n"
      "- {type: round-robin-fairness-policy, name: fair}\n"
      "- {type: slo-deadline-ordering-policy, name: slo}\n"
      "- {type: concurrency-detector, name: busy, parameters: {maxConcurrency: 2}}\n"
      "- type: queue-scorer\n"
      "schedulingProfiles:\n- name: default\n  plugins: [{pluginRef: queue-scorer}]\n"
      "flowControl:\n"
      "  priorityBands: [{priority: 5, fairnessPolicyRef: fair, orderingPolicyRef: slo}]\n"
      "  saturationDetector: {pluginRef: busy}\n",
      "t");
  ASSERT_TRUE(set.ok()) << set.status();
  const FlowControlConfig& flow = (*set)->flow_control();
  ASSERT_EQ(flow.priority_bands.size(), 1u);
  EXPECT_EQ(flow.priority_bands[0].fairness, FairnessPolicyType::kRoundRobin);
  EXPECT_EQ(flow.priority_bands[0].ordering, OrderingPolicyType::kSloDeadline);
  EXPECT_NE((*set)->saturation_detector(flow.saturation_detector), nullptr);
}

TEST(FlowControlPluginsTest, MisusesAreErrorsThatSayWhy) {
  for (const auto& [yaml, needle] : std::vector<std::pair<std::string, std::string>>{
           // A policy is not a profile's plugin.
           {"plugins:\n- type: round-robin-fairness-policy\n- type: queue-scorer\n"
            "schedulingProfiles:\n- name: d\n  plugins: [{pluginRef: "
            "round-robin-fairness-policy}]\n",
            "flow-control policy"},
           // The detector flow control names must be one.
           {"featureGates: [flowControl]\nplugins:\n- type: queue-scorer\n"
            "flowControl: {saturationDetector: {pluginRef: queue-scorer}}\n",
            "not a saturation detector"},
           {"featureGates: [flowControl]\nplugins:\n- type: queue-scorer\n"
            "flowControl: {saturationDetector: {pluginRef: missing}}\n",
            "'missing'"},
           {"plugins:\n- type: queue-scorer\n- {type: round-robin-fairness-policy, name: "
            "queue-scorer}\n",
            "duplicate plugin name"},
       }) {
    auto set = PluginSet::FromYaml(yaml, "t");
    ASSERT_FALSE(set.ok()) << yaml;
    EXPECT_NE(set.status().message().find(needle), std::string_view::npos) << set.status();
  }
}

TEST(FleetGateTest, SaturationGatesEveryBandAndIdleCapacitySheddableOnes) {
  EndpointTable table(std::chrono::milliseconds(2000));
  const ConcurrencyDetector detector({.max_concurrency = 2});
  FleetGate gate(&table, &detector);
  const Clock::time_point now = Clock::now();
  // No endpoint: saturated, and the no-endpoint TTL applies.
  EXPECT_FALSE(gate.HasEndpoints());
  EXPECT_FALSE(gate.MayDispatch(0, now));
  EXPECT_DOUBLE_EQ(gate.Saturation(now), 1.0);
  table.SetPoolMembers("p", {EndpointSpec{.name = "a", .address = "a:1", .pool = "p"},
                             EndpointSpec{.name = "b", .address = "b:1", .pool = "p"}});
  table.ReportReachable("a");
  table.ReportReachable("b");
  ASSERT_TRUE(gate.HasEndpoints());
  const std::shared_ptr<const std::vector<Endpoint>> snapshot = table.Snapshot(now);
  ASSERT_EQ(snapshot->size(), 2u);
  EXPECT_TRUE(gate.MayDispatch(0, now));
  EXPECT_TRUE(gate.MayDispatch(-1, now));
  // a full (2 of 2), b at 1 of 2: saturation 0.75; b has room for sheddable work.
  (*snapshot)[0].load->Started(10);
  (*snapshot)[0].load->Started(10);
  (*snapshot)[1].load->Started(10);
  EXPECT_TRUE(gate.MayDispatch(0, now));
  EXPECT_DOUBLE_EQ(gate.Saturation(now), 0.75);
  EXPECT_TRUE(gate.MayDispatch(-1, now));
  // Both full: nothing goes.
  (*snapshot)[1].load->Started(10);
  EXPECT_FALSE(gate.MayDispatch(5, now));
  EXPECT_FALSE(gate.MayDispatch(-1, now));
  for (const Endpoint& e : *snapshot) {
    e.load->Ended(10, 0, true);
    e.load->Ended(10, 0, true);
  }
}

}  // namespace
}  // namespace switchyard::router::flow
