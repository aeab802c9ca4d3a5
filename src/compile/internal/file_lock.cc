#include "compile/internal/file_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>

#include <cstring>

#include "fmt/format.h"

namespace switchyard::compile::internal {
namespace {

int Operation(FileLock::Mode mode) {
  return mode == FileLock::Mode::kShared ? LOCK_SH : LOCK_EX;
}

absl::Status SystemError(std::string_view what, const std::string& path, int error) {
  std::string message = fmt::format("{} {}: {}", what, path, std::strerror(error));
  if (error == ENOENT || error == ENOTDIR)
    return absl::NotFoundError(message);
  if (error == EWOULDBLOCK)
    return absl::UnavailableError(message);
  return absl::InternalError(message);
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
