#include "kvx/block_tier_index.h"

#include "base/logging.h"

namespace switchyard::kvx {

BlockTierIndex::BlockTierIndex(int64_t num_slots) : slots_(static_cast<size_t>(num_slots)) {
  SY_CHECK(num_slots >= 1);
  free_.reserve(static_cast<size_t>(num_slots));
  // Slot 0 is handed out first.
  for (int64_t slot = num_slots - 1; slot >= 0; --slot)
    free_.push_back(slot);
}

std::optional<int64_t> BlockTierIndex::BeginWrite(const Key& key, std::optional<Key>* evicted) {
  evicted->reset();
  if (slots_by_key_.contains(key))
    return std::nullopt;
  int64_t slot = 0;
  if (!free_.empty()) {
    slot = free_.back();
    free_.pop_back();
  } else if (!lru_.empty()) {
    slot = lru_.front();
    lru_.pop_front();
    Slot& victim = slots_[static_cast<size_t>(slot)];
    *evicted = victim.key;
    slots_by_key_.erase(victim.key);
    --num_readable_;
  } else {
    return std::nullopt;
  }
  Slot& s = slots_[static_cast<size_t>(slot)];
  s.key = key;
  s.state = State::kWriting;
  s.pins = 0;
  slots_by_key_.emplace(key, slot);
  return slot;
}

void BlockTierIndex::EndWrite(int64_t slot, bool ok) {
  Slot& s = slots_[static_cast<size_t>(slot)];
  SY_CHECK(s.state == State::kWriting);
  if (ok) {
    s.state = State::kReadable;
    s.lru_position = lru_.insert(lru_.end(), slot);
    ++num_readable_;
    return;
  }
  slots_by_key_.erase(s.key);
  s.state = State::kFree;
  free_.push_back(slot);
}

std::optional<int64_t> BlockTierIndex::Acquire(const Key& key) {
  auto it = slots_by_key_.find(key);
  if (it == slots_by_key_.end())
    return std::nullopt;
  Slot& s = slots_[static_cast<size_t>(it->second)];
  if (s.state != State::kReadable)
    return std::nullopt;
  if (s.pins++ == 0)
    lru_.erase(s.lru_position);
  return it->second;
}

void BlockTierIndex::Release(int64_t slot) {
  Slot& s = slots_[static_cast<size_t>(slot)];
  SY_CHECK(s.state == State::kReadable && s.pins > 0);
  if (--s.pins == 0)
    s.lru_position = lru_.insert(lru_.end(), slot);
}

void BlockTierIndex::Discard(int64_t slot) {
  Slot& s = slots_[static_cast<size_t>(slot)];
  SY_CHECK(s.state == State::kReadable && s.pins == 0);
  lru_.erase(s.lru_position);
  slots_by_key_.erase(s.key);
  s.state = State::kFree;
  --num_readable_;
  free_.push_back(slot);
}

bool BlockTierIndex::IsPinned(int64_t slot) const {
  const Slot& s = slots_[static_cast<size_t>(slot)];
  SY_CHECK(s.state == State::kReadable);
  return s.pins > 0;
}

bool BlockTierIndex::IsReadable(const Key& key) const {
  auto it = slots_by_key_.find(key);
  return it != slots_by_key_.end() &&
         slots_[static_cast<size_t>(it->second)].state == State::kReadable;
}

}  // namespace switchyard::kvx
