#include "router/request_id.h"

#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

#include "absl/random/random.h"

namespace switchyard::router {

namespace {

// Each byte's two lower-case hex digits.
constexpr std::array<std::array<char, 2>, 256> HexPairs() {
  constexpr std::string_view kHex = "0123456789abcdef";
  std::array<std::array<char, 2>, 256> table{};
  for (size_t byte = 0; byte < table.size(); ++byte)
    table[byte] = {kHex[byte >> 4], kHex[byte & 0xf]};
  return table;
}
constexpr std::array<std::array<char, 2>, 256> kHexPairs = HexPairs();

// Where each of the id's 16 bytes (most significant first) starts in
// "xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx".
constexpr std::array<uint8_t, 16> kBytePositions = {0,  2,  4,  6,  9,  11, 14, 16,
                                                    19, 21, 24, 26, 28, 30, 32, 34};

}  // namespace

std::string NewRequestId() {
  // PCG64 with 128 bits of state, seeded per thread from the OS's entropy, so that threads
  // and router replicas do not share sequences; a draw is a few multiplies.
  thread_local absl::InsecureBitGen rng;
  uint64_t hi = rng();
  uint64_t lo = rng();
  hi = (hi & ~uint64_t{0xf000}) | uint64_t{0x4000};            // version 4
  lo = (lo & ~(uint64_t{0xc} << 60)) | (uint64_t{0x8} << 60);  // variant 10
  std::string id(36, '-');
#pragma GCC unroll 16  // constant shifts and positions: a load and a store per byte
  for (int i = 0; i < 16; ++i) {
    const uint64_t word = i < 8 ? hi : lo;
    const uint8_t byte = static_cast<uint8_t>(word >> (56 - 8 * (i % 8)));
    std::memcpy(&id[kBytePositions[i]], kHexPairs[byte].data(), 2);
  }
  return id;
}

std::string RequestIdOf(const net::HttpRequest& request) {
  const std::optional<std::string_view> id = request.Header("x-request-id");
  if (id.has_value() && !id->empty())
    return std::string(*id);
  return NewRequestId();
}

}  // namespace switchyard::router
