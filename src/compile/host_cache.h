// HostCache: level 2 of the compile cache, one directory shared by every engine on the host,
// content-addressed by the cache key:
//
//   <root>/<first 2 hex digits>/<key>/artefact.so, cache_key_factors.json, metadata.json
//   <root>/<first 2 hex digits>/.<key>.lock        the key's single-flight lock (empty)
//
// An entry is written whole into a dot-named temporary directory and renamed into place
// (atomic; when another writer won the race its entry stays), so a reader sees a complete
// entry or none; names starting with '.' are never read as entries. Coordination is by
// flock(2), which the kernel drops when a holder dies:
//   - one process compiles a key while holding its lock file exclusively (LockKey); the
//     others wait there, then find what it stored;
//   - a reader holds its entry's directory with a shared lock (HostEntry) while it uses the
//     files; eviction and pruning take the exclusive lock without waiting and skip an entry
//     that is held. A bad entry is removed even when held (it is of no use to anyone), by
//     whoever holds its key's lock, so never in a race with the store that replaces it.
// The last use of an entry is its metadata file's mtime, set on every Find; Store evicts the
// least recently used entries beyond max_bytes.
//
// Any thread and any number of processes; the object itself is immutable.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "compile/cache_key.h"
#include "compile/entry_files.h"
#include "compile/internal/file_lock.h"

namespace switchyard::compile {

// $XDG_CACHE_HOME/switchyard/compile, else $HOME/.cache/switchyard/compile.
std::string DefaultHostCacheRoot();

struct HostCacheOptions {
  // Empty: DefaultHostCacheRoot().
  std::string root;
  // Entries beyond this many bytes (all files of all entries) are evicted, least recently
  // used first, after each Store.
  uint64_t max_bytes = uint64_t{8} << 30;
  EntryRequirements requirements;
};

// A found entry that passed CheckEntry, held (shared lock) until destroyed, so no process
// removes it meanwhile.
class HostEntry {
 public:
  const std::string& directory() const { return directory_; }
  std::string artefact_path() const;
  const EntryMetadata& metadata() const { return metadata_; }
  // Records a use now (the metadata file's mtime), for LRU eviction.
  void MarkUsed() const;
  // Whether the entry's path still names what is held (false once a bad entry was removed).
  bool StillInPlace() const;

 private:
  friend class HostCache;
  HostEntry(std::string directory, EntryMetadata metadata, internal::FileLock lock)
      : directory_(std::move(directory)), metadata_(std::move(metadata)), lock_(std::move(lock)) {}

  std::string directory_;
  EntryMetadata metadata_;
  internal::FileLock lock_;
};

// An entry as a listing sees it (nothing checked).
struct HostEntryInfo {
  std::string key;
  std::string directory;
  // All its files.
  uint64_t bytes = 0;
  // Its metadata file's mtime (the directory's when that is missing), Unix nanoseconds.
  int64_t last_use_unix_ns = 0;
};

struct EvictionResult {
  int64_t removed_entries = 0;
  uint64_t removed_bytes = 0;
  // Entries that had to go but were held by a reader.
  int64_t skipped_in_use = 0;
};

class HostCache {
 public:
  // Creates the root directory when missing.
  static absl::StatusOr<std::unique_ptr<HostCache>> Open(HostCacheOptions options);

  const std::string& root() const { return options_.root; }
  const HostCacheOptions& options() const { return options_; }
  std::string EntryDirectory(std::string_view key) const;

  // The entry of `key`, checked and held, its last use set to now. NotFound when there is
  // none; DataLoss (what is wrong) when there is one that may not be loaded.
  absl::StatusOr<std::unique_ptr<HostEntry>> Find(std::string_view key) const;
  // As Find, but releases the entry at once and leaves its last use as it was.
  absl::Status Verify(std::string_view key) const;

  // Waits for `key`'s single-flight lock; held until the returned lock is destroyed.
  absl::StatusOr<internal::FileLock> LockKey(std::string_view key) const;

  // Writes the entry `metadata` describes (temporary directory, then rename), then evicts
  // down to max_bytes, never this entry. OK also when another writer's entry of this key won.
  // REQUIRES: metadata was made for `artefact` (MakeEntryMetadata).
  absl::StatusOr<EvictionResult> Store(const EntryMetadata& metadata, std::string_view factors_json,
                                       std::string_view artefact) const;

  enum class IfHeld { kSkip, kRemove };
  // Removes `key`'s entry: OK when gone (or there was none); with kSkip, Unavailable when a
  // reader holds it. REQUIRES for kRemove: the caller holds the key's lock (LockKey).
  absl::Status Remove(std::string_view key, IfHeld if_held = IfHeld::kSkip) const;

  // Every entry, in no particular order.
  absl::StatusOr<std::vector<HostEntryInfo>> List() const;

  // Removes least recently used entries until the rest fit in `max_bytes`, never `keep_key`'s
  // nor one a reader holds; also removes temporary directories left by dead writers.
  absl::StatusOr<EvictionResult> EvictTo(uint64_t max_bytes, std::string_view keep_key = "") const;

 private:
  explicit HostCache(HostCacheOptions options) : options_(std::move(options)) {}

  absl::StatusOr<std::unique_ptr<HostEntry>> FindEntry(std::string_view key, bool mark_used) const;

  absl::Status WriteTemporary(const std::string& directory, const EntryMetadata& metadata,
                              std::string_view factors_json, std::string_view artefact) const;
  void RemoveStaleTemporaries() const;

  const HostCacheOptions options_;
};

}  // namespace switchyard::compile
