// KvConnector: the engine's side of prefill/decode disaggregation (SwitchyardConnector,
// configured by --kv-transfer-config), in the shape of vLLM's NixlConnector:
//
//  - producer (the prefill engine): a request that carries kv_transfer_params
//    {"do_remote_decode": true} keeps its KV blocks when it finishes, under a lease, and its
//    response carries the kv_transfer_params the decode engine needs (remote_block_ids,
//    remote_host/port, remote_engine_id, ...). A PeerBlockServer lends the leased blocks to
//    authenticated peers; the lease ends when the decode side releases the blocks or after
//    lease_seconds, and only then does the engine loop free them.
//  - peer-to-peer prefix pull (llm-d's P2P KV pull): an engine that produces also lends the
//    prefix its pool caches. A peer looks up a prompt's chained block hashes; the engine loop
//    pins the leading run it holds under a short lease (twice io_timeout_ms) and answers
//    their block ids, which the peer reads and then releases. An engine that consumes pulls
//    for a request whose router named a source engine (x-kv-cache-source-host-port): the
//    prompt's full blocks past its own cached prefix are looked up there, the leading run
//    the source holds is read into blocks of this engine's own and published, and the rest
//    is computed. A source that holds nothing, is gone or refuses costs only the round trip.
//  - consumer (the decode engine): a request that carries {"do_remote_prefill": true, ...}
//    first pulls the prompt's KV from the producer into blocks of its own (the ones its prefix
//    cache lacks), then is admitted as usual and finds that KV as a prefix hit; the last
//    prompt token is recomputed for its logits, as vLLM does. Any failure (the producer dead,
//    refused, slow, a block evicted) leaves those blocks unpublished and the request simply
//    computes its prompt: a fallback, never a lost request. Either way the producer's blocks
//    are released.
//
// Threads: lease, lookup-answer, load and hand-back calls come from the engine loop; the
// block server's threads call the lease table (a peer's lookup waits there, up to
// io_timeout_ms, for the loop's answer); config.load_threads load threads ("sy-kvload-<i>"),
// each with its own connection to the last peer it pulled from, take loads in order, so
// that as many pulls run at once (blocking socket I/O never runs on the engine loop). `wake` is
// called from those threads when the loop has work here (a lookup to answer, a finished load, a
// released lease). The destructor stops the server, cancels queued loads, finishes the running one
// (bounded by io_timeout_ms) and joins.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"

#include "base/mutex.h"
#include "engine/block_pool.h"
#include "engine/kv_cache_manager.h"
#include "kvx/kv_compatibility.h"
#include "kvx/kv_transfer_config.h"
#include "kvx/kv_transfer_params.h"
#include "kvx/memory_region.h"
#include "kvx/peer_block_client.h"
#include "kvx/peer_block_server.h"
#include "net/host_port.h"

namespace switchyard::engine {

struct KvConnectorOptions {
  kvx::KvTransferConfig config;
  // Authenticates peers (SWITCHYARD_KV_SECRET); both sides must hold the same one.
  std::string secret;
  // What a peer's KV must match (model, dtype, shape, layout).
  kvx::KvCompatibility compatibility;
};

class KvConnector {
 public:
  using Clock = std::chrono::steady_clock;

  // Starts the block server (producer, both) on config.kv_ip:kv_port and the load thread
  // (consumer, both). `pool` is the runner's KV memory; it must outlive the connector.
  static absl::StatusOr<std::unique_ptr<KvConnector>> Start(KvConnectorOptions options,
                                                            kvx::MemoryRegion pool,
                                                            std::function<void()> wake);
  ~KvConnector();
  KvConnector(const KvConnector&) = delete;
  KvConnector& operator=(const KvConnector&) = delete;

  bool produces() const { return options_.config.produces(); }
  bool consumes() const { return options_.config.consumes(); }
  // The port the block server listens on (0 for a pure consumer).
  uint16_t port() const;
  // host:port of the block server ([v6]:port), what a router names as this engine's KV
  // source; empty for a pure consumer.
  std::string lending_address() const;

