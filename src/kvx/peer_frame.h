// The framing of the KV peer protocol: what two engines (or an engine and a tier server)
// send each other over a byte stream to move KV blocks. Every frame is a fixed 16-byte
// header and a payload of the length the header states:
//
//   offset 0  magic       4 bytes  "SYKV"
//          4  version     u8       kPeerProtocolVersion
//          5  type        u8       PeerFrameType
//          6  flags       u16      reserved, 0 in version 1
//          8  stream id   u32      pairs a request with its replies; 0 = the connection
//         12  length      u32      payload bytes that follow
//
// Integers are little-endian. The header is decoded and checked before any payload byte is
// read, so a receiver can bound the read (and, for block data, read straight into the block
// it has checked the frame names) and refuse a frame of the wrong version, type or length
// without buffering it. Payloads are peer_messages.h's.
//
// Pure functions; no state, any thread.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace switchyard::kvx {

inline constexpr uint8_t kPeerProtocolVersion = 1;
inline constexpr size_t kPeerFrameHeaderBytes = 16;

enum class PeerFrameType : uint8_t {
  // Handshake, in this order on a new connection: both sides send kHello, then both kAuth;
  // either may send kRefuse instead and close.
  kHello = 1,
  kAuth = 2,
  kRefuse = 3,
  // Requests and replies, tagged with the requester's stream id.
  kLookupBlocks = 4,   // which of these block hashes do you hold? (a prefix pull)
  kLookupResult = 5,   // the leading hashes held, their block ids, pinned under a lease
  kReadBlocks = 6,     // send me these block ids
  kBlockData = 7,      // one block of a kReadBlocks, by its position in the request
  kReadDone = 8,       // the end of a kReadBlocks' replies, with its status
  kReleaseBlocks = 9,  // done with blocks pinned by a lookup: end their lease early
};

// The name of a frame type for logs and errors ("hello", "block_data"); "unknown" otherwise.
const char* PeerFrameTypeName(PeerFrameType type);

struct PeerFrameHeader {
  PeerFrameType type = PeerFrameType::kHello;
  uint32_t stream_id = 0;
  uint32_t payload_bytes = 0;
};

// The header's 16 bytes.
std::array<uint8_t, kPeerFrameHeaderBytes> EncodePeerFrameHeader(const PeerFrameHeader& header);

// Decodes and checks a header. `max_payload_bytes` bounds the length a receiver accepts for
// this frame (control frames are small; block data is one block plus its sub-header).
// Errors (InvalidArgument, naming what is wrong): wrong magic, an unknown version, type or
// a non-zero flags field, a length over `max_payload_bytes`.
absl::StatusOr<PeerFrameHeader> DecodePeerFrameHeader(
    std::span<const uint8_t, kPeerFrameHeaderBytes> bytes, uint32_t max_payload_bytes);

// A payload held in a string (as the encoders of peer_messages.h return it) as bytes.
inline std::span<const uint8_t> AsPeerBytes(std::string_view payload) {
  return {reinterpret_cast<const uint8_t*>(payload.data()), payload.size()};
}

// Appends a whole frame (header, then `payload`: an encoder's output from
// peer_messages.h) to `out`. REQUIRES: payload.size() fits in u32.
void AppendPeerFrame(PeerFrameType type, uint32_t stream_id, std::string_view payload,
                     std::string* out);

}  // namespace switchyard::kvx
