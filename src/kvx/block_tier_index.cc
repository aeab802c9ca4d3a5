#include "kvx/block_tier_index.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <iterator>
#include <new>

#include "fmt/format.h"

#include "base/logging.h"

namespace switchyard::kvx {
namespace {

constexpr uint64_t kIndexMagic = 0x5359'4b56'4944'5802;  // "SYKVIDX", version 2
constexpr int64_t kNone = -1;

enum State : int32_t { kFree = 0, kWriting = 1, kReadable = 2 };

int64_t NumBuckets(int64_t num_slots) {
  return static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(num_slots) * 2));
}

// Whether `pid` names no process (another one's pid that exists is alive; ours is alive).
bool IsDead(int32_t pid) {
  return pid != getpid() && ::kill(pid, 0) != 0 && errno == ESRCH;
}

uint64_t KeyHash(const BlockTierIndex::Key& key) {
  uint64_t h = 0;
  std::memcpy(&h, key.data() + key.size() - sizeof(h), sizeof(h));
  return h;
}

}  // namespace

struct BlockTierIndex::Header {
  uint64_t magic;
  int64_t num_slots;
  int64_t num_buckets;
  // Free slots, linked through Slot::next; handed out from the head.
  int64_t free_head;
  // Readable unpinned slots, least recently used at the head, through prev/next.
  int64_t lru_head;
  int64_t lru_tail;
  int64_t num_free;
  int64_t num_readable;
  pthread_mutex_t mutex;
};

struct BlockTierIndex::Slot {
  // A process with pins on the slot; pid 0 marks an unused entry.
  struct Reader {
    int32_t pid;
    int32_t pins;
  };
  Key key;
  int32_t state;
  // The process writing it (kWriting).
  int32_t writer_pid;
  Reader readers[kMaxReaders];
  int64_t prev;
  int64_t next;
  // The next slot in its key's bucket (writing or readable).
  int64_t bucket_next;
};

// Holds the index's lock; takes over a lock whose holder died (its change may be half made:
// the operations are short, and a torn slot only costs that slot).
class BlockTierIndex::Lock {
 public:
  explicit Lock(Header* header) : mutex_(&header->mutex) {
    if (pthread_mutex_lock(mutex_) == EOWNERDEAD)
      pthread_mutex_consistent(mutex_);
  }
  ~Lock() { pthread_mutex_unlock(mutex_); }
  Lock(const Lock&) = delete;
  Lock& operator=(const Lock&) = delete;

 private:
  pthread_mutex_t* mutex_;
};

size_t BlockTierIndex::BytesFor(int64_t num_slots) {
  return sizeof(Header) + static_cast<size_t>(num_slots) * sizeof(Slot) +
         static_cast<size_t>(NumBuckets(num_slots)) * sizeof(int64_t);
}

BlockTierIndex::BlockTierIndex(int64_t num_slots) : own_memory_(BytesFor(num_slots)) {
  SY_CHECK(num_slots >= 1);
  Bind(own_memory_.data(), num_slots);
  Initialize();
}

BlockTierIndex::BlockTierIndex(std::byte* memory, int64_t num_slots) {
  Bind(memory, num_slots);
}

void BlockTierIndex::Bind(std::byte* memory, int64_t num_slots) {
  header_ = reinterpret_cast<Header*>(memory);
  slots_ = reinterpret_cast<Slot*>(memory + sizeof(Header));
  buckets_ = reinterpret_cast<int64_t*>(memory + sizeof(Header) +
                                        static_cast<size_t>(num_slots) * sizeof(Slot));
  num_slots_ = num_slots;
}

absl::StatusOr<std::unique_ptr<BlockTierIndex>> BlockTierIndex::InMemory(
    std::span<std::byte> memory, int64_t num_slots, bool initialize) {
  SY_CHECK(num_slots >= 1 && memory.size() >= BytesFor(num_slots));
  std::unique_ptr<BlockTierIndex> index(new BlockTierIndex(memory.data(), num_slots));
  if (initialize) {
    index->Initialize();
  } else if (index->header_->magic != kIndexMagic || index->header_->num_slots != num_slots) {
    return absl::FailedPreconditionError("KV tier index: the memory holds no index of that size");
  }
  return index;
}

