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
//
// Staleness. A source whose stream lost events it cannot get back is *stale*: what the
// handler built from it may hold blocks the engine has since evicted. That happens when a
// gap cannot be replayed (no replay endpoint, the replay timed out or overflowed), when a
// payload cannot be decoded (its events are lost), when the source's sockets cannot be made,
// and when the subscriber's loop itself fails. Going stale, the handler gets a synthetic
// AllBlocksCleared batch for the source at once, so that nothing it was told before is
// trusted any more (the router's precise prefix scorer then gives the endpoint no prefix
// credit, as for an engine with nothing cached), and stats() reports stale with the reason.
// The source is fresh again once it is back in order from that clean start: a replay from
// seq 0 ended (asked for at once when the source has a replay endpoint), or, without one,
// the next batch was applied. What is rebuilt is then a subset of the engine's cache, never
// more (blocks whose parent fell out of the replay buffer are skipped by the indexer).
//
// Failures. A source whose sockets cannot be made is retried with back-off (100 ms doubling
// to 5 s); anything that escapes the loop (a ZeroMQ error, a handler that throws) restarts
// the whole loop with the same back-off, with a fresh context and every source re-made
// (stale until resynchronised); restarts() counts those. Nothing ends the thread but Stop.
//
// Threads: AddSource/RemoveSource/Stop/stats/restarts from any thread; the handler runs on
// the subscriber's thread and must not block for long. Owns its thread and ZeroMQ context.
#pragma once

#include <chrono>
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
  int64_t losses = 0;  // times events were lost for good (the source went stale)
  bool stale = false;
  std::string stale_reason;  // why, while stale
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
  // Times the subscriber's loop failed and was restarted.
  int64_t restarts() const;

  static constexpr std::chrono::milliseconds kMinBackoff{100};
  static constexpr std::chrono::milliseconds kMaxBackoff{5'000};

 private:
  struct Command {
    bool add = false;
    KvEventSource source;
  };
  explicit KvEventSubscriber(KvEventHandler handler);
  // Restarts RunLoop with back-off until Stop.
  void Run();
  // One life of the loop: OK when stopping, else what ended it.
  absl::Status RunLoop();
  void Wake() const;
  // Waits up to `timeout` for Stop; true when stopping.
  bool WaitForStop(std::chrono::milliseconds timeout);

  KvEventHandler handler_;
  int wake_fd_ = -1;
  std::thread thread_;

  mutable base::Mutex mu_;
  std::deque<Command> commands_ ABSL_GUARDED_BY(mu_);
  // Every source added and not removed: what a restarted loop makes again.
  absl::flat_hash_map<std::string, KvEventSource> sources_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int64_t restarts_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<std::string, KvEventSourceStats> stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace switchyard::kvx
