#include "kvx/peer_block_client.h"

#include <array>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"

#include "base/status_macros.h"
#include "kvx/tcp_socket.h"

namespace switchyard::kvx {
namespace {

absl::Status ProtocolError(const std::string& what) {
  return absl::InvalidArgumentError("KV peer broke the protocol: " + what);
}

// The peer's block ids as the wire carries them (u32).
absl::StatusOr<PeerBlockList> WireBlockList(std::span<const int64_t> ids) {
  PeerBlockList list;
  list.block_ids.reserve(ids.size());
  for (int64_t id : ids) {
    if (id < 0 || id > UINT32_MAX)
      return absl::InvalidArgumentError(absl::StrFormat("KV peer block id %d is not one", id));
    list.block_ids.push_back(static_cast<uint32_t>(id));
  }
  return list;
}

}  // namespace

absl::StatusOr<std::unique_ptr<PeerBlockClient>> PeerBlockClient::Connect(
    const std::string& host, uint16_t port, PeerHandshakeOptions options,
    absl::Duration io_timeout) {
  auto fd = ConnectTcp(host, port, io_timeout);
  if (!fd.ok())
    return fd.status();
  options.role = PeerRole::kInitiator;
  auto connection = PeerConnection::Open(*std::move(fd), options, io_timeout);
  if (!connection.ok())
    return connection.status();
  return std::unique_ptr<PeerBlockClient>(new PeerBlockClient(*std::move(connection)));
}

absl::StatusOr<PeerLookupResult> PeerBlockClient::Lookup(std::span<const PeerDigest> hashes) {
  if (hashes.size() > kMaxPeerBlocksPerRequest) {
    return absl::InvalidArgumentError(
        absl::StrFormat("a KV peer lookup takes at most %d hashes", kMaxPeerBlocksPerRequest));
  }
  auto stream = SendRequest(PeerFrameType::kLookupBlocks,
                            EncodePeerLookupBlocks({.hashes = {hashes.begin(), hashes.end()}}));
  if (!stream.ok())
    return stream.status();
  auto header = ReadReply(*stream, kMaxPeerControlPayloadBytes);
  if (!header.ok())
    return header.status();
  if (header->type != PeerFrameType::kLookupResult)
    return Broken(ProtocolError(
        absl::StrFormat("a %s frame answered a lookup", PeerFrameTypeName(header->type))));
  auto payload = connection_.ReadPayload(*header);
  if (!payload.ok())
    return Broken(payload.status());
  auto result = ParsePeerLookupResult(AsPeerBytes(*payload));
  if (!result.ok())
    return Broken(result.status());
  if (result->block_ids.size() > hashes.size())
    return Broken(ProtocolError("a lookup answered with more blocks than were asked for"));
  return result;
}

absl::Status PeerBlockClient::ReadBlocks(std::span<const int64_t> remote_ids,
                                         const MemoryRegion& dst,
                                         std::span<const int32_t> local_ids) {
  if (remote_ids.size() != local_ids.size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "KV peer read: %d remote blocks for %d local ones", remote_ids.size(), local_ids.size()));
  }
  if (remote_ids.size() > kMaxPeerBlocksPerRequest) {
    return absl::InvalidArgumentError(
        absl::StrFormat("a KV peer read takes at most %d blocks", kMaxPeerBlocksPerRequest));
  }
  for (int32_t id : local_ids) {
    if (id < 0 || id >= dst.num_blocks()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "KV peer read: local block %d is outside the region's %d", id, dst.num_blocks()));
    }
  }
  SY_ASSIGN_OR_RETURN(const PeerBlockList request, WireBlockList(remote_ids));
  auto stream = SendRequest(PeerFrameType::kReadBlocks, EncodePeerBlockList(request));
  if (!stream.ok())
    return stream.status();

  const KvBlockLayout& layout = dst.layout();
  const uint32_t data_payload =
      static_cast<uint32_t>(kPeerBlockDataHeaderBytes + layout.block_bytes());
  std::vector<iovec> iov(1 + layout.num_segments());
  for (size_t i = 0;; ++i) {
    auto header = ReadReply(*stream, std::max(data_payload, kMaxPeerControlPayloadBytes));
    if (!header.ok())
      return header.status();
    if (header->type == PeerFrameType::kReadDone) {
      auto payload = connection_.ReadPayload(*header);
      if (!payload.ok())
        return Broken(payload.status());
      auto done = ParsePeerReadDone(AsPeerBytes(*payload));
      if (!done.ok())
        return Broken(done.status());
      if (done->status.ok() && i != local_ids.size()) {
        return Broken(ProtocolError(
            absl::StrFormat("the read ended after %d of %d blocks", i, local_ids.size())));
      }
      return done->status;
    }
    if (header->type != PeerFrameType::kBlockData || i >= local_ids.size()) {
      return Broken(
          ProtocolError(absl::StrFormat("a %s frame where block %d of %d was due",
                                        PeerFrameTypeName(header->type), i, local_ids.size())));
    }
    if (header->payload_bytes != data_payload) {
      return Broken(ProtocolError(
          absl::StrFormat("a block of %d bytes where this engine's blocks have %d",
                          header->payload_bytes - std::min<uint32_t>(header->payload_bytes, 4),
                          layout.block_bytes())));
    }
    // The sub-header first, checked, and only then the block's bytes into the block it names.
    std::array<uint8_t, kPeerBlockDataHeaderBytes> sub{};
    const iovec sub_iov = {sub.data(), sub.size()};
    if (absl::Status s = connection_.ReadInto({&sub_iov, 1}); !s.ok())
      return Broken(s);
    auto data = ParsePeerBlockDataHeader(sub);
    if (!data.ok())
      return Broken(data.status());
    if (data->index != i) {
      return Broken(ProtocolError(
          absl::StrFormat("block %d of the read sent where block %d was due", data->index, i)));
    }
    for (size_t s = 0; s < layout.num_segments(); ++s)
      iov[s] = {dst.addr(local_ids[i], s), layout.segment_bytes(s)};
    if (absl::Status s = connection_.ReadInto({iov.data(), layout.num_segments()}); !s.ok())
      return Broken(s);
  }
}