void BlockTierIndex::Initialize() {
  std::memset(static_cast<void*>(header_), 0, BytesFor(num_slots_));
  Header* h = header_;
  h->num_slots = num_slots_;
  h->num_buckets = NumBuckets(num_slots_);
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
  pthread_mutex_init(&h->mutex, &attr);
  pthread_mutexattr_destroy(&attr);
  for (int64_t b = 0; b < h->num_buckets; ++b)
    buckets_[b] = kNone;
  for (int64_t s = 0; s < num_slots_; ++s) {
    Slot& slot = slots_[s];
    slot.state = kFree;
    slot.prev = kNone;
    slot.next = s + 1 < num_slots_ ? s + 1 : kNone;
    slot.bucket_next = kNone;
  }
  h->free_head = 0;
  h->lru_head = kNone;
  h->lru_tail = kNone;
  h->num_free = num_slots_;
  h->num_readable = 0;
  // Last: an attacher checks it.
  h->magic = kIndexMagic;
}

BlockTierIndex::~BlockTierIndex() = default;

int64_t BlockTierIndex::Find(const Key& key) const {
  int64_t s = buckets_[KeyHash(key) & static_cast<uint64_t>(header_->num_buckets - 1)];
  while (s != kNone && slots_[s].key != key)
    s = slots_[s].bucket_next;
  return s;
}

void BlockTierIndex::Unlink(int64_t slot) {
  Slot& s = slots_[slot];
  (s.prev == kNone ? header_->lru_head : slots_[s.prev].next) = s.next;
  (s.next == kNone ? header_->lru_tail : slots_[s.next].prev) = s.prev;
  s.prev = s.next = kNone;
}

void BlockTierIndex::PushBack(int64_t slot) {
  Slot& s = slots_[slot];
  s.prev = header_->lru_tail;
  s.next = kNone;
  (header_->lru_tail == kNone ? header_->lru_head : slots_[header_->lru_tail].next) = slot;
  header_->lru_tail = slot;
}

void BlockTierIndex::RemoveFromBucket(int64_t slot) {
  int64_t* link =
      &buckets_[KeyHash(slots_[slot].key) & static_cast<uint64_t>(header_->num_buckets - 1)];
  while (*link != slot)
    link = &slots_[*link].bucket_next;
  *link = slots_[slot].bucket_next;
  slots_[slot].bucket_next = kNone;
}

void BlockTierIndex::Free(int64_t slot) {
  Slot& s = slots_[slot];
  s.state = kFree;
  s.next = header_->free_head;
  header_->free_head = slot;
  ++header_->num_free;
}

int32_t BlockTierIndex::Pins(int64_t slot) const {
  int32_t pins = 0;
  for (const Slot::Reader& reader : slots_[slot].readers)
    pins += reader.pins;
  return pins;
}

bool BlockTierIndex::DropDeadReaders(int64_t slot) {
  Slot& s = slots_[slot];
  bool dropped = false;
  for (Slot::Reader& reader : s.readers) {
    if (reader.pid != 0 && IsDead(reader.pid)) {
      reader = Slot::Reader{};
      dropped = true;
    }
  }
  if (!dropped || Pins(slot) > 0)
    return false;
  PushBack(slot);
  return true;
}

int64_t BlockTierIndex::ReclaimDeadHoldersLocked() {
  int64_t reclaimed = 0;
  for (int64_t s = 0; s < num_slots_; ++s) {
    const Slot& slot = slots_[s];
    if (slot.state == kWriting && IsDead(slot.writer_pid)) {
      RemoveFromBucket(s);
      Free(s);
      ++reclaimed;
    } else if (slot.state == kReadable && Pins(s) > 0 && DropDeadReaders(s)) {
      ++reclaimed;
    }
  }
  return reclaimed;
}

int64_t BlockTierIndex::ReclaimDeadHolders() {
  Lock lock(header_);
  return ReclaimDeadHoldersLocked();
}

