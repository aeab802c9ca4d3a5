// BlockTierIndex: slot states (free, being written, readable and pinned), LRU eviction of
// readable unpinned slots, what processes killed while holding slots leave (forked children
// over shared memory), and a randomized run against a reference model of the contract.
#include "kvx/block_tier_index.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <vector>

#include "gtest/gtest.h"

#include "base/logging.h"

namespace switchyard::kvx {
namespace {

using Key = BlockTierIndex::Key;

Key K(uint32_t n) {
  Key key{};
  key[0] = static_cast<uint8_t>(n & 0xff);
  key[31] = static_cast<uint8_t>(n >> 8);
  return key;
}

// Writes `key` to readable; fails the test (and returns -1) when no slot is given.
int64_t Store(BlockTierIndex& index, const Key& key, std::optional<Key>* evicted) {
  const std::optional<int64_t> slot = index.BeginWrite(key, evicted);
  EXPECT_TRUE(slot.has_value());
  if (!slot.has_value())
    return -1;
  index.EndWrite(*slot, /*ok=*/true);
  return *slot;
}

int64_t Store(BlockTierIndex& index, const Key& key) {
  std::optional<Key> evicted;
  return Store(index, key, &evicted);
}

TEST(BlockTierIndexTest, FreeSlotsAreUsedBeforeAnyReadableBlockIsEvicted) {
  BlockTierIndex index(3);
  EXPECT_EQ(index.num_slots(), 3);
  std::set<int64_t> slots;
  for (uint32_t n = 0; n < 3; ++n) {
    std::optional<Key> evicted = K(99);  // reset by BeginWrite
    const int64_t slot = Store(index, K(n), &evicted);
    EXPECT_FALSE(evicted.has_value());
    EXPECT_GE(slot, 0);
    EXPECT_LT(slot, 3);
    slots.insert(slot);
  }
  EXPECT_EQ(slots.size(), 3u);
  for (uint32_t n = 0; n < 3; ++n)
    EXPECT_TRUE(index.IsReadable(K(n)));
  EXPECT_EQ(index.num_used(), 3);
  EXPECT_EQ(index.num_readable(), 3);
}

TEST(BlockTierIndexTest, BeginWriteRefusesAKeyAlreadyHeld) {
  BlockTierIndex index(4);
  std::optional<Key> evicted;
  const std::optional<int64_t> writing = index.BeginWrite(K(1), &evicted);
  ASSERT_TRUE(writing.has_value());
  evicted = K(99);
  EXPECT_EQ(index.BeginWrite(K(1), &evicted), std::nullopt);
  EXPECT_FALSE(evicted.has_value());
  EXPECT_EQ(index.num_used(), 1);

  index.EndWrite(*writing, /*ok=*/true);
  EXPECT_EQ(index.BeginWrite(K(1), &evicted), std::nullopt);
  EXPECT_EQ(index.num_used(), 1);
  EXPECT_EQ(index.num_readable(), 1);
  EXPECT_TRUE(index.IsReadable(K(1)));
}

TEST(BlockTierIndexTest, ASlotBeingWrittenIsNeverAcquired) {
  BlockTierIndex index(2);
  std::optional<Key> evicted;
  const std::optional<int64_t> slot = index.BeginWrite(K(1), &evicted);
  ASSERT_TRUE(slot.has_value());
  EXPECT_TRUE(index.Contains(K(1)));
  EXPECT_FALSE(index.IsReadable(K(1)));
  EXPECT_EQ(index.Acquire(K(1)), std::nullopt);
  EXPECT_EQ(index.num_used(), 1);
  EXPECT_EQ(index.num_readable(), 0);

  index.EndWrite(*slot, /*ok=*/true);
  EXPECT_EQ(index.Acquire(K(1)), slot);
  index.Release(*slot);
}

TEST(BlockTierIndexTest, AFailedWriteFreesTheSlotAndForgetsTheKey) {
  BlockTierIndex index(1);
  std::optional<Key> evicted;
  const std::optional<int64_t> slot = index.BeginWrite(K(1), &evicted);
  ASSERT_TRUE(slot.has_value());
  index.EndWrite(*slot, /*ok=*/false);
  EXPECT_FALSE(index.Contains(K(1)));
  EXPECT_FALSE(index.IsReadable(K(1)));
  EXPECT_EQ(index.Acquire(K(1)), std::nullopt);
  EXPECT_EQ(index.num_used(), 0);
  EXPECT_EQ(index.num_readable(), 0);

  // The slot is free again (no eviction) and the key may be written anew.
  EXPECT_EQ(index.BeginWrite(K(1), &evicted), slot);
  EXPECT_FALSE(evicted.has_value());
}

TEST(BlockTierIndexTest, EvictionTakesTheLeastRecentlyUsedReadableBlock) {
  BlockTierIndex index(3);
  const int64_t slot_a = Store(index, K(1));
  Store(index, K(2));
  Store(index, K(3));

  std::optional<Key> evicted;
  const std::optional<int64_t> slot = index.BeginWrite(K(4), &evicted);
  EXPECT_EQ(slot, slot_a);
  EXPECT_EQ(evicted, K(1));
  EXPECT_FALSE(index.Contains(K(1)));
  EXPECT_EQ(index.Acquire(K(1)), std::nullopt);
  EXPECT_TRUE(index.IsReadable(K(2)));
  EXPECT_TRUE(index.IsReadable(K(3)));
  EXPECT_EQ(index.num_used(), 3);
  EXPECT_EQ(index.num_readable(), 2);
}

TEST(BlockTierIndexTest, ReleasingTheLastPinMakesABlockTheMostRecent) {
  BlockTierIndex index(3);
  const int64_t slot_a = Store(index, K(1));
  const int64_t slot_b = Store(index, K(2));
  Store(index, K(3));

  // A, the least recent, is read twice: pinned, it is passed over.
  ASSERT_EQ(index.Acquire(K(1)), slot_a);
  ASSERT_EQ(index.Acquire(K(1)), slot_a);
  std::optional<Key> evicted;
  EXPECT_EQ(Store(index, K(4), &evicted), slot_b);
  EXPECT_EQ(evicted, K(2));
  // One pin left: still passed over.
  index.Release(slot_a);
  Store(index, K(5), &evicted);
  EXPECT_EQ(evicted, K(3));
  // The last pin goes: A is now more recent than D and E.
  index.Release(slot_a);
  Store(index, K(6), &evicted);
  EXPECT_EQ(evicted, K(4));
  Store(index, K(7), &evicted);
  EXPECT_EQ(evicted, K(5));
  Store(index, K(8), &evicted);
  EXPECT_EQ(evicted, K(1));
}

TEST(BlockTierIndexTest, WhenEverySlotIsWrittenOrPinnedNothingChanges) {
  BlockTierIndex index(2);
  std::optional<Key> evicted;
  const std::optional<int64_t> writing = index.BeginWrite(K(1), &evicted);
  ASSERT_TRUE(writing.has_value());
  const int64_t pinned = Store(index, K(2));
  ASSERT_EQ(index.Acquire(K(2)), pinned);

  evicted = K(99);
  EXPECT_EQ(index.BeginWrite(K(3), &evicted), std::nullopt);
  EXPECT_FALSE(evicted.has_value());
  EXPECT_FALSE(index.Contains(K(3)));
  EXPECT_TRUE(index.Contains(K(1)));
  EXPECT_FALSE(index.IsReadable(K(1)));
  EXPECT_TRUE(index.IsReadable(K(2)));
  EXPECT_EQ(index.num_used(), 2);
  EXPECT_EQ(index.num_readable(), 1);

  // Once both are done, the one that became evictable first goes first.
  index.EndWrite(*writing, /*ok=*/true);
  index.Release(pinned);
  EXPECT_EQ(Store(index, K(3), &evicted), *writing);
  EXPECT_EQ(evicted, K(1));
  EXPECT_TRUE(index.IsReadable(K(2)));
}

TEST(BlockTierIndexTest, CountersFollowTheSlotStates) {
  BlockTierIndex index(3);
  EXPECT_EQ(index.num_used(), 0);
  EXPECT_EQ(index.num_readable(), 0);
  std::optional<Key> evicted;
  const std::optional<int64_t> a = index.BeginWrite(K(1), &evicted);
  const std::optional<int64_t> b = index.BeginWrite(K(2), &evicted);
  ASSERT_TRUE(a.has_value() && b.has_value());
  EXPECT_EQ(index.num_used(), 2);
  EXPECT_EQ(index.num_readable(), 0);
  index.EndWrite(*a, /*ok=*/true);
  EXPECT_EQ(index.num_used(), 2);
  EXPECT_EQ(index.num_readable(), 1);
  index.EndWrite(*b, /*ok=*/false);
  EXPECT_EQ(index.num_used(), 1);
  EXPECT_EQ(index.num_readable(), 1);
  // Pins change neither.
  ASSERT_EQ(index.Acquire(K(1)), a);
  EXPECT_EQ(index.num_used(), 1);
  EXPECT_EQ(index.num_readable(), 1);
  index.Release(*a);
  EXPECT_EQ(index.num_slots(), 3);
}

// An index in anonymous shared memory, so forked children use the same one.
class SharedIndex {
 public:
  explicit SharedIndex(int64_t num_slots) : bytes_(BlockTierIndex::BytesFor(num_slots)) {
    memory_ = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    SY_CHECK(memory_ != MAP_FAILED);
    index_ = *BlockTierIndex::InMemory({static_cast<std::byte*>(memory_), bytes_}, num_slots,
                                       /*initialize=*/true);
  }
  ~SharedIndex() {
    index_.reset();
    ::munmap(memory_, bytes_);
  }
  SharedIndex(const SharedIndex&) = delete;
  SharedIndex& operator=(const SharedIndex&) = delete;

