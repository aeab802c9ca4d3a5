#include "kvx/kv_events.h"

#include <algorithm>

namespace switchyard::kvx {

EventHash EventHash::FromInt(uint64_t value) {
  EventHash hash;
  hash.is_int_ = true;
  hash.size_ = 8;
  for (int i = 7; i >= 0; --i) {
    hash.bytes_[i] = static_cast<uint8_t>(value & 0xff);
    value >>= 8;
  }
  return hash;
}

EventHash EventHash::FromBytes(std::span<const uint8_t> bytes) {
  EventHash hash;
  hash.size_ = static_cast<uint8_t>(std::min(bytes.size(), kMaxBytes));
  std::copy_n(bytes.begin(), hash.size_, hash.bytes_.begin());
  return hash;
}

uint64_t EventHash::AsUint64() const {
  uint64_t value = 0;
  for (size_t i = size_ > 8 ? size_ - 8 : 0; i < size_; ++i)
    value = (value << 8) | bytes_[i];
  return value;
}

}  // namespace switchyard::kvx