absl::Status PeerBlockClient::Release(std::span<const int64_t> remote_ids) {
  SY_ASSIGN_OR_RETURN(const PeerBlockList request, WireBlockList(remote_ids));
  auto stream = SendRequest(PeerFrameType::kReleaseBlocks, EncodePeerBlockList(request));
  return stream.status();
}

absl::StatusOr<uint32_t> PeerBlockClient::SendRequest(PeerFrameType type,
                                                      const std::string& payload) {
  if (!broken_.ok())
    return absl::FailedPreconditionError("KV peer connection is broken: " + broken_.ToString());
  const uint32_t stream_id = next_stream_id_++;
  std::string frame;
  AppendPeerFrame(type, stream_id, payload, &frame);
  if (absl::Status s = connection_.Send(frame); !s.ok())
    return Broken(s);
  return stream_id;
}

absl::StatusOr<PeerFrameHeader> PeerBlockClient::ReadReply(uint32_t stream_id,
                                                           uint32_t max_payload_bytes) {
  auto header = connection_.ReadHeader(max_payload_bytes);
  if (!header.ok())
    return Broken(header.status());
  if (header->type == PeerFrameType::kRefuse) {
    auto payload = connection_.ReadPayload(*header);
    if (!payload.ok())
      return Broken(payload.status());
    auto refuse = ParsePeerRefuse(AsPeerBytes(*payload));
    return Broken(
        refuse.ok() ? absl::InvalidArgumentError("KV peer refused the request: " + refuse->message)
                    : refuse.status());
  }
  if (header->stream_id != stream_id) {
    return Broken(ProtocolError(
        absl::StrFormat("a reply on stream %d to stream %d", header->stream_id, stream_id)));
  }
  return header;
}

absl::Status PeerBlockClient::Broken(absl::Status status) {
  if (!status.ok() && broken_.ok())
    broken_ = status;
  return status;
}

}  // namespace switchyard::kvx