  BlockTierIndex& operator*() { return *index_; }
  BlockTierIndex* operator->() { return index_.get(); }

 private:
  size_t bytes_;
  void* memory_ = nullptr;
  std::unique_ptr<BlockTierIndex> index_;
};

// A child process that runs `hold` (true: it got what it wanted) and then waits to be killed;
// the constructor returns once `hold` ran. held() says what it returned.
class Holder {
 public:
  explicit Holder(const std::function<bool()>& hold) {
    int fds[2];
    SY_CHECK(::pipe(fds) == 0);
    pid_ = ::fork();
    SY_CHECK(pid_ >= 0);
    if (pid_ == 0) {
      const char held = hold() ? 1 : 0;
      (void)!::write(fds[1], &held, 1);
      for (;;)
        ::pause();
    }
    ::close(fds[1]);
    char held = 0;
    SY_CHECK(::read(fds[0], &held, 1) == 1);
    ::close(fds[0]);
    held_ = held == 1;
  }
  ~Holder() { Kill(); }
  Holder(const Holder&) = delete;
  Holder& operator=(const Holder&) = delete;

  bool held() const { return held_; }
  // kill -9, and reaped: its pid names no process from here on.
  void Kill() {
    if (pid_ <= 0)
      return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = 0;
  }

 private:
  pid_t pid_ = 0;
  bool held_ = false;
};

TEST(BlockTierIndexTest, PinsOfAReaderKilledMidReadAreTakenBackWhenRoomRunsOut) {
  SharedIndex index(1);
  const int64_t slot = Store(*index, K(1));
  Holder reader([&] { return index->Acquire(K(1)).has_value(); });
  ASSERT_TRUE(reader.held());
  EXPECT_TRUE(index->IsPinned(slot));
  std::optional<Key> evicted;
  // A live reader's pin holds.
  EXPECT_EQ(index->BeginWrite(K(2), &evicted), std::nullopt);
  EXPECT_EQ(index->ReclaimDeadHolders(), 0);

  reader.Kill();
  EXPECT_TRUE(index->IsPinned(slot));
  EXPECT_EQ(index->BeginWrite(K(2), &evicted), slot);
  EXPECT_EQ(evicted, K(1));
}

TEST(BlockTierIndexTest, ReclaimingGivesBackWhatDeadWritersAndReadersHeld) {
  SharedIndex index(3);
  const int64_t read = Store(*index, K(1));
  Holder writer([&] {
    std::optional<Key> evicted;
    return index->BeginWrite(K(2), &evicted).has_value();
  });
  Holder reader([&] { return index->Acquire(K(1)).has_value(); });
  ASSERT_TRUE(writer.held() && reader.held());
  // Our own pin on the same block outlives the dead reader's.
  ASSERT_EQ(index->Acquire(K(1)), read);
  EXPECT_EQ(index->ReclaimDeadHolders(), 0);

  writer.Kill();
  reader.Kill();
  EXPECT_EQ(index->ReclaimDeadHolders(), 1);  // the write; the block is still ours
  EXPECT_FALSE(index->Contains(K(2)));
  EXPECT_EQ(index->num_used(), 1);
  EXPECT_TRUE(index->IsPinned(read));
  index->Release(read);
  EXPECT_FALSE(index->IsPinned(read));
  EXPECT_EQ(index->ReclaimDeadHolders(), 0);
}

TEST(BlockTierIndexTest, AtMostMaxReadersProcessesPinOneSlotAndDeadOnesMakeRoom) {
  SharedIndex index(2);
  const int64_t slot = Store(*index, K(1));
  std::vector<std::unique_ptr<Holder>> readers;
  for (int i = 0; i < BlockTierIndex::kMaxReaders; ++i) {
    readers.push_back(std::make_unique<Holder>([&] { return index->Acquire(K(1)).has_value(); }));
    ASSERT_TRUE(readers.back()->held());
  }
  // One process more finds the block as if it were not there.
  EXPECT_EQ(index->Acquire(K(1)), std::nullopt);
  readers.front()->Kill();
  ASSERT_EQ(index->Acquire(K(1)), slot);
  // Many pins of one process take one entry.
  ASSERT_EQ(index->Acquire(K(1)), slot);
  index->Release(slot);
  index->Release(slot);
  readers.clear();
  EXPECT_TRUE(index->IsPinned(slot));
  EXPECT_EQ(index->ReclaimDeadHolders(), 1);
  EXPECT_FALSE(index->IsPinned(slot));
}

// The contract as a plain model: per slot its state, key and pins, and a use stamp that
// orders the readable unpinned slots (set when a write ends well and when the last pin
// goes). It leaves open which free slot BeginWrite takes.
class ReferenceTier {
 public:
  enum class State { kFree, kWriting, kReadable };
  struct Slot {
    State state = State::kFree;
    Key key{};
    int pins = 0;
    uint64_t stamp = 0;
  };

