#include "engine/kv_connector.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "fmt/format.h"

#include "base/logging.h"
#include "base/status_macros.h"
#include "base/thread_name.h"

namespace switchyard::engine {

// What the producer lends, shared by the engine loop (adds, answers, frees) and the block
// server's threads (lookups, reads, releases): P/D leases (a finished sequence's blocks) and
// prefixes lent to peers (blocks the loop pinned for a lookup).
class KvConnector::LeaseTable : public kvx::PeerBlockSource {
 public:
  LeaseTable(std::function<void()> wake, Clock::duration lookup_wait, Clock::duration lent_for)
      : wake_(std::move(wake)), lookup_wait_(lookup_wait), lent_for_(lent_for) {}

  void Add(SeqId seq, std::span<const BlockId> blocks, Clock::time_point deadline) {
    base::MutexLock lock(&mu_);
    AddLocked(seq, blocks, deadline);
  }

  // Called between engine steps: O(1) unless a lease was released, a read ended, or the
  // earliest deadline passed.
  std::vector<EndedLease> TakeEnded(Clock::time_point now) {
    base::MutexLock lock(&mu_);
    if (!maybe_ended_ && (!next_deadline_ || now < *next_deadline_))
      return {};
    maybe_ended_ = false;
    std::vector<uint64_t> ended_ids;
    next_deadline_.reset();
    for (const auto& [id, lease] : leases_) {
      if (lease.readers == 0 && (lease.released || lease.deadline <= now)) {
        ended_ids.push_back(id);
      } else if (lease.deadline > now && (!next_deadline_ || lease.deadline < *next_deadline_)) {
        // A lease past its deadline but still being read ends when the read does (EndRead
        // wakes the loop): it sets no deadline, so an idle loop does not spin on it.
        next_deadline_ = lease.deadline;
      }
    }
    std::vector<EndedLease> ended;
    for (uint64_t id : ended_ids) {
      const Lease& lease = leases_.at(id);
      EndedLease& end = ended.emplace_back();
      end.seq = lease.seq;
      if (!lease.seq.has_value())
        end.pinned = lease.blocks;
      end.expired = !lease.released;
      Remove(id);
    }
    return ended;
  }

  std::optional<Clock::time_point> NextDeadline() const {
    base::MutexLock lock(&mu_);
    return next_deadline_;
  }

  // A peer's prefix lookup: handed to the engine loop (which owns the pool), answered by
  // Answer, given up after lookup_wait_.
  absl::StatusOr<kvx::PeerLookupResult> Lookup(std::span<const kvx::PeerDigest> hashes) override {
    uint64_t id = 0;
    {
      base::MutexLock lock(&mu_);
      if (stopped_)
        return absl::UnavailableError("the engine is stopping");
      id = next_lookup_++;
      PendingLookup& pending = lookups_.emplace_back();
      pending.id = id;
      pending.hashes.reserve(hashes.size());
      for (const kvx::PeerDigest& hash : hashes)
        pending.hashes.push_back(BlockHash{hash});
      waiting_.insert(id);
    }
    if (wake_)
      wake_();
    base::MutexLock lock(&mu_);
    const bool answered = cv_.WaitUntil(&mu_, Clock::now() + lookup_wait_,
                                        [this, id]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
                                          return answers_.contains(id) || stopped_;
                                        });
    waiting_.erase(id);
    auto answer = answers_.find(id);
    if (!answered || answer == answers_.end()) {
      std::erase_if(lookups_, [id](const PendingLookup& p) { return p.id == id; });
      return stopped_ ? absl::UnavailableError("the engine is stopping")
                      : absl::DeadlineExceededError("the engine loop did not answer in time");
    }
    kvx::PeerLookupResult result = std::move(answer->second);
    answers_.erase(answer);
    return result;
  }

  std::vector<PendingLookup> TakeLookups() {
    base::MutexLock lock(&mu_);
    return std::exchange(lookups_, {});
  }

  bool Answer(uint64_t id, std::span<const BlockId> pinned) {
    {
      base::MutexLock lock(&mu_);
      if (!waiting_.contains(id))
        return false;
      kvx::PeerLookupResult result;
      result.block_ids.assign(pinned.begin(), pinned.end());
      result.lease_ms = static_cast<uint32_t>(
          std::chrono::duration_cast<std::chrono::milliseconds>(lent_for_).count());
      if (!pinned.empty())
        AddLocked(std::nullopt, pinned, Clock::now() + lent_for_);
      answers_.emplace(id, std::move(result));
    }
    cv_.NotifyAll();
    return true;
  }

  void Stop() {
    {
      base::MutexLock lock(&mu_);
      stopped_ = true;
      lookups_.clear();
    }
    cv_.NotifyAll();
  }

