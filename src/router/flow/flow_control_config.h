// FlowControlConfig: llm-d's `flowControl` section of an EndpointPickerConfig and its
// `featureGates`, read from the config's root YAML node:
//
//   featureGates: [flowControl]          # or "flowControl=true" / "flowControl=false"
//   flowControl:
//     maxRequests: 0                     # all bands' queued requests; 0: no global limit
//     maxBytes: 0                        # their bytes; quantities: 1Gi, 500M, 1k, 1e3
//     defaultRequestTTL: 60s             # queue-wait budget while the pool has endpoints
//     noEndpointRequestTTL: 60s          # ... while it has none; "0s": no eviction then
//     defaultPriorityBand: {maxRequests, maxBytes, fairnessPolicyRef, orderingPolicyRef}
//     defaultNegativePriorityBand: {...} # priorities < 0; absent: defaultPriorityBand
//     priorityBands: [{priority: 10, maxRequests: 100, maxBytes: 1G,
//                      fairnessPolicyRef: round-robin-fairness-policy,
//                      orderingPolicyRef: fcfs-ordering-policy}]
//     saturationDetector: {pluginRef: utilization-detector}
//
// Defaults as llm-d's: a band holds at most 5000 requests and 1G bytes (0 or absent in a band:
// that default; bands are always bounded), global-strict-fairness-policy and
// fcfs-ordering-policy; a band's missing fields take these system defaults, not the
// template's. A priority without a priorityBands entry gets a band from the templates.
// A policy ref names a plugin of the config's `plugins:` whose type is a flow-control policy
// of that kind, or is a built-in type name (flow_policies.h). The saturation detector ref is
// kept as written (the top-level `saturationDetector`, deprecated in llm-d, when flowControl
// has none). `flowControl` without the gate is parsed and checked all the same (llm-d ignores
// it); `enabled` is the gate. Unknown fields are errors, including llm-d's
// usageLimitPolicyPluginRef and enableEviction, which this router does not implement.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

#include "router/flow/flow_item.h"
#include "router/flow/flow_policies.h"

namespace YAML {
class Node;
}  // namespace YAML

namespace switchyard::router::flow {

inline constexpr int64_t kDefaultBandMaxRequests = 5000;
inline constexpr int64_t kDefaultBandMaxBytes = 1'000'000'000;

struct PriorityBandConfig {
  int32_t priority = 0;
  int64_t max_requests = kDefaultBandMaxRequests;  // queued requests; > 0
  int64_t max_bytes = kDefaultBandMaxBytes;        // their bytes; > 0
  FairnessPolicyType fairness = FairnessPolicyType::kGlobalStrict;
  OrderingPolicyType ordering = OrderingPolicyType::kFcfs;
};

struct FlowControlConfig {
  bool enabled = false;                                            // the flowControl feature gate
  int64_t max_requests = 0;                                        // 0: no global limit
  int64_t max_bytes = 0;                                           // 0: no global limit
  Clock::duration default_request_ttl = std::chrono::seconds(60);  // 0: none
  Clock::duration no_endpoint_request_ttl = std::chrono::seconds(60);  // 0: none
  PriorityBandConfig default_band;
  std::optional<PriorityBandConfig> default_negative_band;
  std::vector<PriorityBandConfig> priority_bands;  // distinct priorities, in config order
  std::string saturation_detector = "utilization-detector";

  // The band `priority` gets: its priorityBands entry, else the negative template (priority
  // < 0, when there is one), else the default one; with `priority` set.
  PriorityBandConfig BandFor(int32_t priority) const;
};

// Reads the feature gates and the flowControl section of `root` (an EndpointPickerConfig).
// `plugin_types` maps the config's plugin names to their types, to resolve policy refs.
// Errors are InvalidArgument naming `source` and the field.
absl::StatusOr<FlowControlConfig> ParseFlowControlConfig(
    const YAML::Node& root, const std::map<std::string, std::string>& plugin_types,
    std::string_view source);

}  // namespace switchyard::router::flow
