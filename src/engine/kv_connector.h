// KvConnector: the engine's side of prefill/decode disaggregation (SwitchyardConnector,
// configured by --kv-transfer-config), in the shape of vLLM's NixlConnector:
//
//  - producer (the prefill engine): a request that carries kv_transfer_params
//    {"do_remote_decode": true} keeps its KV blocks when it finishes, under a lease, and its
//    response carries the kv_transfer_params the decode engine needs (remote_block_ids,
//    remote_host/port, remote_engine_id, ...). A PeerBlockServer lends the leased blocks to
//    authenticated peers; the lease ends when the decode side releases the blocks or after
//    lease_seconds, and only then does the engine loop free them.
//  - consumer (the decode engine): a request that carries {"do_remote_prefill": true, ...}
//    first pulls the prompt's KV from the producer into blocks of its own (the ones its prefix
//    cache lacks), then is admitted as usual and finds that KV as a prefix hit; the last
//    prompt token is recomputed for its logits, as vLLM does. Any failure (the producer dead,
//    refused, slow, a block evicted) leaves those blocks unpublished and the request simply
//    computes its prompt: a fallback, never a lost request. Either way the producer's blocks
//    are released.
//
// Threads: lease, load and hand-back calls come from the engine loop; the block server's
// threads call the lease table; one load thread ("sy-kvload") pulls blocks (blocking socket
// I/O never runs on the engine loop). `wake` is called from those threads when the loop has
// work here (a finished load, a released lease). The destructor stops the server, cancels
// queued loads, finishes the running one (bounded by io_timeout_ms) and joins.
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

  // Producer, loop thread: `seq` finished with `blocks` (its whole block table) and the
  // request asked for a remote decode; the blocks stay with `seq` until TakeEndedLeases
  // names it. Returns the response's kv_transfer_params.
  std::string Lease(const std::string& request_id, SeqId seq, std::span<const BlockId> blocks);
  // Loop thread: the leased sequences whose blocks the loop must free now, released by the
  // peer or expired (and not being read).
  struct EndedLease {
    SeqId seq = 0;
    bool expired = false;
  };
  std::vector<EndedLease> TakeEndedLeases(Clock::time_point now);
  // The earliest lease deadline, for the idle loop's wait.
  std::optional<Clock::time_point> NextLeaseDeadline() const;

  // Consumer, loop thread: pulls remote_block_ids[first_block + i] into local_blocks[i] on
  // the load thread, then releases all of `params.remote_block_ids` at the producer. The
  // outcome comes back through TakeFinishedLoads. An empty `local_blocks` only releases.
  void StartLoad(SeqId seq, const kvx::KvTransferParams& params, int32_t first_block,
                 std::vector<BlockId> local_blocks);
  struct FinishedLoad {
    SeqId seq = 0;
    // Leading local blocks that hold the remote KV (all of them, or 0 after a failure).
    int32_t num_loaded = 0;
    absl::Status status;
  };
  std::vector<FinishedLoad> TakeFinishedLoads();

 private:
  class LeaseTable;
  struct LoadJob {
    SeqId seq = 0;
    kvx::KvTransferParams params;
    int32_t first_block = 0;
    std::vector<BlockId> local_blocks;
  };

  KvConnector(KvConnectorOptions options, kvx::MemoryRegion pool, std::function<void()> wake);

  void LoadLoop();
  FinishedLoad RunLoad(const LoadJob& job);
  // Ends the producer's lease on the request's blocks (best effort: it expires otherwise).
  void ReleaseAt(const kvx::KvTransferParams& params);
  // A connected client for the job's producer, reusing the last one when it is the same
  // peer and unbroken.
  absl::StatusOr<kvx::PeerBlockClient*> ClientFor(const kvx::KvTransferParams& params);

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
  // Load thread only.
  std::unique_ptr<kvx::PeerBlockClient> client_;
  std::string client_peer_;

  std::thread load_thread_;
};

}  // namespace switchyard::engine
