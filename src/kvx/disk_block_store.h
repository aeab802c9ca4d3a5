// DiskBlockStore: KV blocks as files, one per tier slot, in a directory of this process's
// own (`<directory>/switchyard-kv-<pid>-<n>`, n counting the stores of the process, emptied at Open
// and removed at destruction: the slot index lives in memory, so nothing is reused across runs;
// Open also removes the directories of processes that no longer exist, killed before they could). A
// file is one self-checking KvBlockEntry (kv_block_entry.h). A write goes to `<slot>.tmp` and is
// renamed to `<slot>.kv` once whole, so a slot's file is a complete entry or absent; a read checks
// the entry, so a torn, truncated, corrupted or foreign file is a DataLoss miss, never
// wrong KV.
//
// Copies go straight between the files and the pool's block segments (pwritev/preadv), on
// the store's own threads: Write and Read queue a batch and return; `done` runs on a store
// thread with one status per op. A read that fails may have written part of its pool block:
// the caller must not publish it. The caller keeps one op per slot in flight (a tier index
// does). The destructor finishes what is queued (every callback runs), then joins.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "base/thread_pool.h"
#include "kvx/memory_region.h"

namespace switchyard::kvx {

struct DiskBlockStoreOptions {
  // Where this process's entry directory is made (created if missing).
  std::string directory;
  int num_threads = 2;
  // Written into every entry and checked on every read (KvCompatibility::Digest).
  std::array<uint8_t, 32> compatibility{};
};

class DiskBlockStore {
 public:
  using Key = std::array<uint8_t, 32>;
  // One block between pool block `block` and file slot `slot`, named `key`.
  struct Op {
    int64_t slot = 0;
    Key key{};
    int32_t block = 0;
  };
  using Callback = absl::AnyInvocable<void(std::vector<absl::Status> results)>;

  // Makes (or empties) the entry directory. `pool` is the memory blocks are copied from and
  // to; it must outlive the store. The system's error when the directory cannot be made.
  static absl::StatusOr<std::unique_ptr<DiskBlockStore>> Open(DiskBlockStoreOptions options,
                                                              MemoryRegion pool);
  ~DiskBlockStore();
  DiskBlockStore(const DiskBlockStore&) = delete;
  DiskBlockStore& operator=(const DiskBlockStore&) = delete;

  // Writes each op's pool block as its slot's entry. Results: the system's error (e.g.
  // ResourceExhausted for a full disk), else OK.
  // REQUIRES: every block is inside the pool.
  void Write(std::vector<Op> ops, Callback done);
  // Reads each op's slot entry into its pool block. Results: NotFound without an entry,
  // DataLoss when it is not a whole, intact entry of that key and compatibility.
  // REQUIRES: every block is inside the pool.
  void Read(std::vector<Op> ops, Callback done);

  // The entry directory, and a slot's entry in it.
  const std::string& entry_directory() const { return entry_directory_; }
  std::string EntryPath(int64_t slot) const;

 private:
  DiskBlockStore(DiskBlockStoreOptions options, MemoryRegion pool, std::string entry_directory);

  absl::Status WriteOne(const Op& op) const;
  absl::Status ReadOne(const Op& op) const;

  const DiskBlockStoreOptions options_;
  const MemoryRegion pool_;
  const std::string entry_directory_;
  // Reset first in the destructor, while the members above are alive.
  std::unique_ptr<base::ThreadPool> threads_;
};

}  // namespace switchyard::kvx
