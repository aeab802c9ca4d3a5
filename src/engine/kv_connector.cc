#include "engine/kv_connector.h"

#include <algorithm>
#include <utility>

#include "fmt/format.h"

#include "base/logging.h"
#include "base/status_macros.h"
#include "base/thread_name.h"

namespace switchyard::engine {

// The producer's leased blocks, shared by the engine loop (adds, frees) and the block
// server's threads (reads, releases).
class KvConnector::LeaseTable : public kvx::PeerBlockSource {
 public:
  explicit LeaseTable(std::function<void()> wake) : wake_(std::move(wake)) {}

  void Add(SeqId seq, std::span<const BlockId> blocks, Clock::time_point deadline) {
    base::MutexLock lock(&mu_);
    Lease& lease = leases_[seq];
    lease.blocks.assign(blocks.begin(), blocks.end());
    lease.deadline = deadline;
    for (BlockId block : blocks)
      by_block_[block].push_back(seq);
    if (!next_deadline_ || deadline < *next_deadline_)
      next_deadline_ = deadline;
  }

  // Called between engine steps: O(1) unless a lease was released, a read ended, or the
  // earliest deadline passed.
  std::vector<EndedLease> TakeEnded(Clock::time_point now) {
    base::MutexLock lock(&mu_);
    if (!maybe_ended_ && (!next_deadline_ || now < *next_deadline_))
      return {};
    maybe_ended_ = false;
    std::vector<EndedLease> ended;
    next_deadline_.reset();
    for (const auto& [seq, lease] : leases_) {
      if (lease.readers == 0 && (lease.released || lease.deadline <= now)) {
        ended.push_back({.seq = seq, .expired = !lease.released});
      } else if (lease.deadline > now && (!next_deadline_ || lease.deadline < *next_deadline_)) {
        // A lease past its deadline but still being read ends when the read does (EndRead
        // wakes the loop): it sets no deadline, so an idle loop does not spin on it.
        next_deadline_ = lease.deadline;
      }
    }
    for (const EndedLease& lease : ended)
      Remove(lease.seq);
    return ended;
  }

  std::optional<Clock::time_point> NextDeadline() const {
    base::MutexLock lock(&mu_);
    return next_deadline_;
  }

  // Prefix lookups by hash (P2P pull) are not lent from here: leases serve P/D reads.
  absl::StatusOr<kvx::PeerLookupResult> Lookup(std::span<const kvx::PeerDigest>) override {
    return absl::UnimplementedError("this engine lends leased P/D blocks only");
  }

  absl::StatusOr<uint64_t> BeginRead(std::span<const int32_t> blocks) override {
    base::MutexLock lock(&mu_);
    std::vector<SeqId> pinned;
    for (int32_t block : blocks) {
      const SeqId* lease = LiveLeaseOf(block);
      if (lease == nullptr) {
        return absl::NotFoundError(fmt::format(
            "KV block {} is not lent (its lease was released, expired or never made)", block));
      }
      pinned.push_back(*lease);
    }
    for (SeqId seq : pinned)
      ++leases_[seq].readers;
    const uint64_t read = next_read_++;
    reads_.emplace(read, std::move(pinned));
    return read;
  }

  void EndRead(uint64_t read) override {
    base::MutexLock lock(&mu_);
    auto it = reads_.find(read);
    if (it == reads_.end())
      return;
    for (SeqId seq : it->second)
      --leases_[seq].readers;
    reads_.erase(it);
    maybe_ended_ = true;
    if (wake_)
      wake_();  // an expired lease may now end
  }

  void Release(std::span<const int32_t> blocks) override {
    {
      base::MutexLock lock(&mu_);
      // The peer releases exactly the block list a lease's kv_transfer_params named.
      for (auto& [seq, lease] : leases_) {
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
    std::vector<BlockId> blocks;
    Clock::time_point deadline;
    int32_t readers = 0;
    bool released = false;
  };

  // A lease holding `block` that has not been released, or null.
  const SeqId* LiveLeaseOf(int32_t block) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = by_block_.find(block);
    if (it == by_block_.end())
      return nullptr;
    for (const SeqId& seq : it->second) {
      if (!leases_.at(seq).released)
        return &seq;
    }
    return nullptr;
  }

  void Remove(SeqId seq) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (BlockId block : leases_.at(seq).blocks) {
      auto it = by_block_.find(block);
      std::erase(it->second, seq);
      if (it->second.empty())
        by_block_.erase(it);
    }
    leases_.erase(seq);
  }

