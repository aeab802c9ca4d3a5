// A bounds-checked little-endian cursor over a byte buffer that the caller keeps alive: model
// files and KV peer frames are read through it.
// Every read checks the remaining length first, so a truncated or hostile buffer yields
// false instead of a read past the end. Not thread-safe; one parser owns one reader.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>

namespace switchyard::base {

static_assert(std::endian::native == std::endian::little,
              "binary readers (model files, wire frames) assume a little-endian host");

class ByteReader {
 public:
  explicit ByteReader(std::span<const uint8_t> bytes) : bytes_(bytes) {}

  uint64_t position() const { return pos_; }
  uint64_t remaining() const { return bytes_.size() - pos_; }
  const uint8_t* current() const { return bytes_.data() + pos_; }

  template <typename T>
  bool Read(T* out) {
    if (remaining() < sizeof(T)) {
      return false;
    }
    std::memcpy(out, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }

  bool Skip(uint64_t n) {
    if (remaining() < n) {
      return false;
    }
    pos_ += n;
    return true;
  }

  // Reads `n` bytes as a view into the buffer.
  bool ReadBytes(uint64_t n, std::string_view* out) {
    if (remaining() < n) {
      return false;
    }
    *out = std::string_view(reinterpret_cast<const char*>(bytes_.data() + pos_), n);
    pos_ += n;
    return true;
  }

 private:
  std::span<const uint8_t> bytes_;
  uint64_t pos_ = 0;
};

}  // namespace switchyard::base