  explicit ReferenceTier(int64_t num_slots) : slots_(static_cast<size_t>(num_slots)) {}

  std::optional<int64_t> SlotOf(const Key& key) const {
    for (size_t i = 0; i < slots_.size(); ++i) {
      if (slots_[i].state != State::kFree && slots_[i].key == key)
        return static_cast<int64_t>(i);
    }
    return std::nullopt;
  }
  bool HasFree() const {
    for (const Slot& s : slots_) {
      if (s.state == State::kFree)
        return true;
    }
    return false;
  }
  // The readable unpinned slot used least recently, if any.
  std::optional<int64_t> Victim() const {
    std::optional<int64_t> victim;
    for (size_t i = 0; i < slots_.size(); ++i) {
      const Slot& s = slots_[i];
      if (s.state == State::kReadable && s.pins == 0 &&
          (!victim.has_value() || s.stamp < slots_[static_cast<size_t>(*victim)].stamp)) {
        victim = static_cast<int64_t>(i);
      }
    }
    return victim;
  }
  std::vector<int64_t> SlotsIn(State state, bool pinned_only = false) const {
    std::vector<int64_t> out;
    for (size_t i = 0; i < slots_.size(); ++i) {
      if (slots_[i].state == state && (!pinned_only || slots_[i].pins > 0))
        out.push_back(static_cast<int64_t>(i));
    }
    return out;
  }
  int64_t num_used() const {
    return static_cast<int64_t>(slots_.size() - SlotsIn(State::kFree).size());
  }
  int64_t num_readable() const { return static_cast<int64_t>(SlotsIn(State::kReadable).size()); }

