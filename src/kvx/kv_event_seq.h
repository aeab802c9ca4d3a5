// The sequence-number frame of vLLM's KV-event stream (kv_event_publisher.h has the whole
// format): 8 bytes, big-endian. Live batches and replay answers carry a batch's number
// (0 .. INT64_MAX); a replay request carries the first number wanted; all ones (vLLM's
// END_SEQ, -1 as a signed 64-bit number) closes a replay's answer.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>

namespace switchyard::kvx {

using KvEventSeqFrame = std::array<uint8_t, 8>;

// vLLM's END_SEQ: (-1).to_bytes(8, "big", signed=True).
inline constexpr KvEventSeqFrame kKvEventEndSeq = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

KvEventSeqFrame EncodeKvEventSeq(uint64_t seq);

// The number in `frame`; nullopt unless it is exactly 8 bytes.
std::optional<uint64_t> DecodeKvEventSeq(std::span<const uint8_t> frame);

}  // namespace switchyard::kvx