  absl::StatusOr<uint64_t> BeginRead(std::span<const int32_t> blocks) override {
    base::MutexLock lock(&mu_);
    std::vector<uint64_t> pinned;
    for (int32_t block : blocks) {
      const uint64_t* lease = LiveLeaseOf(block);
      if (lease == nullptr) {
        return absl::NotFoundError(fmt::format(
            "KV block {} is not lent (its lease was released, expired or never made)", block));
      }
      pinned.push_back(*lease);
    }
    for (uint64_t lease : pinned)
      ++leases_.at(lease).readers;
    const uint64_t read = next_read_++;
    reads_.emplace(read, std::move(pinned));
    return read;
  }

  void EndRead(uint64_t read) override {
    {
      base::MutexLock lock(&mu_);
      auto it = reads_.find(read);
      if (it == reads_.end())
        return;
      for (uint64_t lease : it->second)
        --leases_.at(lease).readers;
      reads_.erase(it);
      maybe_ended_ = true;
    }
    if (wake_)
      wake_();  // an expired lease may now end
  }

  void Release(std::span<const int32_t> blocks) override {
    {
      base::MutexLock lock(&mu_);
      // The peer releases exactly the block list a lease lent (kv_transfer_params' or a
      // lookup's answer).
      for (auto& [id, lease] : leases_) {
        if (!lease.released &&
            std::equal(lease.blocks.begin(), lease.blocks.end(), blocks.begin(), blocks.end())) {
          lease.released = true;
          maybe_ended_ = true;
          break;
        }
      }
    }
    if (wake_)
      wake_();
  }

 private:
  struct Lease {
    std::optional<SeqId> seq;  // unset: blocks pinned for a peer's lookup
    std::vector<BlockId> blocks;
    Clock::time_point deadline;
    int32_t readers = 0;
    bool released = false;
  };

  void AddLocked(std::optional<SeqId> seq, std::span<const BlockId> blocks,
                 Clock::time_point deadline) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const uint64_t id = next_lease_++;
    Lease& lease = leases_[id];
    lease.seq = seq;
    lease.blocks.assign(blocks.begin(), blocks.end());
    lease.deadline = deadline;
    for (BlockId block : blocks)
      by_block_[block].push_back(id);
    if (!next_deadline_ || deadline < *next_deadline_)
      next_deadline_ = deadline;
  }

  // A lease holding `block` that has not been released, or null.
  const uint64_t* LiveLeaseOf(int32_t block) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = by_block_.find(block);
    if (it == by_block_.end())
      return nullptr;
    for (const uint64_t& id : it->second) {
      if (!leases_.at(id).released)
        return &id;
    }
    return nullptr;
  }

  void Remove(uint64_t id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (BlockId block : leases_.at(id).blocks) {
      auto it = by_block_.find(block);
      std::erase(it->second, id);
      if (it->second.empty())
        by_block_.erase(it);
    }
    leases_.erase(id);
  }

  const std::function<void()> wake_;
  const Clock::duration lookup_wait_;
  const Clock::duration lent_for_;
  mutable base::Mutex mu_;
  base::CondVar cv_;
  absl::flat_hash_map<uint64_t, Lease> leases_ ABSL_GUARDED_BY(mu_);
  uint64_t next_lease_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<BlockId, std::vector<uint64_t>> by_block_ ABSL_GUARDED_BY(mu_);
  // Reads in progress by BeginRead's token: the leases each pinned, one per block.
  absl::flat_hash_map<uint64_t, std::vector<uint64_t>> reads_ ABSL_GUARDED_BY(mu_);
  uint64_t next_read_ ABSL_GUARDED_BY(mu_) = 0;
  // The earliest deadline among leases that can still expire; unset when none.
  std::optional<Clock::time_point> next_deadline_ ABSL_GUARDED_BY(mu_);
  // A release or the end of a read may have ended a lease since the last TakeEnded.
  bool maybe_ended_ ABSL_GUARDED_BY(mu_) = false;
  // Peers' lookups: queued for the loop, waited on, answered.
  std::vector<PendingLookup> lookups_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<uint64_t> waiting_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, kvx::PeerLookupResult> answers_ ABSL_GUARDED_BY(mu_);
  uint64_t next_lookup_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

absl::StatusOr<std::unique_ptr<KvConnector>> KvConnector::Start(KvConnectorOptions options,
                                                                kvx::MemoryRegion pool,
                                                                std::function<void()> wake) {
  auto connector = std::unique_ptr<KvConnector>(
      new KvConnector(std::move(options), std::move(pool), std::move(wake)));
  if (connector->produces()) {
    kvx::PeerBlockServerOptions server;
    server.address = connector->options_.config.kv_ip;
    server.port = static_cast<uint16_t>(connector->options_.config.kv_port);
    server.handshake = connector->handshake_;
    server.io_timeout = absl::Milliseconds(connector->options_.config.io_timeout_ms);
    SY_ASSIGN_OR_RETURN(
        connector->server_,
        kvx::PeerBlockServer::Start(std::move(server), connector->pool_, connector->leases_.get()));
  }
  if (connector->consumes()) {
    for (int i = 0; i < connector->options_.config.load_threads; ++i)
      connector->load_threads_.emplace_back([c = connector.get(), i] { c->LoadLoop(i); });
  }
  return connector;
}

