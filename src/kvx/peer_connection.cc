#include "kvx/peer_connection.h"

#include <array>
#include <utility>

#include "kvx/tcp_socket.h"

namespace switchyard::kvx {
namespace {

iovec Iov(const void* data, size_t bytes) {
  return {const_cast<void*>(data), bytes};
}

}  // namespace

absl::StatusOr<PeerConnection> PeerConnection::Open(UniqueFd fd,
                                                    const PeerHandshakeOptions& options,
                                                    absl::Duration io_timeout, int cancel_fd) {
  PeerConnection connection(std::move(fd), io_timeout, cancel_fd);
  PeerHandshake handshake(options, RandomPeerNonce());
  std::string out;
  handshake.Start(&out);
  while (true) {
    if (!out.empty()) {
      absl::Status sent = connection.Send(out);
      out.clear();
      if (!sent.ok())
        return sent;
    }
    if (handshake.done())
      break;
    auto header = connection.ReadHeader(kMaxPeerControlPayloadBytes);
    if (!header.ok()) {
      if (header.status().code() == absl::StatusCode::kInvalidArgument) {
        // Not our protocol (or not this version): say so before closing.
        AppendPeerRefuseFrame(PeerRefusal::kProtocolError, std::string(header.status().message()),
                              &out);
        connection.Send(out).IgnoreError();
      }
      return header.status();
    }
    auto payload = connection.ReadPayload(*header);
    if (!payload.ok())
      return payload.status();
    absl::Status step = handshake.OnFrame(*header, AsPeerBytes(*payload), &out);
    if (!step.ok()) {
      // Tell the peer why (a kRefuse) before closing; its failure to listen changes nothing.
      if (!out.empty())
        connection.Send(out).IgnoreError();
      return step;
    }
  }
  connection.peer_ = handshake.peer_hello();
  return connection;
}

absl::StatusOr<PeerFrameHeader> PeerConnection::ReadHeader(uint32_t max_payload_bytes) {
  std::array<uint8_t, kPeerFrameHeaderBytes> bytes{};
  const iovec iov = Iov(bytes.data(), bytes.size());
  if (absl::Status s = ReadFully(fd_.get(), {&iov, 1}, Deadline(), cancel_fd_); !s.ok())
    return s;
  return DecodePeerFrameHeader(bytes, max_payload_bytes);
}

absl::StatusOr<std::string> PeerConnection::ReadPayload(const PeerFrameHeader& header) {
  std::string payload(header.payload_bytes, '\0');
  const iovec iov = Iov(payload.data(), payload.size());
  if (absl::Status s = ReadFully(fd_.get(), {&iov, 1}, Deadline(), cancel_fd_); !s.ok())
    return s;
  return payload;
}

absl::Status PeerConnection::ReadInto(std::span<const iovec> iov) {
  return ReadFully(fd_.get(), iov, Deadline(), cancel_fd_);
}

absl::Status PeerConnection::Send(const std::string& frames) {
  const iovec iov = Iov(frames.data(), frames.size());
  return WriteFully(fd_.get(), {&iov, 1}, Deadline(), cancel_fd_);
}

absl::Status PeerConnection::SendV(std::span<const iovec> iov) {
  return WriteFully(fd_.get(), iov, Deadline(), cancel_fd_);
}

}  // namespace switchyard::kvx