std::optional<int64_t> BlockTierIndex::BeginWrite(const Key& key, std::optional<Key>* evicted) {
  evicted->reset();
  Lock lock(header_);
  if (Find(key) != kNone)
    return std::nullopt;
  // With no free or evictable slot, slots held by dead processes may become either.
  if (header_->free_head == kNone && header_->lru_head == kNone &&
      ReclaimDeadHoldersLocked() == 0) {
    return std::nullopt;
  }
  int64_t slot = header_->free_head;
  if (slot != kNone) {
    header_->free_head = slots_[slot].next;
    --header_->num_free;
  } else {
    slot = header_->lru_head;
    Unlink(slot);
    RemoveFromBucket(slot);
    *evicted = slots_[slot].key;
    --header_->num_readable;
  }
  Slot& s = slots_[slot];
  s.key = key;
  s.state = kWriting;
  std::fill(std::begin(s.readers), std::end(s.readers), Slot::Reader{});
  s.writer_pid = getpid();
  s.prev = s.next = kNone;
  int64_t& bucket = buckets_[KeyHash(key) & static_cast<uint64_t>(header_->num_buckets - 1)];
  s.bucket_next = bucket;
  bucket = slot;
  return slot;
}

void BlockTierIndex::EndWrite(int64_t slot, bool ok) {
  Lock lock(header_);
  Slot& s = slots_[slot];
  SY_CHECK(s.state == kWriting);
  if (ok) {
    s.state = kReadable;
    PushBack(slot);
    ++header_->num_readable;
    return;
  }
  RemoveFromBucket(slot);
  Free(slot);
}

std::optional<int64_t> BlockTierIndex::Acquire(const Key& key) {
  Lock lock(header_);
  const int64_t slot = Find(key);
  if (slot == kNone || slots_[slot].state != kReadable)
    return std::nullopt;
  Slot::Reader* readers = slots_[slot].readers;
  const int32_t pid = getpid();
  Slot::Reader* mine = std::find_if(readers, readers + kMaxReaders,
                                    [pid](const Slot::Reader& r) { return r.pid == pid; });
  if (mine == readers + kMaxReaders) {
    // A new reader: an unused entry, else one a dead process left.
    auto unused = [](const Slot::Reader& r) { return r.pid == 0; };
    mine = std::find_if(readers, readers + kMaxReaders, unused);
    if (mine == readers + kMaxReaders) {
      DropDeadReaders(slot);
      mine = std::find_if(readers, readers + kMaxReaders, unused);
    }
    if (mine == readers + kMaxReaders)
      return std::nullopt;
    mine->pid = pid;
  }
  if (Pins(slot) == 0)
    Unlink(slot);
  ++mine->pins;
  return slot;
}

void BlockTierIndex::Release(int64_t slot) {
  Lock lock(header_);
  Slot& s = slots_[slot];
  const int32_t pid = getpid();
  Slot::Reader* mine = std::find_if(std::begin(s.readers), std::end(s.readers),
                                    [pid](const Slot::Reader& r) { return r.pid == pid; });
  SY_CHECK(s.state == kReadable && mine != std::end(s.readers));
  if (--mine->pins == 0)
    *mine = Slot::Reader{};
  if (Pins(slot) == 0)
    PushBack(slot);
}

void BlockTierIndex::Discard(int64_t slot) {
  Lock lock(header_);
  Slot& s = slots_[slot];
  SY_CHECK(s.state == kReadable && Pins(slot) == 0);
  Unlink(slot);
  RemoveFromBucket(slot);
  --header_->num_readable;
  Free(slot);
}

bool BlockTierIndex::IsPinned(int64_t slot) const {
  Lock lock(header_);
  SY_CHECK(slots_[slot].state == kReadable);
  return Pins(slot) > 0;
}

bool BlockTierIndex::IsReadable(const Key& key) const {
  Lock lock(header_);
  const int64_t slot = Find(key);
  return slot != kNone && slots_[slot].state == kReadable;
}

bool BlockTierIndex::Contains(const Key& key) const {
  Lock lock(header_);
  return Find(key) != kNone;
}

int64_t BlockTierIndex::num_used() const {
  Lock lock(header_);
  return num_slots_ - header_->num_free;
}

int64_t BlockTierIndex::num_readable() const {
  Lock lock(header_);
  return header_->num_readable;
}

}  // namespace switchyard::kvx
