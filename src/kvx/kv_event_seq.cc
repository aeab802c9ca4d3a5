#include "kvx/kv_event_seq.h"

namespace switchyard::kvx {

KvEventSeqFrame EncodeKvEventSeq(uint64_t seq) {
  KvEventSeqFrame out{};
  for (size_t i = out.size(); i-- > 0;) {
    out[i] = static_cast<uint8_t>(seq & 0xff);
    seq >>= 8;
  }
  return out;
}

std::optional<uint64_t> DecodeKvEventSeq(std::span<const uint8_t> frame) {
  if (frame.size() != KvEventSeqFrame{}.size())
    return std::nullopt;
  uint64_t seq = 0;
  for (uint8_t b : frame)
    seq = seq << 8 | b;
  return seq;
}

}  // namespace switchyard::kvx
