#include "compile/internal/file_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>

#include "compile/internal/system_error.h"

namespace switchyard::compile::internal {
namespace {

int Operation(FileLock::Mode mode) {
  return mode == FileLock::Mode::kShared ? LOCK_SH : LOCK_EX;
}

}  // namespace

absl::StatusOr<FileLock> FileLock::LockFile(const std::string& path, Mode mode) {
  return Lock(path, O_RDWR | O_CREAT, Operation(mode));
}

absl::StatusOr<FileLock> FileLock::TryLockDirectory(const std::string& path, Mode mode) {
  return Lock(path, O_RDONLY | O_DIRECTORY, Operation(mode) | LOCK_NB);
}

absl::StatusOr<FileLock> FileLock::LockDirectory(const std::string& path, Mode mode) {
  return Lock(path, O_RDONLY | O_DIRECTORY, Operation(mode));
}

absl::StatusOr<FileLock> FileLock::Lock(const std::string& path, int open_flags, int operation) {
  kvx::UniqueFd fd(::open(path.c_str(), open_flags | O_CLOEXEC, 0644));
  if (!fd.valid())
    return SystemError("cannot open", path, errno);
  int rc = 0;
  do {
    rc = ::flock(fd.get(), operation);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0)
    return SystemError("cannot lock", path, errno);
  return FileLock(std::move(fd));
}

}  // namespace switchyard::compile::internal
