// ReplicaSync: router replicas that share state through Redis, so that any replica behind
// a load balancer schedules as one router would: the approximate prefix index (a prefix
// routed by one replica is a hit on the others), session_id affinity, tenant quotas, and
// each endpoint's requests in flight.
//
// Every replica appends one ReplicaUpdate (replica_update.h) per sync interval to one Redis
// stream (XADD, trimmed to `history` entries) and reads the others' from it (XREAD BLOCK),
// all on an owned thread, "sy-replicas"; the request path only queues what it learnt
// (SchedulingObserver) under a mutex. A replica applies others' updates to its own state:
// prefixes and sessions through the PluginSet, charges through the TenantLimiter (an update
// older than kStaleCharge is not charged), loads into the endpoints' elsewhere_* counters
// (summed over replicas whose last update is fresher than `load_stale`). A replica that
// starts reads the stream's history first, so it knows the fleet's prefixes and sessions
// before its first request.
//
// Fail-open: when Redis is slow or down each replica keeps scheduling on its local view;
// the sync thread reconnects with backoff (100 ms doubling to 2 s), counts errors, and
// drops what it could not send beyond a bound (counted); on reconnecting it reads on from
// the last entry it saw (what the trimmed stream still holds).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"

#include "base/mutex.h"
#include "kvx/redis_connection.h"
#include "router/endpoint_table.h"
#include "router/flow/tenant_limiter.h"
#include "router/scheduling/picker_config.h"
#include "router/scheduling/scheduling_observer.h"
#include "router/shared/replica_update.h"

namespace switchyard::router {

struct ReplicaSyncOptions {
  std::string redis_host = "127.0.0.1";
  int redis_port = 6379;
  // The stream's key; the replicas of one fleet share it.
  std::string stream_key = "switchyard:router:replicas";
  // This replica's name in its updates (unique among the replicas; the router makes one).
  std::string replica_id;
  std::chrono::milliseconds interval{20};
  // For connecting and for each reply (beyond the XREAD's own block).
  std::chrono::milliseconds timeout{200};
  // Entries the stream keeps (XADD MAXLEN ~), and so what a new replica reads first.
  int64_t history = 2000;
  // Another replica's loads count until its last update is this old.
  std::chrono::milliseconds load_stale{1000};
};

struct ReplicaSyncStats {
  bool connected = false;
  uint64_t updates_sent = 0;
  uint64_t updates_received = 0;  // from other replicas
  uint64_t errors = 0;            // failed connects and commands
  uint64_t dropped = 0;           // observations not sent (queue full while Redis was away)
  uint64_t malformed = 0;         // stream entries that were not ReplicaUpdates
  int64_t replicas = 0;           // others with a fresh update
};

class ReplicaSync final : public SchedulingObserver {
 public:
  // Borrows the three (they outlive the sync); `limiter` may be null (no tenants).
  ReplicaSync(ReplicaSyncOptions options, const PluginSet* plugins, EndpointTable* table,
              flow::TenantLimiter* limiter);
  ~ReplicaSync() override;
  ReplicaSync(const ReplicaSync&) = delete;
  ReplicaSync& operator=(const ReplicaSync&) = delete;

  // Tries to connect and read the history (waiting at most the timeout for it: a Redis
  // that is down leaves the replica on its local view), then starts the thread. Call once.
  void Start();
  // Idempotent: stops and joins the thread.
  void Stop();

  void PrefixLearned(const std::string& endpoint, std::span<const uint64_t> keys) override;
  void SessionBound(std::string_view session_id, const std::string& endpoint) override;

  ReplicaSyncStats Stats() const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Peer {
    std::vector<EndpointLoadShare> load;
    Clock::time_point received;
  };

  void Loop();
  // One round: send this replica's update, read and apply the others'. False when the
  // connection was lost.
  bool Round();
  bool Connect();
  // Reads the stream's history (prefixes and sessions) and sets the read position.
  bool ReadHistory();
  ReplicaUpdate TakeUpdate();
  // Applies one stream entry's updates; its id, or nullopt for a reply that is not an entry.
  std::optional<std::string_view> ApplyEntry(const redisReply* entry, bool history);
  void Apply(const ReplicaUpdate& update, std::string_view entry_id, bool history);
  void PublishLoads(Clock::time_point now);
  void CountError(const absl::Status& status);

  const ReplicaSyncOptions options_;
  const PluginSet* const plugins_;
  EndpointTable* const table_;
  flow::TenantLimiter* const limiter_;

  // Only the sync thread (and Start, before it runs).
  std::optional<kvx::RedisConnection> connection_;
  std::string last_id_ = "0-0";  // the last stream entry read
  bool history_read_ = false;
  Clock::time_point next_send_;
  Clock::time_point last_sent_;
  std::vector<EndpointLoadShare> last_sent_load_;
  std::map<std::string, Peer> peers_;
  std::chrono::milliseconds backoff_{0};

  mutable base::Mutex mu_;
  base::CondVar cv_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<PrefixObservation> prefixes_ ABSL_GUARDED_BY(mu_);
  std::vector<SessionBinding> sessions_ ABSL_GUARDED_BY(mu_);
  ReplicaSyncStats stats_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace switchyard::router