KvConnector::KvConnector(KvConnectorOptions options, kvx::MemoryRegion pool,
                         std::function<void()> wake)
    : options_(std::move(options)),
      pool_(std::move(pool)),
      wake_(std::move(wake)),
      leases_(std::make_unique<LeaseTable>(
          wake_, std::chrono::milliseconds(options_.config.io_timeout_ms),
          2 * std::chrono::milliseconds(options_.config.io_timeout_ms))) {
  handshake_.engine_id = options_.config.engine_id;
  handshake_.secret = options_.secret;
  handshake_.compatibility_hash = options_.compatibility.Digest();
}

KvConnector::~KvConnector() {
  leases_->Stop();
  server_.reset();
  {
    base::MutexLock lock(&mu_);
    stopping_ = true;
  }
  cv_.NotifyAll();
  for (std::thread& thread : load_threads_)
    thread.join();
}

uint16_t KvConnector::port() const {
  return server_ != nullptr ? server_->port() : 0;
}

std::string KvConnector::lending_address() const {
  if (server_ == nullptr)
    return "";
  const std::string& ip = options_.config.kv_ip;
  return ip.find(':') != std::string::npos ? fmt::format("[{}]:{}", ip, port())
                                           : fmt::format("{}:{}", ip, port());
}

std::string KvConnector::Lease(const std::string& request_id, SeqId seq,
                               std::span<const BlockId> blocks) {
  leases_->Add(seq, blocks, Clock::now() + std::chrono::seconds(options_.config.lease_seconds));
  kvx::KvTransferParams params;
  params.do_remote_prefill = true;
  params.remote_block_ids.assign(blocks.begin(), blocks.end());
  params.remote_engine_id = options_.config.engine_id;
  params.remote_host = options_.config.kv_ip;
  params.remote_port = port();
  params.remote_request_id = request_id;
  return kvx::EncodeKvTransferParams(params);
}

std::vector<KvConnector::EndedLease> KvConnector::TakeEndedLeases(Clock::time_point now) {
  return leases_->TakeEnded(now);
}

std::optional<KvConnector::Clock::time_point> KvConnector::NextLeaseDeadline() const {
  return leases_->NextDeadline();
}

std::vector<KvConnector::PendingLookup> KvConnector::TakeLookups() {
  return leases_->TakeLookups();
}

bool KvConnector::AnswerLookup(uint64_t id, std::span<const BlockId> pinned) {
  return leases_->Answer(id, pinned);
}

void KvConnector::StopLending() {
  leases_->Stop();
}

void KvConnector::StartPeerPull(SeqId seq, const net::HostPort& source,
                                std::span<const BlockHash> hashes,
                                std::vector<BlockId> local_blocks) {
  LoadJob job{.seq = seq, .local_blocks = std::move(local_blocks)};
  job.pull.emplace().source = source;
  job.pull->hashes.reserve(hashes.size());
  for (const BlockHash& hash : hashes)
    job.pull->hashes.push_back(hash.bytes);
  {
    base::MutexLock lock(&mu_);
    jobs_.push_back(std::move(job));
  }
  cv_.NotifyAll();
}

void KvConnector::StartLoad(SeqId seq, const kvx::KvTransferParams& params, int32_t first_block,
                            std::vector<BlockId> local_blocks) {
  {
    base::MutexLock lock(&mu_);
    jobs_.push_back({.seq = seq,
                     .params = params,
                     .first_block = first_block,
                     .local_blocks = std::move(local_blocks)});
  }
  cv_.NotifyAll();
}

std::vector<KvConnector::FinishedLoad> KvConnector::TakeFinishedLoads() {
  base::MutexLock lock(&mu_);
  return std::exchange(finished_, {});
}

