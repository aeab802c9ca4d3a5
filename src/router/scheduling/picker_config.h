// EndpointPickerConfig: the router's scheduling configuration, in llm-d's YAML shape
// (apiVersion llm-d.ai/v1alpha1, kind EndpointPickerConfig):
//
//   plugins:            [{type, name?, parameters?}]      name defaults to type
//   schedulingProfiles: [{name, plugins: [{pluginRef, weight?}]}]
//
// with llm-d's loader defaults: no profiles -> one "default" profile holding every
// configured plugin; a profile without a picker gets max-score-picker; a scorer's weight
// defaults to 1. Errors name the offending entry (unknown type, duplicate name, dangling
// pluginRef, a weight on a non-scorer, bad parameters, two pickers in one profile, more than
// one profile without a disagg-profile-handler: the router then runs one for every request,
// as llm-d's single-profile-handler).
//
// Prefill/decode disaggregation, as llm-d's disagg-profile-handler (parameters
// `profiles: {decode, prefill}`, default names "decode" and "prefill", and
// `deciders: {prefill: <pluginRef>}` naming a pd decider, pd_deciders.h): the decode profile
// picks for every request, then the prefill profile only when the decider says so. With the
// handler the config must have both profiles; at most one handler.
//
// p2p-source-producer (p2p_source.h): at most one per profile; under a disagg-profile-handler
// only in the decode profile.
//
// utilization-detector and concurrency-detector (router/flow/): saturation detectors that flow
// control finds by name, and filters when a profile references them. Flow-control policies
// (round-robin-fairness-policy, edf-ordering-policy, ...) may be declared as plugins for the
// flowControl section to name; a profile may not reference them. The featureGates and
// flowControl sections: flow_control_config.h.
//
// The built PluginSet owns the plugins and profiles; immutable after Build, shared by every
// request thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

#include "router/flow/flow_control_config.h"
#include "router/flow/saturation_detector.h"
#include "router/prefix/prefix_index.h"
#include "router/scheduling/p2p_source.h"
#include "router/scheduling/pd_deciders.h"
#include "router/scheduling/plugin.h"
#include "router/scheduling/profile.h"
#include "router/scheduling/scheduling_observer.h"
#include "router/scheduling/session_affinity.h"

namespace YAML {
class Node;
}  // namespace YAML

namespace switchyard::router {

struct PluginSetOptions {
  // Key of the x-session-token HMAC; empty: 32 random bytes (tokens then do not survive a
  // router restart nor work across replicas — give every replica the same secret).
  std::string session_token_secret;
};

// What a disagg-profile-handler runs; views into the PluginSet.
struct DisaggProfiles {
  const SchedulingProfile* decode = nullptr;
  const SchedulingProfile* prefill = nullptr;
  const PdDecider* decider = nullptr;
};

class PluginSet {
 public:
  // Parses and builds from YAML text; `source` names it in errors.
  static absl::StatusOr<std::unique_ptr<PluginSet>> FromYaml(std::string_view yaml,
                                                             std::string_view source,
                                                             const PluginSetOptions& options = {});
  const SchedulingProfile* profile(const std::string& name) const;
  // The index the engines' KV events feed (KvEventIndexer), when a prefix-cache-scorer runs
  // in precise mode; null otherwise.
  PrefixIndex* precise_index() const { return precise_index_.get(); }
  // Issues the x-session-token the router returns with each response, when a
  // session-affinity plugin of the token strategy (encoded_endpoint_header) reads it back;
  // null otherwise (as llm-d, no token then).
  const SessionTokenCodec* session_codec() const {
    return issues_session_tokens_ ? session_codec_.get() : nullptr;
  }
  const std::vector<std::unique_ptr<SchedulingProfile>>& profiles() const { return profiles_; }
  // The profile every request runs first: the handler's decode profile, else the only one.
  const SchedulingProfile* primary_profile() const {
    return disagg_.has_value() ? disagg_->decode : profiles_.front().get();
  }
  // Set when a disagg-profile-handler is configured.
  const std::optional<DisaggProfiles>& disagg() const { return disagg_; }
  // The saturation detector plugin named `ref` (utilization-detector, concurrency-detector);
  // null when no plugin of that name is one.
  const flow::SaturationDetector* saturation_detector(const std::string& ref) const;
  // The feature gates and flowControl section (flow_control_config.h). When the gate is on,
  // saturation_detector(flow_control().saturation_detector) is set: llm-d's default
  // utilization-detector is made when the config declares none.
  const flow::FlowControlConfig& flow_control() const { return flow_control_; }

  // What an endpoint's metrics say of its KV cache (vllm:cache_config_info num_gpu_blocks and
  // block_size; sglang's num_pages and page_size). As llm-d's auto-tuned prefix index, each
  // prefix index then keeps at most that many tokens' worth of the endpoint's keys, in blocks
  // of the index (the smallest blockSizeTokens among the plugins sharing it); unknown (0):
  // lruCapacityPerServer. Thread-safe (the indexes lock).
  void SetEndpointKvCache(const std::string& endpoint, int64_t num_blocks,
                          int32_t block_size) const;

  // Where the plugins report what other replicas should learn (scheduling_observer.h).
  ObserverSlot& observers() { return observers_; }
  // What another replica learnt: `endpoint` holds the prefix `keys` (the approximate index's
  // keys; a no-op without an approximate prefix plugin), and a session is bound to
  // `endpoint` (the session_id plugins). Neither is reported to the observer again.
  void LearnPrefix(const std::string& endpoint, std::span<const uint64_t> keys) const;
  void BindSession(std::string_view session_id, const std::string& endpoint) const;

 private:
  struct Owned {
    std::string type;
    std::unique_ptr<Filter> filter;
    std::unique_ptr<Scorer> scorer;
    std::unique_ptr<Picker> picker;
    PreRequest* pre_request = nullptr;  // points into one of the above
    std::unique_ptr<PdDecider> decider = nullptr;
    std::unique_ptr<P2pSourceProducer> p2p_source = nullptr;
    const flow::SaturationDetector* detector = nullptr;  // points into `filter`
  };

  static absl::StatusOr<std::unique_ptr<PluginSet>> Build(const YAML::Node& root,
                                                          std::string_view source,
                                                          const PluginSetOptions& options);

  std::map<std::string, Owned> plugins_;  // by name
  // Shared by the prefix scorers of each mode.
  std::unique_ptr<PrefixIndex> approx_index_;
  std::unique_ptr<PrefixIndex> precise_index_;
  int32_t approx_block_size_ = 0;
  int32_t precise_block_size_ = 0;
  std::unique_ptr<SessionTokenCodec> session_codec_;
  bool issues_session_tokens_ = false;
  ObserverSlot observers_;
  std::vector<SessionAffinity*> session_plugins_;  // of the session_id strategy, in plugins_
  std::vector<std::unique_ptr<SchedulingProfile>> profiles_;
  std::optional<DisaggProfiles> disagg_;
  flow::FlowControlConfig flow_control_;
};

}  // namespace switchyard::router
