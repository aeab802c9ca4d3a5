// PeerBlockServer: serves this engine's KV blocks to authenticated peers over TCP (the KV
// peer protocol: peer_frame.h, peer_messages.h), so that another engine can pull a prefix
// this one computed (P2P pull) or the decode side of a P/D pair the prefill's blocks.
// Per connection: the handshake (peers with another compatibility hash or without the
// shared secret are refused), then requests served one at a time:
//  - kLookupBlocks: the source's answer (held prefix, pinned under a lease) as kLookupResult;
//  - kReadBlocks: every block as one kBlockData frame whose bytes go from the region's
//    memory to the socket with no copy, then kReadDone; ids outside the region or blocks the
//    source will not lend end in a kReadDone error with no data sent;
//  - kReleaseBlocks: passed to the source.
// A frame it cannot accept (bad header, wrong type, malformed payload) gets a kRefuse and the
// connection is closed; the server and its other connections go on.
//
// Threads: one accept thread, and one thread per connection up to max_connections (a
// connection past that is refused as busy). The source is called on connection threads.
// The destructor stops accepting, wakes every wait (a peer in the middle of a transfer sees
// the connection close), and joins every thread. The source and the region's memory must
// outlive the server.
#pragma once

#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <span>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "base/mutex.h"
#include "kvx/memory_region.h"
#include "kvx/peer_handshake.h"
#include "kvx/peer_messages.h"
#include "kvx/unique_fd.h"

namespace switchyard::kvx {

// What the engine lends to peers. Called on the server's connection threads: an
// implementation hands the work to whatever owns the blocks (the engine loop) and waits.
class PeerBlockSource {
 public:
  virtual ~PeerBlockSource() = default;
  // The longest leading run of `hashes` whose blocks this engine holds, pinned until
  // Release or the lease's end.
  virtual absl::StatusOr<PeerLookupResult> Lookup(std::span<const PeerDigest> hashes) = 0;
  // Pins `block_ids` for a read about to start and returns a token for EndRead, or says why
  // they cannot be read (an error the peer receives in kReadDone: NotFound for a block no
  // longer held).
  virtual absl::StatusOr<uint64_t> BeginRead(std::span<const int32_t> block_ids) = 0;
  // The read BeginRead returned `read` for has ended (sent or failed).
  virtual void EndRead(uint64_t read) = 0;
  // The peer is done with blocks a Lookup pinned.
  virtual void Release(std::span<const int32_t> block_ids) = 0;
};

struct PeerBlockServerOptions {
  // The address to bind (the transfer port must not be open to the world by default).
  std::string address = "127.0.0.1";
  uint16_t port = 0;  // 0: any free port (see port())
  // role is set to kAcceptor by the server.
  PeerHandshakeOptions handshake;
  size_t max_connections = 16;
  // Each read or write of a frame, and the handshake's each step.
  absl::Duration io_timeout = absl::Seconds(10);
  std::string thread_name = "sy-kvpeer";
};

// Totals since start, each read on its own.
struct PeerBlockServerCounters {
  uint64_t connections_accepted = 0;
  uint64_t connections_refused = 0;  // handshake failures and busy refusals
  uint64_t blocks_sent = 0;
  uint64_t bytes_sent = 0;
  uint64_t reads_failed = 0;
};

class PeerBlockServer {
 public:
  // Binds, listens and starts the accept thread. Errors: ListenTcp's.
  static absl::StatusOr<std::unique_ptr<PeerBlockServer>> Start(PeerBlockServerOptions options,
                                                                MemoryRegion region,
                                                                PeerBlockSource* source);
  ~PeerBlockServer();
  PeerBlockServer(const PeerBlockServer&) = delete;
  PeerBlockServer& operator=(const PeerBlockServer&) = delete;

  uint16_t port() const { return port_; }
  PeerBlockServerCounters counters() const;

 private:
  struct Worker {
    std::thread thread;
    std::atomic<bool> finished{false};
  };

  PeerBlockServer(PeerBlockServerOptions options, MemoryRegion region, PeerBlockSource* source,
                  UniqueFd listen_fd, UniqueFd stop_fd, uint16_t port);

  void AcceptLoop();
  void Serve(UniqueFd fd);
  // Joins the workers whose connections have ended.
  void ReapFinished() ABSL_EXCLUSIVE_LOCKS_REQUIRED(workers_mu_);

  const PeerBlockServerOptions options_;
  const MemoryRegion region_;
  PeerBlockSource* const source_;
  const UniqueFd listen_fd_;
  // An eventfd made readable once, at shutdown: every poll in the server watches it.
  const UniqueFd stop_fd_;
  const uint16_t port_;

  base::Mutex workers_mu_;
  std::list<Worker> workers_ ABSL_GUARDED_BY(workers_mu_);

  std::atomic<uint64_t> connections_accepted_{0};
  std::atomic<uint64_t> connections_refused_{0};
  std::atomic<uint64_t> blocks_sent_{0};
  std::atomic<uint64_t> bytes_sent_{0};
  std::atomic<uint64_t> reads_failed_{0};

  std::thread accept_thread_;
};

}  // namespace switchyard::kvx
