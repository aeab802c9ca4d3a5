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

#include "absl/base/attributes.h"
#include "absl/container/inlined_vector.h"
#include "absl/hash/hash.h"
#include "absl/strings/string_view.h"

namespace switchyard::text::internal {

class WordCache {
 public:
  // Holds about `capacity` words: concurrent inserts may pass it by one per thread.
  explicit WordCache(size_t capacity);
  ~WordCache();
  WordCache(const WordCache&) = delete;
  WordCache& operator=(const WordCache&) = delete;

  // Hash and Lookup are defined below, inline: a hit is a few dozen instructions, so a call
  // would cost a good part of it.
  static size_t Hash(std::string_view word);

  // Appends the ids cached for `word` to `ids` and returns true; false when not cached.
  // REQUIRES: hash == Hash(word).
  ABSL_ATTRIBUTE_ALWAYS_INLINE bool Lookup(std::string_view word, size_t hash,
                                           std::vector<int32_t>* ids) const;
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

inline size_t WordCache::Hash(std::string_view word) {
  // Debian's Abseil keeps its own string_view.
  return absl::Hash<absl::string_view>()(absl::string_view(word.data(), word.size()));
}

inline bool WordCache::Lookup(std::string_view word, size_t hash, std::vector<int32_t>* ids) const {
  const size_t mask = num_slots_ - 1;
  for (size_t probe = 0, i = hash & mask; probe < num_slots_; ++probe, i = (i + 1) & mask) {
    const Entry* entry = slots_[i].load(std::memory_order_acquire);
    if (entry == nullptr)
      return false;
    if (entry->hash == hash && entry->word == word) {
      // A push_back costs a fraction of a range insert.
      if (entry->ids.size() == 1) {
        ids->push_back(entry->ids[0]);
      } else {
        ids->insert(ids->end(), entry->ids.begin(), entry->ids.end());
      }
      return true;
    }
  }
  return false;
}

}  // namespace switchyard::text::internal
