#include "engine/cbor.h"

namespace switchyard::engine {

void CborEncoder::AddHead(uint8_t major, uint64_t argument) {
  const uint8_t type_bits = static_cast<uint8_t>(major << 5);
  if (argument < 24) {
    buffer_.push_back(static_cast<uint8_t>(type_bits | argument));
    return;
  }
  int num_bytes;
  uint8_t info;
  if (argument <= 0xff) {
    num_bytes = 1;
    info = 24;
  } else if (argument <= 0xffff) {
    num_bytes = 2;
    info = 25;
  } else if (argument <= 0xffffffffULL) {
    num_bytes = 4;
    info = 26;
  } else {
    num_bytes = 8;
    info = 27;
  }
  buffer_.push_back(static_cast<uint8_t>(type_bits | info));
  for (int shift = (num_bytes - 1) * 8; shift >= 0; shift -= 8) {
    buffer_.push_back(static_cast<uint8_t>(argument >> shift));
  }
}

void CborEncoder::AddInt(int64_t value) {
  if (value >= 0) {
    AddHead(kMajorUnsigned, static_cast<uint64_t>(value));
  } else {
    // -1 - value computed in unsigned arithmetic so that INT64_MIN does not overflow.
    AddHead(kMajorNegative, ~static_cast<uint64_t>(value));
  }
}

void CborEncoder::AddBytes(std::span<const uint8_t> bytes) {
  AddHead(kMajorBytes, bytes.size());
  buffer_.insert(buffer_.end(), bytes.begin(), bytes.end());
}

void CborEncoder::AddText(std::string_view text) {
  AddHead(kMajorText, text.size());
  buffer_.insert(buffer_.end(), text.begin(), text.end());
}

}  // namespace switchyard::engine
