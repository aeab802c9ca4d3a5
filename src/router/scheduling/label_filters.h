// Label filters, as llm-d's:
//   label-selector-filter  Kubernetes-style matchLabels (all equal) and matchExpressions
//                          (In, NotIn, Exists, DoesNotExist)
//   decode-filter          llm-d.ai/role in {decode, prefill-decode, both,
//                          encode-prefill-decode}, or no role label at all
//   prefill-filter         llm-d.ai/role in {prefill, encode-prefill, prefill-decode, both,
//                          encode-prefill-decode}
// Immutable after construction; any thread.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "router/scheduling/plugin.h"

namespace switchyard::router {

struct LabelExpression {
  enum class Op { kIn, kNotIn, kExists, kDoesNotExist };
  std::string key;
  Op op = Op::kIn;
  std::set<std::string> values;
};

struct LabelSelector {
  std::map<std::string, std::string> match_labels;
  std::vector<LabelExpression> match_expressions;

  bool Matches(const Endpoint& endpoint) const;
};

class LabelSelectorFilter final : public Filter {
 public:
  explicit LabelSelectorFilter(LabelSelector selector) : selector_(std::move(selector)) {}
  Candidates Apply(const SchedulingRequest& request, CycleState& cycle,
                   const Candidates& candidates) override;

 private:
  LabelSelector selector_;
};

// Keeps endpoints whose role label is in `roles`, and, when `keep_unlabeled`, those with
// no role label.
class RoleFilter final : public Filter {
 public:
  static RoleFilter Decode();
  static RoleFilter Prefill();
  Candidates Apply(const SchedulingRequest& request, CycleState& cycle,
                   const Candidates& candidates) override;

 private:
  RoleFilter(std::set<std::string> roles, bool keep_unlabeled)
      : roles_(std::move(roles)), keep_unlabeled_(keep_unlabeled) {}
  std::set<std::string> roles_;
  bool keep_unlabeled_;
};

}  // namespace switchyard::router
