// The payloads of the KV peer protocol's frames (peer_frame.h), as value structs with an
// encoder and a strict parser each. Parsers take bytes from a peer that may be hostile:
// every count is checked against the bytes present and against kMaxPeerBlocksPerRequest,
// trailing bytes are an error, and nothing is allocated before its size has been checked.
// Block ids are u32 on the wire (vLLM's remote_block_ids are non-negative ints); block
// hashes are the engine's 32-byte SHA-256 prefix-cache hashes.
//
// Pure functions; no state, any thread.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "kvx/peer_frame.h"

namespace switchyard::kvx {

// Bounds a request's block list: 65,536 blocks of 16 tokens is a 1M-token prefix.
inline constexpr uint32_t kMaxPeerBlocksPerRequest = 65536;
inline constexpr size_t kMaxPeerEngineIdBytes = 255;
inline constexpr size_t kMaxPeerMessageBytes = 1024;

using PeerNonce = std::array<uint8_t, 16>;
using PeerDigest = std::array<uint8_t, 32>;

// kHello: who is speaking and what KV it holds. Connections between engines whose
// compatibility hashes differ (kv_block_layout.h's KvCompatibility) are refused.
struct PeerHello {
  PeerDigest compatibility_hash{};
  // Fresh random bytes per connection: the challenge the other side's kAuth answers.
  PeerNonce nonce{};
  // vLLM's engine_id of the sender; at most kMaxPeerEngineIdBytes.
  std::string engine_id;

  friend bool operator==(const PeerHello&, const PeerHello&) = default;
};

// kAuth: proof of the shared secret over both hellos (peer_auth.h).
struct PeerAuth {
  PeerDigest mac{};

  friend bool operator==(const PeerAuth&, const PeerAuth&) = default;
};

enum class PeerRefusal : uint16_t {
  kIncompatible = 1,     // compatibility hashes differ
  kUnauthenticated = 2,  // wrong or missing proof of the shared secret
  kBusy = 3,             // too many connections or transfers
  kProtocolError = 4,    // a frame this side could not accept
};

// kRefuse: why the sender closes the connection; the message is for logs, at most
// kMaxPeerMessageBytes.
struct PeerRefuse {
  PeerRefusal reason = PeerRefusal::kProtocolError;
  std::string message;

  friend bool operator==(const PeerRefuse&, const PeerRefuse&) = default;
};

// kLookupBlocks: a prompt's chained block hashes, first block first.
struct PeerLookupBlocks {
  std::vector<PeerDigest> hashes;

  friend bool operator==(const PeerLookupBlocks&, const PeerLookupBlocks&) = default;
};

// kLookupResult: the ids of the longest leading run of the looked-up hashes the sender
// holds (block_ids[i] holds hashes[i]), pinned for `lease_ms` or until kReleaseBlocks.
struct PeerLookupResult {
  std::vector<uint32_t> block_ids{};
  uint32_t lease_ms = 0;

  friend bool operator==(const PeerLookupResult&, const PeerLookupResult&) = default;
};

// kReadBlocks and kReleaseBlocks: block ids of the receiver.
struct PeerBlockList {
  std::vector<uint32_t> block_ids;

  friend bool operator==(const PeerBlockList&, const PeerBlockList&) = default;
};

// kReadDone: the end of a kReadBlocks' replies: OK, or why some block was not sent (the
// message cut to kMaxPeerMessageBytes).
struct PeerReadDone {
  absl::Status status;

  friend bool operator==(const PeerReadDone&, const PeerReadDone&) = default;
};

// kBlockData's payload is this sub-header and then the block's bytes, which a receiver
// reads straight into the block at `index` of its kReadBlocks request after checking the
// index and the byte count.
inline constexpr size_t kPeerBlockDataHeaderBytes = 4;
struct PeerBlockDataHeader {
  // Position in the kReadBlocks request's block list.
  uint32_t index = 0;
};

// A whole kRefuse frame (connection-level, stream 0) appended to `out`: what every side sends
// before closing a connection it will not serve.
void AppendPeerRefuseFrame(PeerRefusal reason, std::string_view message, std::string* out);

std::string EncodePeerHello(const PeerHello& hello);
std::string EncodePeerAuth(const PeerAuth& auth);
std::string EncodePeerRefuse(const PeerRefuse& refuse);
std::string EncodePeerLookupBlocks(const PeerLookupBlocks& lookup);
std::string EncodePeerLookupResult(const PeerLookupResult& result);
std::string EncodePeerBlockList(const PeerBlockList& blocks);
std::string EncodePeerBlockDataHeader(const PeerBlockDataHeader& header);
std::string EncodePeerReadDone(const PeerReadDone& done);

// Errors: InvalidArgument naming the message and what is wrong (short, trailing bytes, a
// count over its limit, an unknown refusal reason or status code).
absl::StatusOr<PeerHello> ParsePeerHello(std::span<const uint8_t> payload);
absl::StatusOr<PeerAuth> ParsePeerAuth(std::span<const uint8_t> payload);
absl::StatusOr<PeerRefuse> ParsePeerRefuse(std::span<const uint8_t> payload);
absl::StatusOr<PeerLookupBlocks> ParsePeerLookupBlocks(std::span<const uint8_t> payload);
absl::StatusOr<PeerLookupResult> ParsePeerLookupResult(std::span<const uint8_t> payload);
absl::StatusOr<PeerBlockList> ParsePeerBlockList(std::span<const uint8_t> payload);
// Reads only the first kPeerBlockDataHeaderBytes; the block bytes after them are the caller's.
absl::StatusOr<PeerBlockDataHeader> ParsePeerBlockDataHeader(std::span<const uint8_t> payload);
absl::StatusOr<PeerReadDone> ParsePeerReadDone(std::span<const uint8_t> payload);

}  // namespace switchyard::kvx
