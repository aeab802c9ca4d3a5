#include "text/internal/word_cache.h"

#include <bit>

namespace switchyard::text::internal {

WordCache::WordCache(size_t capacity)
    : capacity_(capacity),
      num_slots_(capacity == 0 ? 0 : std::bit_ceil(2 * capacity)),
      slots_(std::make_unique<std::atomic<const Entry*>[]>(num_slots_)) {}

WordCache::~WordCache() {
  for (size_t i = 0; i < num_slots_; ++i)
    delete slots_[i].load(std::memory_order_relaxed);
}

void WordCache::Insert(std::string_view word, size_t hash, std::span<const int32_t> ids) {
  if (size_.load(std::memory_order_relaxed) >= capacity_)
    return;
  auto entry = std::make_unique<Entry>(
      Entry{hash, std::string(word), absl::InlinedVector<int32_t, 2>(ids.begin(), ids.end())});
  const size_t mask = num_slots_ - 1;
  for (size_t probe = 0, i = hash & mask; probe < num_slots_; ++probe, i = (i + 1) & mask) {
    const Entry* present = slots_[i].load(std::memory_order_acquire);
    if (present == nullptr) {
      // Release: a reader that sees the pointer sees the entry's contents.
      if (slots_[i].compare_exchange_strong(present, entry.get(), std::memory_order_release,
                                            std::memory_order_acquire)) {
        static_cast<void>(entry.release());  // slots_[i] owns it now
        size_.fetch_add(1, std::memory_order_relaxed);
        return;
      }
      // Another thread filled the slot first; `present` is its entry.
    }
    if (present->hash == hash && present->word == word)
      return;
  }
}

}  // namespace switchyard::text::internal
