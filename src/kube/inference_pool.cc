#include "kube/inference_pool.h"

#include <optional>

#include "fmt/format.h"

#include "base/json_fields.h"
#include "base/status_macros.h"

namespace switchyard::kube {

std::string InferencePool::LabelSelector() const {
  std::string selector;
  for (const auto& [key, value] : match_labels) {
    if (!selector.empty())
      selector += ',';
    selector.append(key).append("=").append(value);
  }
  return selector;
}

absl::StatusOr<InferencePool> DecodeInferencePool(const KubeObject& object) {
  const std::string source = fmt::format("InferencePool {}", object.Key());
  const base::JsonPath at(source);
  InferencePool pool;
  SY_ASSIGN_OR_RETURN(simdjson::dom::element spec, base::RequiredField(object.value, "spec", at));
  const base::JsonPath spec_at = at.Child("spec");
  SY_ASSIGN_OR_RETURN(simdjson::dom::element selector,
                      base::RequiredField(spec, "selector", spec_at));
  SY_ASSIGN_OR_RETURN(pool.match_labels,
                      DecodeStringMap(selector, "matchLabels", spec_at.Child("selector")));
  if (pool.match_labels.empty())
    return spec_at.Child("selector.matchLabels").Error("must name at least one label");
  SY_ASSIGN_OR_RETURN(
      pool.target_ports,
      base::ParseEach<int>(spec, "targetPorts", spec_at,
                           [](simdjson::dom::element port, const base::JsonPath& port_at,
                              bool) -> absl::StatusOr<int> {
                             SY_ASSIGN_OR_RETURN(int64_t number, base::RequiredField<int64_t>(
                                                                     port, "number", port_at));
                             if (number < 1 || number > 65535)
                               return port_at.Child("number").Error("must be in 1..65535");
                             return static_cast<int>(number);
                           }));
  if (pool.target_ports.empty())
    return spec_at.Child("targetPorts").Error("must name at least one port");
  return pool;
}

}  // namespace switchyard::kube
