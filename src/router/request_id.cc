#include "router/request_id.h"

#include <cstdint>
#include <optional>
#include <random>
#include <string_view>

namespace switchyard::router {

namespace {

// Seeded with 128 bits, so that threads and router replicas do not share sequences.
std::mt19937_64 SeededRng() {
  std::random_device device;
  std::seed_seq seed{device(), device(), device(), device()};
  return std::mt19937_64(seed);
}

}  // namespace

std::string NewRequestId() {
  thread_local std::mt19937_64 rng = SeededRng();
  uint64_t hi = rng();
  uint64_t lo = rng();
  hi = (hi & ~uint64_t{0xf000}) | uint64_t{0x4000};            // version 4
  lo = (lo & ~(uint64_t{0xc} << 60)) | (uint64_t{0x8} << 60);  // variant 10
  // "xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx": hi's 16 hex digits, then lo's, dashes between.
  constexpr std::string_view kHex = "0123456789abcdef";
  std::string id(36, '-');
  size_t pos = 0;
  for (int i = 0; i < 32; ++i) {
    if (pos == 8 || pos == 13 || pos == 18 || pos == 23)
      ++pos;
    const uint64_t word = i < 16 ? hi : lo;
    id[pos++] = kHex[(word >> (60 - 4 * (i % 16))) & 0xf];
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
