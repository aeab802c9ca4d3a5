// SharedHostTier: a host-memory KV tier that every engine process on one host opening the
// same name shares: one POSIX shared-memory object (/dev/shm/switchyard-kv-<name>) holding
//
//   header (magic, version, ready flag, KV compatibility digest, slot count, block bytes) |
//   BlockTierIndex (process-shared lock) | the blocks, slot i at i * block bytes
//
// so a prefix one engine stored is a hit for its neighbours. The first process to open the
// name makes it (O_EXCL) and builds the index; the others map it, wait for its ready flag and
// check that it holds the same KV (model, dtype, shape, layout) in the same geometry, made in
// the same pid namespace (the index tells live holders from dead ones by pid). The
// object outlives the processes (a later engine finds the blocks still there); remove
// /dev/shm/switchyard-kv-<name> to start over.
//
// Threads: the index is safe from any thread of any process; the blocks' bytes are guarded by
// the index's slot states (write only a slot being written, read only a pinned one).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "absl/status/statusor.h"

#include "kvx/block_tier_index.h"

namespace switchyard::kvx {

class SharedHostTier {
 public:
  // Makes or maps the tier named `name` ([A-Za-z0-9._-], at most 200 characters).
  // InvalidArgument for a bad name; FailedPrecondition when the existing tier holds other KV
  // or another number of slots or block size, was made in another pid namespace, or was
  // never finished by its maker; the
  // system's error otherwise.
  static absl::StatusOr<std::unique_ptr<SharedHostTier>> Open(
      const std::string& name, int64_t num_slots, size_t block_bytes,
      const std::array<uint8_t, 32>& compatibility);
  ~SharedHostTier();
  SharedHostTier(const SharedHostTier&) = delete;
  SharedHostTier& operator=(const SharedHostTier&) = delete;

  BlockTierIndex& index() { return *index_; }
  // num_slots blocks back to back.
  std::span<std::byte> blocks() const { return blocks_; }
  // Whether this process made the tier (rather than joining one).
  bool created() const { return created_; }
  const std::string& path() const { return path_; }

 private:
  SharedHostTier() = default;

  std::string path_;
  std::byte* mapping_ = nullptr;
  size_t mapping_bytes_ = 0;
  bool created_ = false;
  std::unique_ptr<BlockTierIndex> index_;
  std::span<std::byte> blocks_;
};

}  // namespace switchyard::kvx