  void Write(int64_t slot, const Key& key) {
    slots_[static_cast<size_t>(slot)] = {State::kWriting, key, 0, 0};
  }
  void EndWrite(int64_t slot, bool ok) {
    Slot& s = slots_[static_cast<size_t>(slot)];
    if (ok) {
      s.state = State::kReadable;
      s.stamp = ++clock_;
    } else {
      s = Slot{};
    }
  }
  void Pin(int64_t slot) { ++slots_[static_cast<size_t>(slot)].pins; }
  void Unpin(int64_t slot) {
    Slot& s = slots_[static_cast<size_t>(slot)];
    if (--s.pins == 0)
      s.stamp = ++clock_;
  }
  const Slot& slot(int64_t i) const { return slots_[static_cast<size_t>(i)]; }

 private:
  std::vector<Slot> slots_;
  uint64_t clock_ = 0;
};

TEST(BlockTierIndexTest, MatchesAReferenceModelOverRandomOperations) {
  constexpr int64_t kSlots = 6;
  constexpr uint32_t kKeys = 14;
  BlockTierIndex index(kSlots);
  ReferenceTier model(kSlots);
  std::mt19937 random(20240611);
  auto pick = [&](const std::vector<int64_t>& from) {
    return from[std::uniform_int_distribution<size_t>(0, from.size() - 1)(random)];
  };

  // How often BeginWrite took a free slot, evicted, found every slot busy: each must happen.
  int num_free_writes = 0;
  int num_evictions = 0;
  int num_busy = 0;
  for (int step = 0; step < 5000; ++step) {
    SCOPED_TRACE(step);
    const int op = std::uniform_int_distribution<int>(0, 3)(random);
    const Key key = K(std::uniform_int_distribution<uint32_t>(0, kKeys - 1)(random));
    if (op == 0) {
      std::optional<Key> evicted;
      const std::optional<int64_t> slot = index.BeginWrite(key, &evicted);
      if (model.SlotOf(key).has_value()) {
        ASSERT_EQ(slot, std::nullopt);
        ASSERT_FALSE(evicted.has_value());
      } else if (model.HasFree()) {
        ASSERT_TRUE(slot.has_value());
        ASSERT_EQ(model.slot(*slot).state, ReferenceTier::State::kFree);
        ASSERT_FALSE(evicted.has_value());
        model.Write(*slot, key);
        ++num_free_writes;
      } else if (const std::optional<int64_t> victim = model.Victim(); victim.has_value()) {
        ASSERT_EQ(slot, victim);
        ASSERT_EQ(evicted, model.slot(*victim).key);
        model.Write(*slot, key);
        ++num_evictions;
      } else {
        ASSERT_EQ(slot, std::nullopt);
        ASSERT_FALSE(evicted.has_value());
        ++num_busy;
      }
    } else if (op == 1) {
      const std::vector<int64_t> writing = model.SlotsIn(ReferenceTier::State::kWriting);
      if (writing.empty())
        continue;
      const int64_t slot = pick(writing);
      const bool ok = std::uniform_int_distribution<int>(0, 3)(random) != 0;
      index.EndWrite(slot, ok);
      model.EndWrite(slot, ok);
    } else if (op == 2) {
      const std::optional<int64_t> slot = index.Acquire(key);
      const std::optional<int64_t> held = model.SlotOf(key);
      if (held.has_value() && model.slot(*held).state == ReferenceTier::State::kReadable) {
        ASSERT_EQ(slot, held);
        model.Pin(*held);
      } else {
        ASSERT_EQ(slot, std::nullopt);
      }
    } else {
      const std::vector<int64_t> pinned =
          model.SlotsIn(ReferenceTier::State::kReadable, /*pinned_only=*/true);
      if (pinned.empty())
        continue;
      const int64_t slot = pick(pinned);
      index.Release(slot);
      model.Unpin(slot);
    }

    ASSERT_EQ(index.num_used(), model.num_used());
    ASSERT_EQ(index.num_readable(), model.num_readable());
    for (uint32_t n = 0; n < kKeys; ++n) {
      const std::optional<int64_t> held = model.SlotOf(K(n));
      ASSERT_EQ(index.Contains(K(n)), held.has_value());
      ASSERT_EQ(index.IsReadable(K(n)),
                held.has_value() && model.slot(*held).state == ReferenceTier::State::kReadable);
    }
  }
  EXPECT_GT(num_free_writes, 0);
  EXPECT_GT(num_evictions, 0);
  EXPECT_GT(num_busy, 0);
}

}  // namespace
}  // namespace switchyard::kvx
