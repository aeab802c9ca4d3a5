// Arbitrary bytes as what a KV peer sends down a connection: a run of frames, each decoded
// as a receiver does (header first, with the control-frame limit, then the payload by its
// type) and fed to an acceptor's handshake. Nothing may crash, hang or allocate past the
// input's size; a payload that parses must re-encode to the same bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>

#include "kvx/peer_frame.h"
#include "kvx/peer_handshake.h"
#include "kvx/peer_messages.h"

namespace switchyard::kvx {
namespace {

template <typename Message>
void CheckRoundTrip(const absl::StatusOr<Message>& message, std::string (*encode)(const Message&),
                    std::span<const uint8_t> payload) {
  if (!message.ok())
    return;
  const std::string again = encode(*message);
  if (again != std::string_view(reinterpret_cast<const char*>(payload.data()), payload.size()))
    std::abort();
}

void ParseByType(PeerFrameType type, std::span<const uint8_t> payload) {
  switch (type) {
    case PeerFrameType::kHello:
      return CheckRoundTrip(ParsePeerHello(payload), EncodePeerHello, payload);
    case PeerFrameType::kAuth:
      return CheckRoundTrip(ParsePeerAuth(payload), EncodePeerAuth, payload);
    case PeerFrameType::kRefuse:
      return CheckRoundTrip(ParsePeerRefuse(payload), EncodePeerRefuse, payload);
    case PeerFrameType::kLookupBlocks:
      return CheckRoundTrip(ParsePeerLookupBlocks(payload), EncodePeerLookupBlocks, payload);
    case PeerFrameType::kLookupResult:
      return CheckRoundTrip(ParsePeerLookupResult(payload), EncodePeerLookupResult, payload);
    case PeerFrameType::kReadBlocks:
    case PeerFrameType::kReleaseBlocks:
      return CheckRoundTrip(ParsePeerBlockList(payload), EncodePeerBlockList, payload);
    case PeerFrameType::kBlockData: {
      auto header = ParsePeerBlockDataHeader(payload);
      if (header.ok() && EncodePeerBlockDataHeader(*header) !=
                             std::string_view(reinterpret_cast<const char*>(payload.data()),
                                              kPeerBlockDataHeaderBytes))
        std::abort();
      return;
    }
    case PeerFrameType::kReadDone:
      return CheckRoundTrip(ParsePeerReadDone(payload), EncodePeerReadDone, payload);
  }
}

void Replay(std::span<const uint8_t> input) {
  PeerHandshake handshake({.role = PeerRole::kAcceptor, .engine_id = "fuzz", .secret = "s"},
                          PeerNonce{});
  std::string replies;
  handshake.Start(&replies);
  bool handshaking = true;
  while (input.size() >= kPeerFrameHeaderBytes) {
    auto header = DecodePeerFrameHeader(input.first<kPeerFrameHeaderBytes>(), 1 << 20);
    if (!header.ok())
      return;
    input = input.subspan(kPeerFrameHeaderBytes);
    if (header->payload_bytes > input.size())
      return;
    const auto payload = input.first(header->payload_bytes);
    input = input.subspan(header->payload_bytes);
    ParseByType(header->type, payload);
    if (handshaking && !handshake.done())
      handshaking = handshake.OnFrame(*header, payload, &replies).ok();
  }
}

}  // namespace
}  // namespace switchyard::kvx

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  switchyard::kvx::Replay({data, size});
  return 0;
}
