// Router-side prefix keys: a chain of 64-bit keys, one per block of prompt tokens, in the
// form llm-d's prefix producers use (requestcontrol/dataproducer/approximateprefix,
// prefixhash/hashing.go):
//   seed    = XXH64(model name ‖ cache_salt)
//   block   = XXH64(token ids as little-endian uint32s)
//   key[i]  = XXH64(LE64(block) ‖ LE64(key[i-1])), key[-1] = seed
// A key names a whole prefix, so "endpoint holds key[i]" means it holds blocks 0..i.
// The same function keys requests (approximate and precise modes) and the token ids that
// engines' BlockStored events carry (precise mode), so the router never needs an engine's
// hash algorithm or seed. Stateless; any thread.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace switchyard::router {

uint64_t PrefixSeed(std::string_view model, std::string_view cache_salt);

// The key after `parent` for one block of tokens.
uint64_t NextBlockKey(uint64_t parent, std::span<const int32_t> block_tokens);

// Keys of the full blocks of `tokens` (and of the trailing partial block when
// `include_partial`), at most max_blocks of them. REQUIRES: block_size > 0.
std::vector<uint64_t> BlockKeys(uint64_t seed, std::span<const int32_t> tokens, int32_t block_size,
                                bool include_partial, size_t max_blocks);

}  // namespace switchyard::router
