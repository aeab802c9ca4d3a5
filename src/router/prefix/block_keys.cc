#include "router/prefix/block_keys.h"

// xxHash compiled in here, inlined: the keys hash a few dozen bytes at a time, where the
// shared library's call and dispatch cost about as much as the hashing.
#define XXH_INLINE_ALL
#include <algorithm>
#include <array>
#include <bit>
#include <cstring>

#include <xxhash.h>

namespace switchyard::router {
namespace {

void PutLe64(uint64_t v, uint8_t* out) {
  for (int i = 0; i < 8; ++i)
    out[i] = static_cast<uint8_t>(v >> (8 * i));
}

}  // namespace

uint64_t PrefixSeed(std::string_view model, std::string_view cache_salt) {
  XXH64_state_t state;
  XXH64_reset(&state, 0);
  XXH64_update(&state, model.data(), model.size());
  XXH64_update(&state, cache_salt.data(), cache_salt.size());
  return XXH64_digest(&state);
}

uint64_t NextBlockKey(uint64_t parent, std::span<const int32_t> block_tokens) {
  // The tokens' bytes are hashed as little-endian int32s: on a little-endian host that is
  // their memory, hashed in one call (a call per token cost ~70 instructions each).
  uint64_t tokens_hash = 0;
  if constexpr (std::endian::native == std::endian::little) {
    tokens_hash = XXH64(block_tokens.data(), block_tokens.size_bytes(), 0);
  } else {
    XXH64_state_t state;
    XXH64_reset(&state, 0);
    for (int32_t t : block_tokens) {
      uint8_t le[4];
      const auto u = static_cast<uint32_t>(t);
      for (int i = 0; i < 4; ++i)
        le[i] = static_cast<uint8_t>(u >> (8 * i));
      XXH64_update(&state, le, sizeof(le));
    }
    tokens_hash = XXH64_digest(&state);
  }
  std::array<uint8_t, 16> chain{};
  PutLe64(tokens_hash, chain.data());
  PutLe64(parent, chain.data() + 8);
  return XXH64(chain.data(), chain.size(), 0);
}

std::vector<uint64_t> BlockKeys(uint64_t seed, std::span<const int32_t> tokens, int32_t block_size,
                                bool include_partial, size_t max_blocks) {
  const auto bs = static_cast<size_t>(block_size);
  size_t n = tokens.size() / bs;
  if (include_partial && tokens.size() % bs != 0)
    ++n;
  n = std::min(n, max_blocks);
  std::vector<uint64_t> keys;
  keys.reserve(n);
  uint64_t parent = seed;
  for (size_t i = 0; i < n; ++i) {
    const size_t begin = i * bs;
    parent = NextBlockKey(parent, tokens.subspan(begin, std::min(bs, tokens.size() - begin)));
    keys.push_back(parent);
  }
  return keys;
}

}  // namespace switchyard::router
