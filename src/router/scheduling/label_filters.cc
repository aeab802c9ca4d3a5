#include "router/scheduling/label_filters.h"

namespace switchyard::router {

bool LabelSelector::Matches(const Endpoint& endpoint) const {
  for (const auto& [key, value] : match_labels) {
    if (endpoint.Label(key) != value)
      return false;
  }
  for (const LabelExpression& e : match_expressions) {
    const std::optional<std::string> value = endpoint.Label(e.key);
    switch (e.op) {
      case LabelExpression::Op::kIn:
        if (!value.has_value() || !e.values.contains(*value))
          return false;
        break;
      case LabelExpression::Op::kNotIn:
        // Kubernetes: NotIn also matches objects without the key.
        if (value.has_value() && e.values.contains(*value))
          return false;
        break;
      case LabelExpression::Op::kExists:
        if (!value.has_value())
          return false;
        break;
      case LabelExpression::Op::kDoesNotExist:
        if (value.has_value())
          return false;
        break;
    }
  }
  return true;
}

Candidates LabelSelectorFilter::Apply(const SchedulingRequest&, CycleState&,
                                      const Candidates& candidates) {
  Candidates out;
  for (const Endpoint* e : candidates) {
    if (selector_.Matches(*e))
      out.push_back(e);
  }
  return out;
}

RoleFilter RoleFilter::Decode() {
  return RoleFilter({"decode", "prefill-decode", "both", "encode-prefill-decode"}, true);
}

RoleFilter RoleFilter::Prefill() {
  return RoleFilter(
      {"prefill", "encode-prefill", "prefill-decode", "both", "encode-prefill-decode"}, false);
}

Candidates RoleFilter::Apply(const SchedulingRequest&, CycleState&, const Candidates& candidates) {
  Candidates out;
  for (const Endpoint* e : candidates) {
    const std::optional<std::string> role = e->Label(kRoleLabel);
    if (role.has_value() ? roles_.contains(*role) : keep_unlabeled_)
      out.push_back(e);
  }
  return out;
}

}  // namespace switchyard::router
