// FileLock: an open file or directory holding a flock(2), released when it is destroyed or
// when the process dies (the kernel drops it with the last descriptor), so a crashed
// holder never leaves a key locked. Locks taken through different opens exclude each other
// in one process too. Move-only; one thread at a time.
#pragma once

#include <string>

#include "absl/status/statusor.h"

#include "kvx/unique_fd.h"

namespace switchyard::compile::internal {

class FileLock {
 public:
  enum class Mode { kShared, kExclusive };

  // Opens `path` (a lock file, created when missing) and waits for the lock.
  static absl::StatusOr<FileLock> LockFile(const std::string& path, Mode mode);
  // Opens the directory `path` and takes its lock without waiting: Unavailable when another
  // holder's lock conflicts, NotFound when there is no such directory.
  static absl::StatusOr<FileLock> TryLockDirectory(const std::string& path, Mode mode);
  // As TryLockDirectory, but waits for the lock.
  static absl::StatusOr<FileLock> LockDirectory(const std::string& path, Mode mode);

  int fd() const { return fd_.get(); }

 private:
  explicit FileLock(kvx::UniqueFd fd) : fd_(std::move(fd)) {}
  static absl::StatusOr<FileLock> Lock(const std::string& path, int open_flags, int operation);

  kvx::UniqueFd fd_;
};

}  // namespace switchyard::compile::internal
