// Pod: what the router reads of a core/v1 Pod: its name, IP, labels, and whether it can take
// traffic (phase Running, a Ready=True condition, a podIP, no deletionTimestamp: a pod being
// deleted is dropped at once, as endpoint slices mark it terminating). Pure; thread-safe.
#pragma once

#include <map>
#include <string>

#include "absl/status/statusor.h"

#include "kube/kube_object.h"

namespace switchyard::kube {

struct Pod {
  std::string name;
  std::string ip;
  std::map<std::string, std::string> labels;
  bool ready = false;
};

// InvalidArgument when a field the router reads has the wrong type.
absl::StatusOr<Pod> DecodePod(const KubeObject& object);

}  // namespace switchyard::kube
