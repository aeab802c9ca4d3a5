#include "kube/pod.h"

#include <optional>
#include <string_view>

#include "fmt/format.h"

#include "base/json_fields.h"
#include "base/status_macros.h"

namespace switchyard::kube {

absl::StatusOr<Pod> DecodePod(const KubeObject& object) {
  const std::string source = fmt::format("pod {}", object.Key());
  const base::JsonPath at(source);
  Pod pod;
  pod.name = object.name;
  SY_ASSIGN_OR_RETURN(simdjson::dom::element metadata,
                      base::RequiredField(object.value, "metadata", at));
  const base::JsonPath meta_at = at.Child("metadata");
  SY_ASSIGN_OR_RETURN(pod.labels, DecodeStringMap(metadata, "labels", meta_at));
  SY_ASSIGN_OR_RETURN(std::optional<simdjson::dom::element> deletion,
                      base::FindField(metadata, "deletionTimestamp", meta_at));
  SY_ASSIGN_OR_RETURN(std::optional<simdjson::dom::element> status,
                      base::OptionalField(object.value, "status", at));
  if (!status)
    return pod;
  const base::JsonPath status_at = at.Child("status");
  SY_ASSIGN_OR_RETURN(pod.ip, base::FieldOr<std::string>(*status, "podIP", "", status_at));
  SY_ASSIGN_OR_RETURN(std::string phase,
                      base::FieldOr<std::string>(*status, "phase", "", status_at));
  SY_ASSIGN_OR_RETURN(std::optional<simdjson::dom::array> conditions,
                      base::OptionalField<simdjson::dom::array>(*status, "conditions", status_at));
  bool ready_condition = false;
  if (conditions) {
    size_t i = 0;
    for (simdjson::dom::element condition : *conditions) {
      const base::JsonPath c_at = status_at.Child("conditions").Index(i++);
      SY_ASSIGN_OR_RETURN(std::string type,
                          base::FieldOr<std::string>(condition, "type", "", c_at));
      SY_ASSIGN_OR_RETURN(std::string value,
                          base::FieldOr<std::string>(condition, "status", "", c_at));
      if (type == "Ready")
        ready_condition = value == "True";
    }
  }
  pod.ready = phase == "Running" && ready_condition && !pod.ip.empty() && !deletion.has_value();
  return pod;
}

}  // namespace switchyard::kube
