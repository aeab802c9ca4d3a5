#include "router/shared/replica_sync.h"

#include <algorithm>
#include <charconv>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "fmt/format.h"
#include <hiredis/hiredis.h>

#include "base/logging.h"
#include "base/thread_name.h"

namespace switchyard::router {
namespace {

constexpr std::string_view kWho = "router shared state (Redis)";
constexpr std::string_view kField = "u";
// Observations queued while Redis is away, at most; more are dropped (and counted).
constexpr size_t kMaxQueued = 4096;
// Entries one XREAD returns at most.
constexpr std::string_view kReadCount = "512";
// Charges in an entry older than this are not taken (a replica catching up on the stream).
constexpr std::chrono::milliseconds kStaleCharge{2000};
constexpr std::chrono::milliseconds kMinBackoff{100};
constexpr std::chrono::milliseconds kMaxBackoff{2000};

// The time a stream entry id ("<unix ms>-<seq>") was made; 0 when it is not one.
int64_t EntryMillis(std::string_view id) {
  int64_t ms = 0;
  std::from_chars(id.data(), id.data() + id.size(), ms);
  return ms;
}

int64_t NowMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool IsArray(const redisReply* r) {
  return r != nullptr && r->type == REDIS_REPLY_ARRAY;
}

}  // namespace

ReplicaSync::ReplicaSync(ReplicaSyncOptions options, const PluginSet* plugins, EndpointTable* table,
                         flow::TenantLimiter* limiter)
    : options_(std::move(options)), plugins_(plugins), table_(table), limiter_(limiter) {}

ReplicaSync::~ReplicaSync() {
  Stop();
}

void ReplicaSync::Start() {
  if (Connect())
    ReadHistory();
  thread_ = std::thread([this] { Loop(); });
}

void ReplicaSync::Stop() {
  {
    base::MutexLock lock(&mu_);
    stopping_ = true;
  }
  cv_.NotifyAll();
  if (thread_.joinable())
    thread_.join();
}

void ReplicaSync::PrefixLearned(const std::string& endpoint, std::span<const uint64_t> keys) {
  if (keys.empty())
    return;
  const std::span<const uint64_t> sent = keys.first(std::min(keys.size(), kMaxPrefixKeys));
  base::MutexLock lock(&mu_);
  if (prefixes_.size() + sessions_.size() >= kMaxQueued) {
    ++stats_.dropped;
    return;
  }
  prefixes_.push_back({endpoint, std::vector<uint64_t>(sent.begin(), sent.end())});
}

void ReplicaSync::SessionBound(std::string_view session_id, const std::string& endpoint) {
  if (session_id.size() > kMaxReplicaStringBytes)
    return;
  base::MutexLock lock(&mu_);
  if (prefixes_.size() + sessions_.size() >= kMaxQueued) {
    ++stats_.dropped;
    return;
  }
  sessions_.push_back({std::string(session_id), endpoint});
}

ReplicaSyncStats ReplicaSync::Stats() const {
  base::MutexLock lock(&mu_);
  return stats_;
}

void ReplicaSync::CountError(const absl::Status& status) {
  bool first = false;
  {
    base::MutexLock lock(&mu_);
    first = stats_.connected || stats_.errors == 0;
    stats_.connected = false;
    ++stats_.errors;
  }
  if (first)
    SY_LOG_WARN("router: {}; scheduling on this replica's own view until it is back",
                std::string(status.message()));
}

bool ReplicaSync::Connect() {
  absl::StatusOr<kvx::RedisConnection> c = kvx::RedisConnection::Connect(
      options_.redis_host, options_.redis_port, options_.timeout, std::string(kWho));
  if (!c.ok()) {
    CountError(c.status());
    return false;
  }
  connection_.emplace(*std::move(c));
  bool was_down = false;
  {
    base::MutexLock lock(&mu_);
    was_down = stats_.errors > 0;
    stats_.connected = true;
  }
  if (was_down)
    SY_LOG_INFO("router: {} is back at {}:{}", kWho, options_.redis_host, options_.redis_port);
  backoff_ = std::chrono::milliseconds(0);
  return true;
}

bool ReplicaSync::ReadHistory() {
  const kvx::SigpipeBlock sigpipe_block;
  const std::string count = std::to_string(options_.history);
  const std::string_view argv[] = {"XREVRANGE", options_.stream_key, "+", "-", "COUNT", count};
  absl::StatusOr<kvx::RedisReply> reply = connection_->Command(argv);
  if (!reply.ok()) {
    CountError(reply.status());
    connection_.reset();
    return false;
  }
  history_read_ = true;
  if (!IsArray(reply->get()))
    return true;  // an error reply (a key of another type): nothing to learn from it
  // Newest first: the first entry's id is where reading goes on; apply oldest first.
  const redisReply& entries = **reply;
  if (entries.elements > 0 && IsArray(entries.element[0]) && entries.element[0]->elements > 0)
    last_id_ = std::string(kvx::ReplyText(*entries.element[0]->element[0]));
  for (size_t i = entries.elements; i-- > 0;)
    ApplyEntry(entries.element[i], /*history=*/true);
  return true;
}

ReplicaUpdate ReplicaSync::TakeUpdate() {
  ReplicaUpdate update;
  update.replica_id = options_.replica_id;
  {
    base::MutexLock lock(&mu_);
    update.prefixes.swap(prefixes_);
    update.sessions.swap(sessions_);
  }
  if (limiter_ != nullptr)
    update.charges = limiter_->TakeCharges();
  // The snapshot is held by name: a range-for over `*Snapshot()` would free it mid-loop.
  const std::shared_ptr<const std::vector<Endpoint>> endpoints = table_->Snapshot(Clock::now());
  for (const Endpoint& e : *endpoints) {
    if (e.load == nullptr)
      continue;
    EndpointLoadShare share{e.name, e.load->active_requests.load(std::memory_order_relaxed),
                            e.load->inflight_prompt_tokens.load(std::memory_order_relaxed),
                            e.load->inflight_tokens.load(std::memory_order_relaxed)};
    if (share.requests != 0 || share.prompt_tokens != 0 || share.tokens != 0)
      update.load.push_back(std::move(share));
  }
  return update;
}

bool ReplicaSync::Round() {
  const kvx::SigpipeBlock sigpipe_block;
  Clock::time_point now = Clock::now();
  // At most one update per interval; one with nothing new only as the loads' heartbeat.
  bool sending = false;
  if (now >= next_send_) {
    ReplicaUpdate update = TakeUpdate();
    sending = !update.prefixes.empty() || !update.sessions.empty() || !update.charges.empty() ||
              update.load != last_sent_load_ || now - last_sent_ >= options_.load_stale / 4;
    if (sending) {
      const std::string bytes = EncodeReplicaUpdate(update);
      const std::string history = std::to_string(options_.history);
      const std::string_view xadd[] = {
          "XADD", options_.stream_key, "MAXLEN", "~", history, "*", kField, bytes};
      connection_->Append(xadd);
      last_sent_load_ = std::move(update.load);
      last_sent_ = now;
    }
    next_send_ = now + options_.interval;
  }
  // Waits for the others' updates until the next send is due (XREAD BLOCK 0 would be for
  // ever: at least 1 ms).
  const auto block_ms =
      std::max<int64_t>(1, std::chrono::ceil<std::chrono::milliseconds>(next_send_ - now).count());
  const std::string block = std::to_string(block_ms);
  const std::string_view xread[] = {"XREAD", "COUNT",   kReadCount,          "BLOCK",
                                    block,   "STREAMS", options_.stream_key, last_id_};
  connection_->Append(xread);
  kvx::RedisReply added = sending ? connection_->NextReply() : nullptr;
  kvx::RedisReply read = sending && added == nullptr ? nullptr : connection_->NextReply();
  if (read == nullptr) {
    CountError(connection_->Lost());
    return false;
  }
  for (const redisReply* r : {added.get(), read.get()}) {
    if (r != nullptr && r->type == REDIS_REPLY_ERROR) {
      CountError(absl::UnavailableError(fmt::format("{}: {}", kWho, kvx::ReplyText(*r))));
      return false;
    }
  }
  if (sending) {
    base::MutexLock lock(&mu_);
    ++stats_.updates_sent;
  }
  now = Clock::now();
  // [[key, [[id, [field, value, ...]], ...]]], or nil when the block timed out.
  if (IsArray(read.get()) && read->elements > 0 && IsArray(read->element[0]) &&
      read->element[0]->elements == 2 && IsArray(read->element[0]->element[1])) {
    const redisReply& entries = *read->element[0]->element[1];
    for (size_t i = 0; i < entries.elements; ++i) {
      if (std::optional<std::string_view> id = ApplyEntry(entries.element[i], false))
        last_id_ = std::string(*id);
    }
  }
  PublishLoads(now);
  return true;
}

std::optional<std::string_view> ReplicaSync::ApplyEntry(const redisReply* entry, bool history) {
  // [id, [field, value, ...]]
  if (!IsArray(entry) || entry->elements != 2 || !IsArray(entry->element[1]))
    return std::nullopt;
  const std::string_view id = kvx::ReplyText(*entry->element[0]);
  const redisReply& fields = *entry->element[1];
  for (size_t f = 0; f + 1 < fields.elements; f += 2) {
    if (kvx::ReplyText(*fields.element[f]) != kField)
      continue;
    absl::StatusOr<ReplicaUpdate> update =
        DecodeReplicaUpdate(kvx::ReplyText(*fields.element[f + 1]));
    if (update.ok()) {
      Apply(*update, id, history);
    } else {
      base::MutexLock lock(&mu_);
      ++stats_.malformed;
    }
  }
  return id;
}

void ReplicaSync::Apply(const ReplicaUpdate& update, std::string_view entry_id, bool history) {
  if (update.replica_id == options_.replica_id)
    return;
  // Only this replica's endpoints: a replica with another config must not grow the index.
  absl::flat_hash_set<std::string> endpoints;
  if (!update.prefixes.empty() || !update.sessions.empty()) {
    const std::shared_ptr<const std::vector<Endpoint>> table = table_->Snapshot(Clock::now());
    for (const Endpoint& e : *table)
      endpoints.insert(e.name);
  }
  const auto known = [&endpoints](const std::string& name) { return endpoints.contains(name); };
  for (const PrefixObservation& p : update.prefixes) {
    if (known(p.endpoint))
      plugins_->LearnPrefix(p.endpoint, p.keys);
  }
  for (const SessionBinding& s : update.sessions) {
    if (known(s.endpoint))
      plugins_->BindSession(s.session_id, s.endpoint);
  }
  if (history)
    return;  // what it consumed and had in flight is long gone
  {
    base::MutexLock lock(&mu_);
    ++stats_.updates_received;
  }
  const bool fresh = NowMillis() - EntryMillis(entry_id) <= kStaleCharge.count();
  if (limiter_ != nullptr && fresh) {
    const flow::Clock::time_point now = flow::Clock::now();
    for (const flow::QuotaCharge& charge : update.charges)
      limiter_->ChargeElsewhere(charge, now);
  }
  peers_[update.replica_id] = {update.load, Clock::now()};
}

void ReplicaSync::PublishLoads(Clock::time_point now) {
  struct Sum {
    int64_t requests = 0;
    int64_t prompt_tokens = 0;
    int64_t tokens = 0;
  };
  std::map<std::string, Sum, std::less<>> sums;
  int64_t fresh_peers = 0;
  for (auto it = peers_.begin(); it != peers_.end();) {
    const Clock::duration age = now - it->second.received;
    if (age > options_.load_stale * 10) {  // long gone: forget it
      it = peers_.erase(it);
      continue;
    }
    if (age <= options_.load_stale) {
      ++fresh_peers;
      for (const EndpointLoadShare& share : it->second.load) {
        Sum& sum = sums[share.endpoint];
        sum.requests += share.requests;
        sum.prompt_tokens += share.prompt_tokens;
        sum.tokens += share.tokens;
      }
    }
    ++it;
  }
  const std::shared_ptr<const std::vector<Endpoint>> endpoints = table_->Snapshot(now);
  for (const Endpoint& e : *endpoints) {
    if (e.load == nullptr)
      continue;
    const auto it = sums.find(e.name);
    const Sum sum = it == sums.end() ? Sum{} : it->second;
    e.load->elsewhere_requests.store(sum.requests, std::memory_order_relaxed);
    e.load->elsewhere_prompt_tokens.store(sum.prompt_tokens, std::memory_order_relaxed);
    e.load->elsewhere_tokens.store(sum.tokens, std::memory_order_relaxed);
  }
  base::MutexLock lock(&mu_);
  stats_.replicas = fresh_peers;
}

void ReplicaSync::Loop() {
  base::SetCurrentThreadName("sy-replicas");
  while (true) {
    {
      base::MutexLock lock(&mu_);
      if (stopping_)
        return;
    }
    if (connection_.has_value() || (Connect() && (history_read_ || ReadHistory()))) {
      if (Round())
        continue;
      connection_.reset();
    }
    // Down: this replica runs on its own view. What its tenants consume meanwhile is not
    // owed to the others later, and loads reported before are stale by now.
    if (limiter_ != nullptr)
      limiter_->TakeCharges();
    peers_.clear();
    PublishLoads(Clock::now());
    backoff_ = std::clamp(backoff_ * 2, kMinBackoff, kMaxBackoff);
    base::MutexLock lock(&mu_);
    cv_.WaitUntil(&mu_, Clock::now() + backoff_,
                  [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; });
  }
}

}  // namespace switchyard::router
