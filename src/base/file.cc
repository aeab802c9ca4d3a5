#include "base/file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>
#include <system_error>

#include "absl/status/status.h"
#include "fmt/format.h"

namespace switchyard::base {
namespace {

absl::Status ErrnoError(const std::string& what, const std::string& path) {
  const int err = errno;
  // generic_category's message is strerror's text without strerror's shared buffer.
  const std::string message =
      fmt::format("{}: {}: {}", path, what, std::generic_category().message(err));
  if (err == ENOENT)
    return absl::NotFoundError(message);
  if (err == EACCES)
    return absl::PermissionDeniedError(message);
  return absl::InternalError(message);
}

}  // namespace

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return ErrnoError("cannot open", path);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad())
    return ErrnoError("read failed", path);
  return std::move(buffer).str();
}

absl::Status WriteFile(const std::string& path, std::string_view contents) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out)
    return ErrnoError("cannot create", path);
  out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
  if (!out)
    return ErrnoError("write failed", path);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<MappedFile>> MappedFile::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return ErrnoError("cannot open", path);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const absl::Status status = ErrnoError("cannot stat", path);
    ::close(fd);
    return status;
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(fmt::format("{}: not a regular file", path));
  }
  const size_t size = static_cast<size_t>(st.st_size);
  const uint8_t* data = nullptr;
  if (size > 0) {
    void* addr = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (addr == MAP_FAILED) {
      const absl::Status status = ErrnoError("mmap failed", path);
      ::close(fd);
      return status;
    }
    data = static_cast<const uint8_t*>(addr);
  }
  ::close(fd);
  return std::unique_ptr<MappedFile>(new MappedFile(path, data, size));
}

MappedFile::~MappedFile() {
  if (data_ != nullptr)
    ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace switchyard::base
