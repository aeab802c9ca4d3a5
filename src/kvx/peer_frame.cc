#include "kvx/peer_frame.h"

#include <cstring>

#include "absl/strings/str_format.h"

#include "base/byte_reader.h"
#include "base/byte_writer.h"

namespace switchyard::kvx {
namespace {

constexpr uint8_t kFrameMagic[4] = {'S', 'Y', 'K', 'V'};
constexpr uint8_t kLastType = static_cast<uint8_t>(PeerFrameType::kReleaseBlocks);

}  // namespace

const char* PeerFrameTypeName(PeerFrameType type) {
  switch (type) {
    case PeerFrameType::kHello:
      return "hello";
    case PeerFrameType::kAuth:
      return "auth";
    case PeerFrameType::kRefuse:
      return "refuse";
    case PeerFrameType::kLookupBlocks:
      return "lookup_blocks";
    case PeerFrameType::kLookupResult:
      return "lookup_result";
    case PeerFrameType::kReadBlocks:
      return "read_blocks";
    case PeerFrameType::kBlockData:
      return "block_data";
    case PeerFrameType::kReadDone:
      return "read_done";
    case PeerFrameType::kReleaseBlocks:
      return "release_blocks";
  }
  return "unknown";
}

std::array<uint8_t, kPeerFrameHeaderBytes> EncodePeerFrameHeader(const PeerFrameHeader& header) {
  std::string bytes(reinterpret_cast<const char*>(kFrameMagic), sizeof(kFrameMagic));
  base::AppendLittleEndian(kPeerProtocolVersion, &bytes);
  base::AppendLittleEndian(static_cast<uint8_t>(header.type), &bytes);
  base::AppendLittleEndian(uint16_t{0}, &bytes);
  base::AppendLittleEndian(header.stream_id, &bytes);
  base::AppendLittleEndian(header.payload_bytes, &bytes);
  std::array<uint8_t, kPeerFrameHeaderBytes> out{};
  std::memcpy(out.data(), bytes.data(), out.size());
  return out;
}

absl::StatusOr<PeerFrameHeader> DecodePeerFrameHeader(
    std::span<const uint8_t, kPeerFrameHeaderBytes> bytes, uint32_t max_payload_bytes) {
  if (std::memcmp(bytes.data(), kFrameMagic, sizeof(kFrameMagic)) != 0)
    return absl::InvalidArgumentError("KV peer frame: bad magic (not a Switchyard KV peer)");
  base::ByteReader reader(bytes.subspan(sizeof(kFrameMagic)));
  uint8_t version = 0, type = 0;
  uint16_t flags = 0;
  PeerFrameHeader header;
  // The span's size is fixed, so these reads cannot run short.
  reader.Read(&version);
  reader.Read(&type);
  reader.Read(&flags);
  reader.Read(&header.stream_id);
  reader.Read(&header.payload_bytes);
  if (version != kPeerProtocolVersion) {
    return absl::InvalidArgumentError(
        absl::StrFormat("KV peer frame: protocol version %d, this engine speaks %d", version,
                        kPeerProtocolVersion));
  }
  if (type == 0 || type > kLastType)
    return absl::InvalidArgumentError(absl::StrFormat("KV peer frame: unknown type %d", type));
  if (flags != 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("KV peer frame: flags 0x%04x set; version 1 defines none", flags));
  }
  header.type = static_cast<PeerFrameType>(type);
  if (header.payload_bytes > max_payload_bytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("KV peer frame: %s payload of %d bytes exceeds the limit of %d",
                        PeerFrameTypeName(header.type), header.payload_bytes, max_payload_bytes));
  }
  return header;
}

void AppendPeerFrame(PeerFrameType type, uint32_t stream_id, std::string_view payload,
                     std::string* out) {
  const auto header =
      EncodePeerFrameHeader({.type = type,
                             .stream_id = stream_id,
                             .payload_bytes = static_cast<uint32_t>(payload.size())});
  out->append(reinterpret_cast<const char*>(header.data()), header.size());
  out->append(payload);
}

}  // namespace switchyard::kvx
