// The flowControl section and featureGates of an EndpointPickerConfig: llm-d's defaults, each
// field, and errors that name their field.
#include "router/flow/flow_control_config.h"

#include <map>
#include <string>

#include "gtest/gtest.h"
#include "yaml-cpp/yaml.h"

namespace switchyard::router::flow {
namespace {

using std::chrono::seconds;

const std::map<std::string, std::string> kPlugins = {
    {"fair", "round-robin-fairness-policy"},
    {"las", "program-aware-fairness"},
    {"deadline", "edf-ordering-policy"},
    {"scorer", "queue-scorer"},
};

absl::StatusOr<FlowControlConfig> Parse(const std::string& yaml) {
  return ParseFlowControlConfig(YAML::Load(yaml), kPlugins, "epp.yaml");
}

TEST(FlowControlConfigTest, DefaultsAreLlmDs) {
  const auto config = Parse("plugins: [{type: queue-scorer}]\n");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_FALSE(config->enabled);
  EXPECT_EQ(config->max_requests, 0);
  EXPECT_EQ(config->max_bytes, 0);
  EXPECT_EQ(config->default_request_ttl, seconds(60));
  EXPECT_EQ(config->no_endpoint_request_ttl, seconds(60));
  EXPECT_EQ(config->default_band.max_requests, 5000);
  EXPECT_EQ(config->default_band.max_bytes, 1'000'000'000);
  EXPECT_EQ(config->default_band.fairness, FairnessPolicyType::kGlobalStrict);
  EXPECT_EQ(config->default_band.ordering, OrderingPolicyType::kFcfs);
  EXPECT_FALSE(config->default_negative_band.has_value());
  EXPECT_TRUE(config->priority_bands.empty());
  EXPECT_EQ(config->saturation_detector, "utilization-detector");
  // Any priority gets the default template.
  const PriorityBandConfig band = config->BandFor(-3);
  EXPECT_EQ(band.priority, -3);
  EXPECT_EQ(band.max_requests, 5000);
}

TEST(FlowControlConfigTest, ReadsEveryField) {
  const auto config = Parse(R"(
featureGates: ["flowControl"]
flowControl:
  maxRequests: 2k
  maxBytes: 1Gi
  defaultRequestTTL: 500ms
  noEndpointRequestTTL: 5m
  defaultPriorityBand: {maxRequests: 100, orderingPolicyRef: slo-deadline-ordering-policy}
  defaultNegativePriorityBand: {maxRequests: 10, maxBytes: 1M, fairnessPolicyRef: fair}
  priorityBands:
  - {priority: 10, maxRequests: 0, maxBytes: 1G, fairnessPolicyRef: las,
     orderingPolicyRef: deadline}
  - {priority: -5, fairnessPolicyRef: global-strict-fairness-policy}
  saturationDetector: {pluginRef: my-detector}
)");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->enabled);
  EXPECT_EQ(config->max_requests, 2000);
  EXPECT_EQ(config->max_bytes, int64_t{1} << 30);
  EXPECT_EQ(config->default_request_ttl, std::chrono::milliseconds(500));
  EXPECT_EQ(config->no_endpoint_request_ttl, std::chrono::minutes(5));
  EXPECT_EQ(config->saturation_detector, "my-detector");

  // A template's missing fields take the system defaults.
  EXPECT_EQ(config->default_band.max_requests, 100);
  EXPECT_EQ(config->default_band.max_bytes, 1'000'000'000);
  EXPECT_EQ(config->default_band.ordering, OrderingPolicyType::kSloDeadline);
  ASSERT_TRUE(config->default_negative_band.has_value());
  EXPECT_EQ(config->default_negative_band->max_bytes, 1'000'000);
  EXPECT_EQ(config->default_negative_band->fairness, FairnessPolicyType::kRoundRobin);
  EXPECT_EQ(config->default_negative_band->ordering, OrderingPolicyType::kFcfs);

  ASSERT_EQ(config->priority_bands.size(), 2u);
  const PriorityBandConfig& high = config->priority_bands[0];
  EXPECT_EQ(high.priority, 10);
  EXPECT_EQ(high.max_requests, 5000);  // "0": the system default
  EXPECT_EQ(high.max_bytes, 1'000'000'000);
  EXPECT_EQ(high.fairness, FairnessPolicyType::kProgramAware);
  EXPECT_EQ(high.ordering, OrderingPolicyType::kEdf);

  // BandFor: an explicit band, the negative template, the default template.
  EXPECT_EQ(config->BandFor(10).fairness, FairnessPolicyType::kProgramAware);
  EXPECT_EQ(config->BandFor(-5).fairness, FairnessPolicyType::kGlobalStrict);
  EXPECT_EQ(config->BandFor(-5).max_requests, 5000);  // not the negative template's
  EXPECT_EQ(config->BandFor(-1).max_requests, 10);
  EXPECT_EQ(config->BandFor(-1).priority, -1);
  EXPECT_EQ(config->BandFor(3).max_requests, 100);
}

TEST(FlowControlConfigTest, GatesAndTheDeprecatedDetectorField) {
  auto config = Parse("featureGates: [flowControl=true]\n");
  ASSERT_TRUE(config.ok());
  EXPECT_TRUE(config->enabled);
  config = Parse("featureGates: [flowControl=false]\nflowControl: {maxRequests: 7}\n");
  ASSERT_TRUE(config.ok());
  EXPECT_FALSE(config->enabled);
  EXPECT_EQ(config->max_requests, 7);  // parsed all the same
  // The top-level saturationDetector (deprecated in llm-d) unless flowControl names one.
  config = Parse("saturationDetector: {pluginRef: old}\n");
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->saturation_detector, "old");
  config = Parse(
      "saturationDetector: {pluginRef: old}\nflowControl: {saturationDetector: {pluginRef: "
      "new}}\n");
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->saturation_detector, "new");
  // A zero TTL disables eviction in that regime.
  config = Parse("flowControl: {defaultRequestTTL: 0s, noEndpointRequestTTL: \"0\"}\n");
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->default_request_ttl, Clock::duration::zero());
  EXPECT_EQ(config->no_endpoint_request_ttl, Clock::duration::zero());
}

TEST(FlowControlConfigTest, ErrorsNameTheirField) {
  const struct {
    std::string yaml;
    std::string message;
  } cases[] = {
      {"featureGates: [flowControl, prefixCache]",
       "epp.yaml: featureGates[1]: unknown feature gate 'prefixCache'"},
      {"featureGates: [flowControl=yes]", "epp.yaml: featureGates[0]: a gate's value is true or"},
      {"featureGates: flowControl", "epp.yaml: featureGates: expected a list"},
      {"flowControl: [1]", "epp.yaml: flowControl: expected a map"},
      {"flowControl: {maxRequests: -1}", "epp.yaml: flowControl.maxRequests: must not be negative"},
      {"flowControl: {maxBytes: 1GB}",
       "epp.yaml: flowControl.maxBytes: expected a quantity such as 1Gi, 500M or 1000, got '1GB'"},
      {"flowControl: {defaultRequestTTL: 60}",
       "epp.yaml: flowControl.defaultRequestTTL: expected a duration such as 60s"},
      {"flowControl: {noEndpointRequestTTL: -1s}",
       "epp.yaml: flowControl.noEndpointRequestTTL: must not be negative"},
      {"flowControl: {enableEviction: true}",
       "epp.yaml: flowControl.enableEviction: unknown or unsupported field"},
      {"flowControl: {priorityBands: {priority: 1}}",
       "epp.yaml: flowControl.priorityBands: expected a list"},
      {"flowControl: {priorityBands: [{priority: 1}, {priority: 2}, {priority: 1}]}",
       "epp.yaml: flowControl.priorityBands[2].priority: duplicate priority 1"},
      {"flowControl: {priorityBands: [{}, {}]}",
       "epp.yaml: flowControl.priorityBands[1].priority: duplicate priority 0"},
      {"flowControl: {priorityBands: [{priority: high}]}",
       "epp.yaml: flowControl.priorityBands[0].priority: expected a 32-bit integer"},
      {"flowControl: {priorityBands: [{priority: 1, maxRequests: -5}]}",
       "epp.yaml: flowControl.priorityBands[0].maxRequests: must not be negative"},
      {"flowControl: {priorityBands: [{priority: 1, maxByte: 5}]}",
       "epp.yaml: flowControl.priorityBands[0].maxByte: unknown or unsupported field"},
      {"flowControl: {priorityBands: [{priority: 1, fairnessPolicyRef: fifo}]}",
       "epp.yaml: flowControl.priorityBands[0].fairnessPolicyRef: unknown fairness policy 'fifo'"},
      {"flowControl: {priorityBands: [{priority: 1, orderingPolicyRef: fair}]}",
       "epp.yaml: flowControl.priorityBands[0].orderingPolicyRef: plugin 'fair' has type "
       "'round-robin-fairness-policy', which is not one of the ordering policies"},
      {"flowControl: {defaultPriorityBand: {fairnessPolicyRef: scorer}}",
       "epp.yaml: flowControl.defaultPriorityBand.fairnessPolicyRef: plugin 'scorer' has type "
       "'queue-scorer', which is not one of the fairness policies"},
      {"flowControl: {defaultNegativePriorityBand: {orderingPolicyRef: "
       "round-robin-fairness-policy}}",
       "epp.yaml: flowControl.defaultNegativePriorityBand.orderingPolicyRef: unknown ordering "
       "policy 'round-robin-fairness-policy'"},
      {"flowControl: {defaultPriorityBand: 5}",
       "epp.yaml: flowControl.defaultPriorityBand: expected a map"},
      {"flowControl: {saturationDetector: {pluginRef: [a]}}",
       "epp.yaml: flowControl.saturationDetector.pluginRef: expected a string"},
      {"flowControl: {saturationDetector: {name: a}}",
       "epp.yaml: flowControl.saturationDetector.name: unknown or unsupported field"},
      {"[1, 2]", "epp.yaml: not a YAML map"},
  };
  for (const auto& c : cases) {
    const auto config = Parse(c.yaml);
    ASSERT_FALSE(config.ok()) << c.yaml;
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument) << c.yaml;
    EXPECT_NE(config.status().message().find(c.message), std::string::npos)
        << c.yaml << "\n  got: " << config.status().message() << "\n  want: " << c.message;
  }
}

}  // namespace
}  // namespace switchyard::router::flow
