// InferencePool: what the router reads of a Gateway API Inference Extension InferencePool
// (inference.networking.k8s.io/v1): the pod selector (spec.selector.matchLabels) and the
// ports each selected pod serves on (spec.targetPorts[].number). Pure; thread-safe.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

#include "kube/kube_object.h"

namespace switchyard::kube {

struct InferencePool {
  std::map<std::string, std::string> match_labels;
  std::vector<int> target_ports;

  // The label selector of match_labels, "k1=v1,k2=v2" (keys in order).
  std::string LabelSelector() const;
  bool operator==(const InferencePool&) const = default;
};

// InvalidArgument for a spec the router cannot use: no matchLabels (it would select every
// pod in the namespace), no target port, a port outside 1..65535.
absl::StatusOr<InferencePool> DecodeInferencePool(const KubeObject& object);

}  // namespace switchyard::kube
