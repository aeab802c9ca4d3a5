// WatchEvent: one line of a Kubernetes watch stream (`?watch=1`), decoded:
//   {"type":"ADDED|MODIFIED|DELETED|BOOKMARK|ERROR","object":{...}}
// The object is kept as a parsed DOM (shared, immutable) with its metadata's name, namespace
// and resourceVersion read out; an ERROR's object is a metav1.Status whose code 410 means the
// resourceVersion watched from is gone (the caller must list again). Pure functions;
// thread-safe. Never trusts the line: anything malformed is an InvalidArgument.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

#include "kube/kube_object.h"

namespace switchyard::kube {

enum class WatchEventType { kAdded, kModified, kDeleted, kBookmark, kError };

struct WatchEvent {
  WatchEventType type = WatchEventType::kAdded;
  // For kAdded/kModified/kDeleted the object; for kBookmark only resource_version is
  // meaningful; for kError the Status object.
  KubeObject object;
  // kError: the Status's code (410: Gone) and message.
  int64_t error_code = 0;
  std::string error_message;

  bool gone() const { return type == WatchEventType::kError && error_code == 410; }
};

absl::StatusOr<WatchEvent> DecodeWatchEvent(std::string_view line);

}  // namespace switchyard::kube
