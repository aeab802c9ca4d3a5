#include "router/request_id.h"

#include <cstdint>
#include <optional>
#include <random>
#include <string_view>

#include "fmt/format.h"

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
  return fmt::format("{:08x}-{:04x}-{:04x}-{:04x}-{:012x}", hi >> 32, (hi >> 16) & 0xffff,
                     hi & 0xffff, lo >> 48, lo & 0xffffffffffffULL);
}

std::string RequestIdOf(const net::HttpRequest& request) {
  const std::optional<std::string_view> id = request.Header("x-request-id");
  if (id.has_value() && !id->empty())
    return std::string(*id);
  return NewRequestId();
}

}  // namespace switchyard::router