  const std::function<void()> wake_;
  mutable base::Mutex mu_;
  absl::flat_hash_map<SeqId, Lease> leases_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<BlockId, std::vector<SeqId>> by_block_ ABSL_GUARDED_BY(mu_);
  // Reads in progress by BeginRead's token: the leases each pinned, one per block.
  absl::flat_hash_map<uint64_t, std::vector<SeqId>> reads_ ABSL_GUARDED_BY(mu_);
  uint64_t next_read_ ABSL_GUARDED_BY(mu_) = 0;
  // The earliest deadline among leases that can still expire; unset when none.
  std::optional<Clock::time_point> next_deadline_ ABSL_GUARDED_BY(mu_);
  // A release or the end of a read may have ended a lease since the last TakeEnded.
  bool maybe_ended_ ABSL_GUARDED_BY(mu_) = false;
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
  if (connector->consumes())
    connector->load_thread_ = std::thread([c = connector.get()] { c->LoadLoop(); });
  return connector;
}

KvConnector::KvConnector(KvConnectorOptions options, kvx::MemoryRegion pool,
                         std::function<void()> wake)
    : options_(std::move(options)),
      pool_(std::move(pool)),
      wake_(std::move(wake)),
      leases_(std::make_unique<LeaseTable>(wake_)) {
  handshake_.engine_id = options_.config.engine_id;
  handshake_.secret = options_.secret;
  handshake_.compatibility_hash = options_.compatibility.Digest();
}

KvConnector::~KvConnector() {
  server_.reset();
  {
    base::MutexLock lock(&mu_);
    stopping_ = true;
  }
  cv_.NotifyAll();
  if (load_thread_.joinable())
    load_thread_.join();
}

uint16_t KvConnector::port() const {
  return server_ != nullptr ? server_->port() : 0;
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

void KvConnector::LoadLoop() {
  base::SetCurrentThreadName("sy-kvload");
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
        finished_.push_back({.seq = job.seq, .status = absl::CancelledError("engine stopping")});
        continue;
      }
    }
    FinishedLoad done = RunLoad(job);
    if (!done.status.ok() && !job.local_blocks.empty()) {
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

KvConnector::FinishedLoad KvConnector::RunLoad(const LoadJob& job) {
  FinishedLoad done{.seq = job.seq};
  auto client = ClientFor(job.params);
  if (!client.ok()) {
    done.status = client.status();
    return done;  // nobody to release to
  }
  const size_t first = static_cast<size_t>(job.first_block);
  const size_t count = job.local_blocks.size();
  if (first + count > job.params.remote_block_ids.size()) {
    done.status = absl::InvalidArgumentError(
        fmt::format("kv_transfer_params name {} remote blocks; the prompt needs {}",
                    job.params.remote_block_ids.size(), first + count));
  } else if (count > 0) {
    const auto remote = std::span(job.params.remote_block_ids).subspan(first, count);
    done.status = (*client)->ReadBlocks(remote, pool_, job.local_blocks);
    if (done.status.ok())
      done.num_loaded = static_cast<int32_t>(count);
  }
  // A failed read may have broken the connection: release over a fresh one.
  if (!done.status.ok())
    client_.reset();
  ReleaseAt(job.params);
  return done;
}

void KvConnector::ReleaseAt(const kvx::KvTransferParams& params) {
  // The producer may free its blocks now, whether or not they came.
  absl::Status released = ClientFor(params).status();
  if (released.ok())
    released = client_->Release(params.remote_block_ids);
  if (!released.ok()) {
    client_.reset();
    SY_LOG_WARN("KV release at {}:{} failed (its lease will expire instead): {}",
                params.remote_host, params.remote_port, released.ToString());
  }
}

absl::StatusOr<kvx::PeerBlockClient*> KvConnector::ClientFor(const kvx::KvTransferParams& params) {
  const std::string peer = fmt::format("{}:{}", params.remote_host, params.remote_port);
  if (client_ == nullptr || client_peer_ != peer) {
    client_.reset();
    SY_ASSIGN_OR_RETURN(
        client_, kvx::PeerBlockClient::Connect(
                     params.remote_host, static_cast<uint16_t>(params.remote_port), handshake_,
                     absl::Milliseconds(options_.config.io_timeout_ms)));
    client_peer_ = peer;
  }
  return client_.get();
}

}  // namespace switchyard::engine
