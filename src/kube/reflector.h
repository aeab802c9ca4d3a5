// Reflector: keeps a local copy of one collection of API objects current, as client-go's
// reflector and informer store do. It lists the collection, then watches it from the list's
// resourceVersion (with bookmarks), applying each event to its store and calling on_change
// with the whole store after each change. When a watch ends at its timeout it resumes from the
// last resourceVersion seen (an event's or a bookmark's); when the server says that version
// is gone (410) it lists again; any other failure (the server down or restarting, a refused
// token) waits an exponential backoff with jitter (min_backoff doubling to max_backoff, reset
// by a good list or watch) and resumes the watch, or the list if there was none yet.
//
// Threads: Start runs the loop on an owned thread ("sy-kube-<name>"), which makes every
// on_change call. Stop interrupts a list or watch in progress and a backoff wait at once,
// then joins; on_change is not called after Stop returns. stats() from any thread. Owns its
// client.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>

#include "absl/status/status.h"

#include "base/mutex.h"
#include "kube/kube_object.h"
#include "kube/list_watch_client.h"

namespace switchyard::kube {

// The current objects by KubeObject::Key().
using ObjectStore = std::map<std::string, KubeObject>;

struct ReflectorOptions {
  std::string name;  // in logs and the thread's name
  ResourceQuery query;
  int watch_timeout_seconds = 300;
  std::chrono::milliseconds min_backoff{200};
  std::chrono::milliseconds max_backoff{5000};
  // After every change: a list (also an empty one) or an event that changed the store.
  std::function<void(const ObjectStore& objects)> on_change;
};

struct ReflectorStats {
  uint64_t lists = 0;           // successful lists (the first, then each re-list)
  uint64_t watch_restarts = 0;  // watches opened after the first one
  uint64_t errors = 0;          // failed lists and watches
  bool synced = false;          // a list has succeeded
};

class Reflector {
 public:
  Reflector(std::unique_ptr<ListWatchClient> client, ReflectorOptions options);
  ~Reflector();
  Reflector(const Reflector&) = delete;
  Reflector& operator=(const Reflector&) = delete;

  // Call once.
  void Start();
  // Idempotent.
  void Stop();
  ReflectorStats stats() const;

 private:
  void Run();
  // Applies one event to the store; an error when the watch must end (ERROR events).
  absl::Status Apply(WatchEvent event);
  // Counts and logs a failure, then waits the backoff; false when stopped meanwhile.
  bool Backoff(const absl::Status& error);

  const std::unique_ptr<ListWatchClient> client_;
  const ReflectorOptions options_;
  // Only the loop's thread.
  ObjectStore store_;
  std::string resource_version_;
  std::chrono::milliseconds backoff_;
  std::mt19937 random_;

  std::atomic<uint64_t> lists_{0};
  std::atomic<uint64_t> watches_{0};
  std::atomic<uint64_t> errors_{0};
  std::atomic<bool> synced_{false};

  base::Mutex mu_;
  base::CondVar cv_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace switchyard::kube