void KvConnector::LoadLoop(int index) {
  base::SetCurrentThreadName(fmt::format("sy-kvload-{}", index));
  PeerLink link;
  while (true) {
    LoadJob job;
    {
      base::MutexLock lock(&mu_);
      cv_.Wait(&mu_,
               [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty())
        return;  // stopping: queued loads were cancelled below, or there were none
      job = std::move(jobs_.front());
      jobs_.pop_front();
      if (stopping_) {
        // Cancelled: the engine is going away; its loop frees the blocks.
        finished_.push_back({.seq = job.seq,
                             .peer_pull = job.pull.has_value(),
                             .status = absl::CancelledError("engine stopping")});
        continue;
      }
    }
    FinishedLoad done = job.pull.has_value() ? RunPeerPull(job, link) : RunLoad(job, link);
    if (!done.status.ok() && job.pull.has_value()) {
      SY_LOG_WARN("KV prefix pull from {}:{} failed, computing the prompt instead: {}",
                  job.pull->source.host, job.pull->source.port, done.status.ToString());
    } else if (!done.status.ok() && !job.local_blocks.empty()) {
      SY_LOG_WARN("KV load for {} from {}:{} failed, computing the prompt instead: {}",
                  job.params.remote_request_id, job.params.remote_host, job.params.remote_port,
                  done.status.ToString());
    }
    {
      base::MutexLock lock(&mu_);
      finished_.push_back(std::move(done));
    }
    if (wake_)
      wake_();
  }
}

KvConnector::FinishedLoad KvConnector::RunLoad(const LoadJob& job, PeerLink& link) {
  FinishedLoad done{.seq = job.seq};
  const kvx::KvTransferParams& params = job.params;
  auto client = ClientFor(link, params.remote_host, params.remote_port);
  if (!client.ok()) {
    done.status = client.status();
    return done;  // nobody to release to
  }
  const size_t first = static_cast<size_t>(job.first_block);
  const size_t count = job.local_blocks.size();
  if (first + count > params.remote_block_ids.size()) {
    done.status = absl::InvalidArgumentError(
        fmt::format("kv_transfer_params name {} remote blocks; the prompt needs {}",
                    params.remote_block_ids.size(), first + count));
  } else if (count > 0) {
    const auto remote = std::span(params.remote_block_ids).subspan(first, count);
    done.status = (*client)->ReadBlocks(remote, pool_, job.local_blocks);
    if (done.status.ok())
      done.num_loaded = static_cast<int32_t>(count);
  }
  // A failed read may have broken the connection: release over a fresh one.
  if (!done.status.ok())
    link.client.reset();
  // The producer may free its blocks now, whether or not they came.
  ReleaseAt(link, params.remote_host, params.remote_port, params.remote_block_ids);
  return done;
}

KvConnector::FinishedLoad KvConnector::RunPeerPull(const LoadJob& job, PeerLink& link) {
  FinishedLoad done{.seq = job.seq, .peer_pull = true};
  const net::HostPort& source = job.pull->source;
  auto client = ClientFor(link, source.host, source.port);
  if (!client.ok()) {
    done.status = client.status();
    return done;
  }
  const size_t asked = std::min<size_t>(job.pull->hashes.size(), kvx::kMaxPeerBlocksPerRequest);
  absl::StatusOr<kvx::PeerLookupResult> held =
      (*client)->Lookup(std::span(job.pull->hashes).first(asked));
  if (!held.ok()) {
    link.client.reset();
    done.status = held.status();
    return done;
  }
  const std::vector<int64_t> remote(held->block_ids.begin(), held->block_ids.end());
  if (remote.empty())
    return done;  // the source holds none of it: computed here
  if (remote.size() > job.local_blocks.size()) {
    done.status = absl::InvalidArgumentError(
        fmt::format("the source answered {} blocks for a lookup of {}", remote.size(), asked));
  } else {
    const auto local = std::span(job.local_blocks).first(remote.size());
    done.status = (*client)->ReadBlocks(remote, pool_, local);
    if (done.status.ok())
      done.num_loaded = static_cast<int32_t>(remote.size());
  }
  if (!done.status.ok())
    link.client.reset();
  ReleaseAt(link, source.host, source.port, remote);
  return done;
}

void KvConnector::ReleaseAt(PeerLink& link, const std::string& host, int64_t port,
                            std::span<const int64_t> remote_ids) {
  absl::StatusOr<kvx::PeerBlockClient*> client = ClientFor(link, host, port);
  absl::Status released = client.status();
  if (released.ok())
    released = (*client)->Release(remote_ids);
  if (!released.ok()) {
    link.client.reset();
    SY_LOG_WARN("KV release at {}:{} failed (its lease will expire instead): {}", host, port,
                released.ToString());
  }
}

absl::StatusOr<kvx::PeerBlockClient*> KvConnector::ClientFor(PeerLink& link,
                                                             const std::string& host,
                                                             int64_t port) {
  const std::string peer = fmt::format("{}:{}", host, port);
  if (link.client == nullptr || link.peer != peer) {
    link.client.reset();
    SY_ASSIGN_OR_RETURN(link.client, kvx::PeerBlockClient::Connect(
                                         host, static_cast<uint16_t>(port), handshake_,
                                         absl::Milliseconds(options_.config.io_timeout_ms)));
    link.peer = peer;
  }
  return link.client.get();
}

}  // namespace switchyard::engine
