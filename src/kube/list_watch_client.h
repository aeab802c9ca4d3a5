// ListWatchClient: what a Reflector needs from the API server: list a collection, then watch
// it from the list's resourceVersion. ApiClient is the real one (HTTPS through libcurl);
// tests give the reflector a scripted one.
//
// Threads: List and Watch are called from one thread (the reflector's); Interrupt from any
// thread, at any time, makes a List or Watch in progress return Cancelled promptly, and every
// later call too.
#pragma once

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "kube/kube_object.h"
#include "kube/watch_event.h"

namespace switchyard::kube {

// A collection and the selectors narrowing it, e.g. path "/api/v1/namespaces/ns/pods",
// label_selector "app=x,tier=y", field_selector "metadata.name=p".
struct ResourceQuery {
  std::string path;
  std::string label_selector;
  std::string field_selector;
};

// The status code a List or Watch returns when the resourceVersion it was given is too old
// (HTTP 410 Gone): the caller must list again.
inline constexpr absl::StatusCode kGoneCode = absl::StatusCode::kOutOfRange;
inline bool IsGone(const absl::Status& status) {
  return status.code() == kGoneCode;
}

class ListWatchClient {
 public:
  using EventFn = std::function<absl::Status(WatchEvent event)>;

  virtual ~ListWatchClient() = default;

  virtual absl::StatusOr<ObjectList> List(const ResourceQuery& query) = 0;
  // Watches from `resource_version` with bookmarks, asking the server to end the watch after
  // `timeout_seconds`. Calls `on_event` for each event in order; an error it returns ends
  // the watch and is returned. OK when the server ended the watch (its timeout).
  virtual absl::Status Watch(const ResourceQuery& query, const std::string& resource_version,
                             int timeout_seconds, const EventFn& on_event) = 0;
  virtual void Interrupt() = 0;
};

}  // namespace switchyard::kube
