// PeerBlockClient: one authenticated connection to a peer's PeerBlockServer, pulling KV
// blocks from it: look up which of a prompt's block hashes the peer holds, read blocks
// straight into this engine's memory, release the peer's pins. Calls are synchronous and run
// on the caller's thread (a transfer thread, never the engine loop).
//
// Any error that leaves the byte stream in an unknown state (I/O failure, timeout, a frame
// that breaks the protocol) marks the client broken: later calls fail with
// FailedPrecondition and the caller connects again. Errors the peer reports in an orderly
// way (kReadDone with an error: a block evicted, an id out of range) leave it usable.
//
// One thread at a time.
#pragma once

#include <memory>
#include <span>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "kvx/memory_region.h"
#include "kvx/peer_connection.h"
#include "kvx/peer_handshake.h"
#include "kvx/peer_messages.h"

namespace switchyard::kvx {

class PeerBlockClient {
 public:
  // Connects and runs the handshake (options.role is set to kInitiator). Errors:
  // ConnectTcp's and PeerConnection::Open's.
  static absl::StatusOr<std::unique_ptr<PeerBlockClient>> Connect(const std::string& host,
                                                                  uint16_t port,
                                                                  PeerHandshakeOptions options,
                                                                  absl::Duration io_timeout);

  // The peer's engine id.
  const std::string& peer_engine_id() const { return connection_.peer().engine_id; }

  // The peer's answer: block ids holding the leading hashes it has, pinned for a lease.
  absl::StatusOr<PeerLookupResult> Lookup(std::span<const PeerDigest> hashes);

  // Copies the peer's blocks remote_ids[i] into `dst`'s blocks local_ids[i], every segment.
  // InvalidArgument (client still usable) for lists of different lengths, more than
  // kMaxPeerBlocksPerRequest blocks or a local id outside `dst`; the peer's error for a read
  // it refuses (NotFound, OutOfRange, ...); Unavailable/DeadlineExceeded/InvalidArgument
  // from a broken stream (then the client is broken). On error `dst`'s blocks may be partly
  // written. REQUIRES: dst's layout is the one the compatibility hash describes.
  // Remote ids are int64 as kv_transfer_params carry them; one outside [0, 2^32) is
  // InvalidArgument.
  absl::Status ReadBlocks(std::span<const int64_t> remote_ids, const MemoryRegion& dst,
                          std::span<const int32_t> local_ids);

  // Ends the lease on blocks a Lookup pinned.
  absl::Status Release(std::span<const int64_t> remote_ids);

 private:
  explicit PeerBlockClient(PeerConnection connection) : connection_(std::move(connection)) {}

  // Sends one request frame on a new stream id; returns the id.
  absl::StatusOr<uint32_t> SendRequest(PeerFrameType type, const std::string& payload);
  // Reads the next frame header, which must be on `stream_id` and of an allowed type; a
  // kRefuse from the peer becomes its error.
  absl::StatusOr<PeerFrameHeader> ReadReply(uint32_t stream_id, uint32_t max_payload_bytes);
  // Marks the client broken when `status` is an error, and returns it.
  absl::Status Broken(absl::Status status);

  PeerConnection connection_;
  uint32_t next_stream_id_ = 1;
  absl::Status broken_;
};

}  // namespace switchyard::kvx
