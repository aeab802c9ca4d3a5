#include "router/flow/flow_control_config.h"

#include <algorithm>
#include <initializer_list>
#include <set>

#include "fmt/format.h"
#include "yaml-cpp/yaml.h"

#include "base/status_macros.h"
#include "router/flow/internal/k8s_values.h"

namespace switchyard::router::flow {
namespace {

absl::Status Invalid(const std::string& where, std::string_view what) {
  return absl::InvalidArgumentError(fmt::format("{}: {}", where, what));
}

// Every key of `map` is one of `known`.
absl::Status CheckKeys(const YAML::Node& map, const std::string& where,
                       std::initializer_list<std::string_view> known) {
  for (const auto& entry : map) {
    const std::string key = entry.first.Scalar();
    if (std::find(known.begin(), known.end(), key) == known.end())
      return Invalid(fmt::format("{}.{}", where, key), "unknown or unsupported field");
  }
  return absl::OkStatus();
}

// A non-negative quantity field; nullopt when absent.
absl::StatusOr<std::optional<int64_t>> ReadQuantity(const YAML::Node& map, const char* key,
                                                    const std::string& where) {
  const YAML::Node node = map[key];
  if (!node || node.IsNull())
    return std::nullopt;
  const std::string field = fmt::format("{}.{}", where, key);
  const std::optional<int64_t> value =
      node.IsScalar() ? internal::ParseQuantity(node.Scalar()) : std::nullopt;
  if (!value.has_value()) {
    return Invalid(field, fmt::format("expected a quantity such as 1Gi, 500M or 1000, got '{}'",
                                      node.IsScalar() ? node.Scalar() : "a non-scalar"));
  }
  if (*value < 0)
    return Invalid(field, "must not be negative");
  return value;
}

// A non-negative duration field; nullopt when absent.
absl::StatusOr<std::optional<Clock::duration>> ReadDuration(const YAML::Node& map, const char* key,
                                                            const std::string& where) {
  const YAML::Node node = map[key];
  if (!node || node.IsNull())
    return std::nullopt;
  const std::string field = fmt::format("{}.{}", where, key);
  const std::optional<std::chrono::nanoseconds> value =
      node.IsScalar() ? internal::ParseGoDuration(node.Scalar()) : std::nullopt;
  if (!value.has_value()) {
    return Invalid(field, fmt::format("expected a duration such as 60s, 500ms or 2m, got '{}'",
                                      node.IsScalar() ? node.Scalar() : "a non-scalar"));
  }
  if (value->count() < 0)
    return Invalid(field, "must not be negative");
  return std::chrono::duration_cast<Clock::duration>(*value);
}

// A string field; `fallback` when absent.
absl::StatusOr<std::string> ReadString(const YAML::Node& map, const char* key,
                                       const std::string& where, std::string fallback) {
  const YAML::Node node = map[key];
  if (!node || node.IsNull())
    return fallback;
  if (!node.IsScalar())
    return Invalid(fmt::format("{}.{}", where, key), "expected a string");
  return node.Scalar();
}

// A policy ref: the name of a plugin whose type is a policy of this kind, or a built-in type.
template <typename Type>
absl::StatusOr<Type> ResolvePolicy(const std::string& ref, std::string_view kind,
                                   std::optional<Type> (*type_named)(std::string_view),
                                   const std::map<std::string, std::string>& plugin_types,
                                   const std::string& field) {
  if (const auto plugin = plugin_types.find(ref); plugin != plugin_types.end()) {
    if (const std::optional<Type> type = type_named(plugin->second))
      return *type;
    return Invalid(field, fmt::format("plugin '{}' has type '{}', which is not one of the {} "
                                      "policies",
                                      ref, plugin->second, kind));
  }
  if (const std::optional<Type> type = type_named(ref))
    return *type;
  return Invalid(field, fmt::format("unknown {} policy '{}' (neither a plugin's name nor a "
                                    "built-in {} policy type)",
                                    kind, ref, kind));
}

// A band's fields over the system defaults; `priority` only where `with_priority`.
absl::StatusOr<PriorityBandConfig> ReadBand(
    const YAML::Node& node, const std::string& where, bool with_priority,
    const std::map<std::string, std::string>& plugin_types) {
  if (!node.IsMap())
    return Invalid(where, "expected a map");
  SY_RETURN_IF_ERROR(
      CheckKeys(node, where,
                {"priority", "maxRequests", "maxBytes", "fairnessPolicyRef", "orderingPolicyRef"}));
  PriorityBandConfig band;
  if (with_priority) {
    const YAML::Node priority = node["priority"];
    // As llm-d's int field: absent is 0.
    if (priority && !priority.IsNull() &&
        !(priority.IsScalar() && YAML::convert<int32_t>::decode(priority, band.priority))) {
      return Invalid(where + ".priority", "expected a 32-bit integer");
    }
  }
  // "0" or absent: the system default.
  SY_ASSIGN_OR_RETURN(std::optional<int64_t> max_requests,
                      ReadQuantity(node, "maxRequests", where));
  if (max_requests.value_or(0) > 0)
    band.max_requests = *max_requests;
  SY_ASSIGN_OR_RETURN(std::optional<int64_t> max_bytes, ReadQuantity(node, "maxBytes", where));
  if (max_bytes.value_or(0) > 0)
    band.max_bytes = *max_bytes;
  SY_ASSIGN_OR_RETURN(std::string fairness, ReadString(node, "fairnessPolicyRef", where, ""));
  if (!fairness.empty()) {
    SY_ASSIGN_OR_RETURN(band.fairness, ResolvePolicy(fairness, "fairness", &FairnessPolicyTypeNamed,
                                                     plugin_types, where + ".fairnessPolicyRef"));
  }
  SY_ASSIGN_OR_RETURN(std::string ordering, ReadString(node, "orderingPolicyRef", where, ""));
  if (!ordering.empty()) {
    SY_ASSIGN_OR_RETURN(band.ordering, ResolvePolicy(ordering, "ordering", &OrderingPolicyTypeNamed,
                                                     plugin_types, where + ".orderingPolicyRef"));
  }
  return band;
}

// The flowControl gate's value; false when `featureGates` does not name it.
absl::StatusOr<bool> ReadFeatureGates(const YAML::Node& root, std::string_view source) {
  const YAML::Node gates = root["featureGates"];
  if (!gates || gates.IsNull())
    return false;
  const std::string where = fmt::format("{}: featureGates", source);
  if (!gates.IsSequence())
    return Invalid(where, "expected a list");
  bool enabled = false;
  for (size_t i = 0; i < gates.size(); ++i) {
    const std::string field = fmt::format("{}[{}]", where, i);
    if (!gates[i].IsScalar())
      return Invalid(field, "expected a gate name");
    const std::string gate = gates[i].Scalar();
    const size_t eq = gate.find('=');
    const std::string name = gate.substr(0, eq);
    const std::string value = eq == std::string::npos ? "true" : gate.substr(eq + 1);
    if (name != "flowControl")
      return Invalid(field, fmt::format("unknown feature gate '{}' (known: flowControl)", name));
    if (value != "true" && value != "false")
      return Invalid(field, fmt::format("a gate's value is true or false, got '{}'", value));
    enabled = value == "true";
  }
  return enabled;
}

absl::StatusOr<FlowControlConfig> Parse(const YAML::Node& root,
                                        const std::map<std::string, std::string>& plugin_types,
                                        std::string_view source) {
  if (!root.IsMap())
    return Invalid(std::string(source), "not a YAML map");
  FlowControlConfig config;
  SY_ASSIGN_OR_RETURN(config.enabled, ReadFeatureGates(root, source));
  // The deprecated top-level saturationDetector; flowControl's own wins.
  if (const YAML::Node legacy = root["saturationDetector"]; legacy && !legacy.IsNull()) {
    const std::string where = fmt::format("{}: saturationDetector", source);
    if (!legacy.IsMap())
      return Invalid(where, "expected a map");
    SY_ASSIGN_OR_RETURN(config.saturation_detector,
                        ReadString(legacy, "pluginRef", where, config.saturation_detector));
  }
  const YAML::Node fc = root["flowControl"];
  if (!fc || fc.IsNull())
    return config;
  const std::string where = fmt::format("{}: flowControl", source);
  if (!fc.IsMap())
    return Invalid(where, "expected a map");
  SY_RETURN_IF_ERROR(
      CheckKeys(fc, where,
                {"maxRequests", "maxBytes", "defaultRequestTTL", "noEndpointRequestTTL",
                 "defaultPriorityBand", "defaultNegativePriorityBand", "priorityBands",
                 "saturationDetector"}));
  SY_ASSIGN_OR_RETURN(std::optional<int64_t> max_requests, ReadQuantity(fc, "maxRequests", where));
  config.max_requests = max_requests.value_or(0);
  SY_ASSIGN_OR_RETURN(std::optional<int64_t> max_bytes, ReadQuantity(fc, "maxBytes", where));
  config.max_bytes = max_bytes.value_or(0);
  SY_ASSIGN_OR_RETURN(std::optional<Clock::duration> ttl,
                      ReadDuration(fc, "defaultRequestTTL", where));
  config.default_request_ttl = ttl.value_or(config.default_request_ttl);
  SY_ASSIGN_OR_RETURN(std::optional<Clock::duration> no_endpoint_ttl,
                      ReadDuration(fc, "noEndpointRequestTTL", where));
  config.no_endpoint_request_ttl = no_endpoint_ttl.value_or(config.no_endpoint_request_ttl);
  if (const YAML::Node band = fc["defaultPriorityBand"]; band && !band.IsNull()) {
    SY_ASSIGN_OR_RETURN(config.default_band,
                        ReadBand(band, where + ".defaultPriorityBand", false, plugin_types));
  }
  if (const YAML::Node band = fc["defaultNegativePriorityBand"]; band && !band.IsNull()) {
    SY_ASSIGN_OR_RETURN(
        config.default_negative_band,
        ReadBand(band, where + ".defaultNegativePriorityBand", false, plugin_types));
  }
  if (const YAML::Node bands = fc["priorityBands"]; bands && !bands.IsNull()) {
    if (!bands.IsSequence())
      return Invalid(where + ".priorityBands", "expected a list");
    std::set<int32_t> seen;
    for (size_t i = 0; i < bands.size(); ++i) {
      const std::string band_where = fmt::format("{}.priorityBands[{}]", where, i);
      SY_ASSIGN_OR_RETURN(PriorityBandConfig band,
                          ReadBand(bands[i], band_where, true, plugin_types));
      if (!seen.insert(band.priority).second) {
        return Invalid(band_where + ".priority",
                       fmt::format("duplicate priority {}", band.priority));
      }
      config.priority_bands.push_back(band);
    }
  }
  if (const YAML::Node detector = fc["saturationDetector"]; detector && !detector.IsNull()) {
    if (!detector.IsMap())
      return Invalid(where + ".saturationDetector", "expected a map");
    SY_RETURN_IF_ERROR(CheckKeys(detector, where + ".saturationDetector", {"pluginRef"}));
    SY_ASSIGN_OR_RETURN(config.saturation_detector,
                        ReadString(detector, "pluginRef", where + ".saturationDetector",
                                   config.saturation_detector));
  }
  return config;
}

}  // namespace

PriorityBandConfig FlowControlConfig::BandFor(int32_t priority) const {
  for (const PriorityBandConfig& band : priority_bands) {
    if (band.priority == priority)
      return band;
  }
  PriorityBandConfig band =
      priority < 0 && default_negative_band.has_value() ? *default_negative_band : default_band;
  band.priority = priority;
  return band;
}

absl::StatusOr<FlowControlConfig> ParseFlowControlConfig(
    const YAML::Node& root, const std::map<std::string, std::string>& plugin_types,
    std::string_view source) {
  // yaml-cpp throws on some shape mismatches; the checks above return errors first, and this
  // turns whatever slips past into one too.
  try {
    return Parse(root, plugin_types, source);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(fmt::format("{}: flowControl: {}", source, e.what()));
  }
}

}  // namespace switchyard::router::flow
