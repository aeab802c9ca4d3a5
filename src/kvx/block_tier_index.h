// BlockTierIndex: which KV blocks a tier under the engine's pool (host memory, disk) holds,
// in which of its fixed slots, with least-recently-used eviction. Every slot is free,
// being written, or readable; a readable slot may be pinned by readers.
//
//   slot = BeginWrite(key, &evicted)  // a free slot, else the least recently used readable
//                                     // unpinned one (its key comes back in `evicted`)
//   ... the block's bytes are copied into the slot ...
//   EndWrite(slot, ok)                // ok: readable under its key; else free again
//
//   slot = Acquire(key)               // a readable slot, pinned; most recent once released
//   ... the bytes are copied out ...
//   Release(slot)
//
// A slot being written is never handed to a reader, and a pinned slot is never evicted or
// rewritten, so a reader only ever copies the bytes its key names. Keys are the engine's
// 32-byte chained block digests, which already carry the tokens before the block, the LoRA
// and the cache_salt, so one tier safely holds every tenant's blocks.
//
// Not thread-safe: one owner (the engine loop) makes every call.
#pragma once

#include <array>
#include <cstdint>
#include <list>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace switchyard::kvx {

class BlockTierIndex {
 public:
  using Key = std::array<uint8_t, 32>;

  // REQUIRES: num_slots >= 1.
  explicit BlockTierIndex(int64_t num_slots);

  BlockTierIndex(const BlockTierIndex&) = delete;
  BlockTierIndex& operator=(const BlockTierIndex&) = delete;

  // A slot to write `key` into; nullopt, changing nothing, when the key is already held
  // (readable or being written) or every slot is being written or pinned. When a readable
  // block had to make room, `evicted` receives its key (else it is reset).
  std::optional<int64_t> BeginWrite(const Key& key, std::optional<Key>* evicted);
  // Ends the write BeginWrite started. REQUIRES: the slot is being written.
  void EndWrite(int64_t slot, bool ok);

  // The readable slot holding `key`, with one more pin; nullopt when the key is not
  // readable (absent, or still being written).
  std::optional<int64_t> Acquire(const Key& key);
  // Drops a pin; the last one makes the block the most recently used.
  // REQUIRES: the slot is readable and pinned.
  void Release(int64_t slot);

  // Forgets a readable, unpinned block whose bytes turned out bad (a corrupt disk entry):
  // the slot is free again. REQUIRES: the slot is readable and unpinned.
  void Discard(int64_t slot);

  // Whether a readable slot has pins. REQUIRES: the slot is readable.
  bool IsPinned(int64_t slot) const;

  // Whether `key` is readable now.
  bool IsReadable(const Key& key) const;
  // Whether `key` is readable or being written.
  bool Contains(const Key& key) const { return slots_by_key_.contains(key); }

  int64_t num_slots() const { return static_cast<int64_t>(slots_.size()); }
  // Slots readable or being written.
  int64_t num_used() const { return num_slots() - static_cast<int64_t>(free_.size()); }
  int64_t num_readable() const { return num_readable_; }

 private:
  enum class State : uint8_t { kFree, kWriting, kReadable };
  struct Slot {
    Key key{};
    State state = State::kFree;
    int32_t pins = 0;
    // Position in lru_ while readable and unpinned.
    std::list<int64_t>::iterator lru_position;
  };

  std::vector<Slot> slots_;
  absl::flat_hash_map<Key, int64_t> slots_by_key_;
  // Free slots, taken from the back.
  std::vector<int64_t> free_;
  // Readable unpinned slots, least recently used first: the eviction candidates.
  std::list<int64_t> lru_;
  int64_t num_readable_ = 0;
};

}  // namespace switchyard::kvx
