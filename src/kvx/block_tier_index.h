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
// The index is a fixed-size record (no pointers, no allocation after creation) in memory it
// is given, so it can live in shared memory and serve several processes at once
// (SharedHostTier): every call takes its lock, a process-shared robust mutex, so calls from
// any thread of any process attached to it are safe. Each slot keeps the pid of its writer
// and of each process holding pins (up to kMaxReaders processes at once), so what a process
// killed mid-write or mid-read held is taken back: by ReclaimDeadHolders, and by BeginWrite
// and Acquire when they find no room. Pids are those of one pid namespace (every process on
// one host without containers, or one container's); a dead holder whose pid was reused keeps
// its slots until that process ends.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/statusor.h"

namespace switchyard::kvx {

class BlockTierIndex {
 public:
  using Key = std::array<uint8_t, 32>;
  // Processes that may hold pins on one slot at once.
  static constexpr int kMaxReaders = 8;

  // An index of its own (private memory). REQUIRES: num_slots >= 1.
  explicit BlockTierIndex(int64_t num_slots);
  // The bytes an index of `num_slots` takes in memory.
  static size_t BytesFor(int64_t num_slots);
  // An index in `memory` (at least BytesFor(num_slots), 8-byte aligned), which outlives it:
  // with `initialize` a new empty one (nobody else may be using the memory yet), else the
  // one already there. FailedPrecondition when `memory` holds no index of num_slots.
  static absl::StatusOr<std::unique_ptr<BlockTierIndex>> InMemory(std::span<std::byte> memory,
                                                                  int64_t num_slots,
                                                                  bool initialize);
  ~BlockTierIndex();

  BlockTierIndex(const BlockTierIndex&) = delete;
  BlockTierIndex& operator=(const BlockTierIndex&) = delete;

  // A slot to write `key` into; nullopt, changing nothing, when the key is already held
  // (readable or being written) or every slot is being written or pinned. When a readable
  // block had to make room, `evicted` receives its key (else it is reset).
  std::optional<int64_t> BeginWrite(const Key& key, std::optional<Key>* evicted);
  // Ends the write BeginWrite started. REQUIRES: the slot is being written.
  void EndWrite(int64_t slot, bool ok);

  // The readable slot holding `key`, with one more pin held by this process; nullopt when
  // the key is not readable (absent, or still being written) or kMaxReaders other live
  // processes hold pins on it.
  std::optional<int64_t> Acquire(const Key& key);
  // Drops one of this process's pins; the last pin makes the block the most recently used.
  // REQUIRES: the slot is readable and this process pinned it.
  void Release(int64_t slot);

  // Forgets a readable, unpinned block whose bytes turned out bad (a corrupt disk entry):
  // the slot is free again. REQUIRES: the slot is readable and unpinned.
  void Discard(int64_t slot);

  // Whether a readable slot has pins. REQUIRES: the slot is readable.
  bool IsPinned(int64_t slot) const;

  // Drops the pins of processes that no longer exist and frees the slots they were writing;
  // returns how many slots that gave back.
  int64_t ReclaimDeadHolders();

  // Whether `key` is readable now.
  bool IsReadable(const Key& key) const;
  // Whether `key` is readable or being written.
  bool Contains(const Key& key) const;

  int64_t num_slots() const { return num_slots_; }
  // Slots readable or being written.
  int64_t num_used() const;
  int64_t num_readable() const;

 private:
  struct Header;
  struct Slot;
  class Lock;

  BlockTierIndex(std::byte* memory, int64_t num_slots);
  void Bind(std::byte* memory, int64_t num_slots);
  // Makes an empty index in the bound memory.
  void Initialize();

  // All REQUIRE the lock.
  int64_t Find(const Key& key) const;
  void Unlink(int64_t slot);
  void PushBack(int64_t slot);
  void RemoveFromBucket(int64_t slot);
  void Free(int64_t slot);
  // Pins held on `slot` (readable) by any process.
  int32_t Pins(int64_t slot) const;
  // Drops the pins on a readable `slot` of processes that no longer exist; true when that
  // left it unpinned (it is then the most recently used).
  bool DropDeadReaders(int64_t slot);
  // The ReclaimDeadHolders work, under the lock.
  int64_t ReclaimDeadHoldersLocked();

  std::vector<std::byte> own_memory_;
  Header* header_ = nullptr;
  Slot* slots_ = nullptr;
  int64_t* buckets_ = nullptr;
  int64_t num_slots_ = 0;
};

}  // namespace switchyard::kvx
