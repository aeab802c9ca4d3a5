// CborEncoder: the small subset of canonical CBOR (RFC 8949 §4.2.1, as cbor2's
// canonical=True writes it) that vLLM's sha256_cbor block hashes need: integers in their
// shortest head, byte and text strings, definite-length arrays and null. Python tuples and
// lists both encode as arrays. Maps, floats, tags and big integers are not needed.
//
// Not thread-safe; one encoder per thread. The buffer is reused across Clear() calls so a
// warm encoder does not allocate.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace switchyard::engine {

class CborEncoder {
 public:
  void Clear() { buffer_.clear(); }

  void AddUnsigned(uint64_t value) { AddHead(kMajorUnsigned, value); }
  // Negative values use major type 1 (-1 - n), as cbor2 does for negative Python ints.
  void AddInt(int64_t value);
  void AddBytes(std::span<const uint8_t> bytes);
  // REQUIRES: `text` is UTF-8 (CBOR text strings carry UTF-8; the length is in bytes).
  void AddText(std::string_view text);
  // Starts an array; the caller then adds exactly `size` items.
  void BeginArray(uint64_t size) { AddHead(kMajorArray, size); }
  void AddNull() { buffer_.push_back(0xf6); }

  std::span<const uint8_t> bytes() const { return buffer_; }

 private:
  static constexpr uint8_t kMajorUnsigned = 0;
  static constexpr uint8_t kMajorNegative = 1;
  static constexpr uint8_t kMajorBytes = 2;
  static constexpr uint8_t kMajorText = 3;
  static constexpr uint8_t kMajorArray = 4;

  // Writes a major type with its argument in the shortest form canonical CBOR requires.
  void AddHead(uint8_t major, uint64_t argument);

  std::vector<uint8_t> buffer_;
};

}  // namespace switchyard::engine