  // Producer, loop thread: `seq` finished with `blocks` (its whole block table) and the
  // request asked for a remote decode; the blocks stay with `seq` until TakeEndedLeases
  // names it. Returns the response's kv_transfer_params.
  std::string Lease(const std::string& request_id, SeqId seq, std::span<const BlockId> blocks);
  // Loop thread: the leases that ended now, released by the peer or expired (and not being
  // read). A P/D lease names the sequence whose blocks the loop frees; a prefix lent to a
  // peer names the blocks the loop pinned for it, which it unpins.
  struct EndedLease {
    std::optional<SeqId> seq;
    std::vector<BlockId> pinned;
    bool expired = false;
  };
  std::vector<EndedLease> TakeEndedLeases(Clock::time_point now);
  // The earliest lease deadline, for the idle loop's wait.
  std::optional<Clock::time_point> NextLeaseDeadline() const;

  // Producer, loop thread: the prefix lookups peers are waiting on. Answer each with
  // AnswerLookup: the leading blocks holding `hashes` that the loop pinned for the peer.
  struct PendingLookup {
    uint64_t id = 0;
    std::vector<BlockHash> hashes;
  };
  std::vector<PendingLookup> TakeLookups();
  // Lends `pinned` to the peer under a lease. False when the peer stopped waiting (timed
  // out, gone): nothing is lent and the loop unpins the blocks itself.
  bool AnswerLookup(uint64_t id, std::span<const BlockId> pinned);
  // Loop thread, once the loop stops: lookups waiting and to come are refused.
  void StopLending();

  // Consumer, loop thread: pulls into `local_blocks` the leading run of `hashes` (the
  // prompt's full blocks past its cached prefix, local_blocks[i] for hashes[i]) that the
  // engine at `source` holds, then releases them there. The outcome comes back through
  // TakeFinishedLoads (num_loaded: the leading local blocks that hold the source's KV).
  void StartPeerPull(SeqId seq, const net::HostPort& source, std::span<const BlockHash> hashes,
                     std::vector<BlockId> local_blocks);

  // Consumer, loop thread: pulls remote_block_ids[first_block + i] into local_blocks[i] on
  // the load thread, then releases all of `params.remote_block_ids` at the producer. The
  // outcome comes back through TakeFinishedLoads. An empty `local_blocks` only releases.
  void StartLoad(SeqId seq, const kvx::KvTransferParams& params, int32_t first_block,
                 std::vector<BlockId> local_blocks);
  struct FinishedLoad {
    SeqId seq = 0;
    bool peer_pull = false;  // StartPeerPull's, else StartLoad's
    // Leading local blocks that hold the remote KV (all of them, or 0 after a failure).
    int32_t num_loaded = 0;
    absl::Status status{};
  };
  std::vector<FinishedLoad> TakeFinishedLoads();

 private:
  class LeaseTable;
  // A P/D load (params, first_block) or a peer pull (pull set).
  struct LoadJob {
    SeqId seq = 0;
    kvx::KvTransferParams params{};
    int32_t first_block = 0;
    struct PeerPull {
      net::HostPort source;
      std::vector<kvx::PeerDigest> hashes;
    };
    std::optional<PeerPull> pull{};
    std::vector<BlockId> local_blocks;
  };

  KvConnector(KvConnectorOptions options, kvx::MemoryRegion pool, std::function<void()> wake);

  // One load thread's connection: to the last peer it pulled from, reset after an error.
  struct PeerLink {
    std::unique_ptr<kvx::PeerBlockClient> client;
    std::string peer;  // host:port
  };

  void LoadLoop(int index);
  FinishedLoad RunLoad(const LoadJob& job, PeerLink& link);
  FinishedLoad RunPeerPull(const LoadJob& job, PeerLink& link);
  // Ends the peer's lease on `remote_ids` (best effort: it expires otherwise).
  void ReleaseAt(PeerLink& link, const std::string& host, int64_t port,
                 std::span<const int64_t> remote_ids);
  // A connected client for the peer at host:port, reusing the link's when it is the same
  // peer.
  absl::StatusOr<kvx::PeerBlockClient*> ClientFor(PeerLink& link, const std::string& host,
                                                  int64_t port);

  const KvConnectorOptions options_;
  const kvx::MemoryRegion pool_;
  const std::function<void()> wake_;
  kvx::PeerHandshakeOptions handshake_;

  std::unique_ptr<LeaseTable> leases_;
  std::unique_ptr<kvx::PeerBlockServer> server_;

  base::Mutex mu_;
  base::CondVar cv_;
  std::deque<LoadJob> jobs_ ABSL_GUARDED_BY(mu_);
  std::vector<FinishedLoad> finished_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> load_threads_;
};

}  // namespace switchyard::engine
