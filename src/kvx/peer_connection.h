// PeerConnection: one TCP connection of the KV peer protocol, after the handshake (Open runs
// it): reading frame headers and payloads, writing frames, and reading or writing a KV
// block's bytes straight between the socket and KV memory. Every operation has the
// connection's I/O timeout; an error leaves the connection unusable (the caller closes it).
//
// Owned and used by one thread at a time.
#pragma once

#include <sys/uio.h>

#include <span>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "kvx/peer_frame.h"
#include "kvx/peer_handshake.h"
#include "kvx/unique_fd.h"

namespace switchyard::kvx {

// The largest control frame a peer may send: a lookup of kMaxPeerBlocksPerRequest hashes.
inline constexpr uint32_t kMaxPeerControlPayloadBytes =
    4 + kMaxPeerBlocksPerRequest * sizeof(PeerDigest);

class PeerConnection {
 public:
  // Runs the handshake on a connected socket. `cancel_fd` (-1: none) aborts any wait when it
  // becomes readable. Errors: the handshake's (FailedPrecondition: incompatible KV,
  // Unauthenticated, Unavailable: busy; InvalidArgument: protocol) or the socket's
  // (Unavailable, DeadlineExceeded, Cancelled).
  static absl::StatusOr<PeerConnection> Open(UniqueFd fd, const PeerHandshakeOptions& options,
                                             absl::Duration io_timeout, int cancel_fd = -1);

  // The other side's hello (engine id, compatibility hash).
  const PeerHello& peer() const { return peer_; }

  // The next frame's header, checked against `max_payload_bytes`.
  absl::StatusOr<PeerFrameHeader> ReadHeader(uint32_t max_payload_bytes);
  // The payload of the frame whose header was just read.
  absl::StatusOr<std::string> ReadPayload(const PeerFrameHeader& header);
  // Reads exactly the bytes `iov` describes (part of a payload: a block's segments).
  absl::Status ReadInto(std::span<const iovec> iov);
  // Sends whole frames (AppendPeerFrame's output).
  absl::Status Send(const std::string& frames);
  // Sends the bytes `iov` describes (a frame header and a block's segments).
  absl::Status SendV(std::span<const iovec> iov);

  int fd() const { return fd_.get(); }

 private:
  PeerConnection(UniqueFd fd, absl::Duration io_timeout, int cancel_fd)
      : fd_(std::move(fd)), io_timeout_(io_timeout), cancel_fd_(cancel_fd) {}

  absl::Time Deadline() const { return absl::Now() + io_timeout_; }

  UniqueFd fd_;
  absl::Duration io_timeout_;
  int cancel_fd_;
  PeerHello peer_;
};

}  // namespace switchyard::kvx
