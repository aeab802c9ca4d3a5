// WordCache: the BPE model's cache of encoded words (word bytes -> token ids), shared by all
// threads that encode with one model. Insert-only with a fixed capacity (like HF's cache, it
// stops caching when full rather than evicting, and the words seen first are the common
// ones), which allows a lock-free design: an open-addressing table of atomic pointers to
// immutable entries. A lookup is a few loads with acquire ordering (plain loads on x86): no
// lock and no atomic read-modify-write, which matters because on a warm server nearly every
// word is a hit, from many threads at once. An insert publishes a fully built entry with
// one compare-and-swap; of two threads inserting the same word, one entry stays.
// Thread-safe: Lookup and Insert may be called from any number of threads at once. The
// cache owns its entries; they live until it is destroyed.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/inlined_vector.h"

namespace switchyard::text::internal {

class WordCache {
 public:
  // Holds about `capacity` words: concurrent inserts may pass it by one per thread.
  explicit WordCache(size_t capacity);
  ~WordCache();
  WordCache(const WordCache&) = delete;
  WordCache& operator=(const WordCache&) = delete;

  static size_t Hash(std::string_view word);

  // Appends the ids cached for `word` to `ids` and returns true; false when not cached.
  // REQUIRES: hash == Hash(word).
  bool Lookup(std::string_view word, size_t hash, std::vector<int32_t>* ids) const;
  // Caches `ids` for `word` unless the cache is full or already holds `word`.
  // REQUIRES: hash == Hash(word).
  void Insert(std::string_view word, size_t hash, std::span<const int32_t> ids);

 private:
  struct Entry {
    size_t hash;
    std::string word;
    // Most words are one or two tokens: no allocation besides the entry's own.
    absl::InlinedVector<int32_t, 2> ids;
  };

  const size_t capacity_;
  // A power of two, at least twice the capacity, so that probe runs stay short; 0 when the
  // capacity is 0.
  const size_t num_slots_;
  std::unique_ptr<std::atomic<const Entry*>[]> slots_;
  std::atomic<size_t> size_{0};
};

}  // namespace switchyard::text::internal
