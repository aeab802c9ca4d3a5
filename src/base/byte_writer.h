// Appends fixed-width integers little-endian to a byte string: the writing side of
// byte_reader.h, for the binary formats the project emits (KV peer frames).
#pragma once

#include <bit>
#include <cstring>
#include <string>
#include <type_traits>

namespace switchyard::base {

static_assert(std::endian::native == std::endian::little,
              "binary writers assume a little-endian host");

template <typename T>
requires std::is_integral_v<T>
void AppendLittleEndian(T value, std::string* out) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  out->append(bytes, sizeof(T));
}

}  // namespace switchyard::base
