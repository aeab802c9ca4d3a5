// KvEventSubscriber: the consumer side of vLLM's KV event stream, for the router's precise
// prefix index. One owned thread holds a ZeroMQ SUB socket per source (engine) and, when the
// source has a replay endpoint, a DEALER socket to ask for what it missed:
//   - joining: the first batch seen with seq > 0 triggers a replay from seq 0 (the replay
//     buffer holds the engine's recent past, so the index starts warm);
//   - a gap (seq > last + 1, messages dropped at the PUB high-water mark or while
//     reconnecting) triggers a replay from last + 1; live batches that arrive meanwhile are
//     held and applied after the replay's end marker, so the handler sees each sequence
//     number once and in order;
//   - seq going backwards means the engine restarted: the handler first gets a synthetic
//     AllBlocksCleared batch, then the new stream.
// Undecodable payloads (untrusted bytes) are counted and skipped.
//
// Threads: AddSource/RemoveSource/Stop/stats from any thread; the handler runs on the
// subscriber's thread and must not block for long. Owns its thread and ZeroMQ context.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"

#include "base/mutex.h"
#include "kvx/kv_events.h"

namespace switchyard::kvx {

struct KvEventSource {
  std::string name;             // the endpoint this stream describes
  std::string endpoint;         // the engine's PUB, e.g. "tcp://10.0.0.7:5557"
  std::string replay_endpoint;  // its replay ROUTER; empty: no replay
  std::string topic;            // subscription prefix ("" = all)
};

struct KvEventSourceStats {
  int64_t batches = 0;        // handed to the handler (live and replayed)
  int64_t replayed = 0;       // of which from replays
  int64_t gaps = 0;           // replays asked for
  int64_t restarts = 0;       // sequence went backwards
  int64_t decode_errors = 0;  // payloads skipped
  int64_t last_seq = -1;
};

using KvEventHandler = std::function<void(const std::string& source, const KvEventBatch& batch)>;

class KvEventSubscriber {
 public:
  static absl::StatusOr<std::unique_ptr<KvEventSubscriber>> Start(KvEventHandler handler);
  ~KvEventSubscriber();
  KvEventSubscriber(const KvEventSubscriber&) = delete;
  KvEventSubscriber& operator=(const KvEventSubscriber&) = delete;

  // Connects to a source (replacing one of the same name). Connection is asynchronous, as
  // ZeroMQ's is; a bad endpoint string is reported in the source's log line and ignored.
  void AddSource(KvEventSource source);
  void RemoveSource(const std::string& name);
  // Closes every socket and joins the thread. Idempotent.
  void Stop();

  KvEventSourceStats stats(const std::string& name) const;

 private:
  struct Command {
    bool add = false;
    KvEventSource source;
  };
  explicit KvEventSubscriber(KvEventHandler handler);
  void Run();
  void Wake();

  KvEventHandler handler_;
  int wake_fd_ = -1;
  std::thread thread_;

  mutable base::Mutex mu_;
  std::deque<Command> commands_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_map<std::string, KvEventSourceStats> stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace switchyard::kvx
