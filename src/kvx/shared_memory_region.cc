#include "kvx/shared_memory_region.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <system_error>
#include <utility>
#include <vector>

#include "fmt/format.h"

namespace switchyard::kvx {
namespace {

constexpr int kSizeSeals = F_SEAL_SHRINK | F_SEAL_GROW;

absl::Status ErrnoError(int err, std::string_view what) {
  // system_category().message is strerror_r underneath: safe on any thread.
  const std::string message = fmt::format("{}: {}", what, std::system_category().message(err));
  switch (err) {
    case ENOMEM:
    case EMFILE:
    case ENFILE:
    case ENOSPC:
      return absl::ResourceExhaustedError(message);
    case EPIPE:
    case ECONNRESET:
    case ENOTCONN:
      return absl::UnavailableError(message);
    case EINVAL:
    case EBADF:
    case ENOTSOCK:
      return absl::InvalidArgumentError(message);
    default:
      return absl::InternalError(message);
  }
}

absl::StatusOr<std::byte*> MapShared(int fd, size_t bytes) {
  void* data = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (data == MAP_FAILED)
    return ErrnoError(errno, "shared memory: mmap");
  return static_cast<std::byte*>(data);
}

}  // namespace

absl::StatusOr<SharedMemoryRegion> SharedMemoryRegion::Create(size_t bytes,
                                                              const std::string& name) {
  if (bytes == 0)
    return absl::InvalidArgumentError("shared memory: zero bytes");
  UniqueFd fd(::memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd.valid())
    return ErrnoError(errno, fmt::format("shared memory: memfd_create \"{}\"", name));
  if (::ftruncate(fd.get(), static_cast<off_t>(bytes)) != 0)
    return ErrnoError(errno, fmt::format("shared memory: sizing to {} bytes", bytes));
  if (::fcntl(fd.get(), F_ADD_SEALS, kSizeSeals | F_SEAL_SEAL) != 0)
    return ErrnoError(errno, "shared memory: sealing its size");
  absl::StatusOr<std::byte*> data = MapShared(fd.get(), bytes);
  if (!data.ok())
    return data.status();
  return SharedMemoryRegion(std::move(fd), *data, bytes);
}

absl::StatusOr<SharedMemoryRegion> SharedMemoryRegion::Attach(UniqueFd fd, size_t expected_bytes) {
  const int seals = ::fcntl(fd.get(), F_GET_SEALS);
  if (seals < 0)
    return absl::InvalidArgumentError("shared memory: the descriptor is not a memfd");
  if ((seals & kSizeSeals) != kSizeSeals)
    return absl::InvalidArgumentError("shared memory: the memfd's size is not sealed");
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0)
    return ErrnoError(errno, "shared memory: fstat");
  if (expected_bytes == 0 || static_cast<size_t>(st.st_size) != expected_bytes)
    return absl::InvalidArgumentError(fmt::format(
        "shared memory: the memfd has {} bytes, expected {}", st.st_size, expected_bytes));
  absl::StatusOr<std::byte*> data = MapShared(fd.get(), expected_bytes);
  if (!data.ok())
    return data.status();
  return SharedMemoryRegion(std::move(fd), *data, expected_bytes);
}

SharedMemoryRegion::SharedMemoryRegion(SharedMemoryRegion&& other) noexcept
    : fd_(std::move(other.fd_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

SharedMemoryRegion& SharedMemoryRegion::operator=(SharedMemoryRegion&& other) noexcept {
  if (this != &other) {
    Unmap();
    fd_ = std::move(other.fd_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

SharedMemoryRegion::~SharedMemoryRegion() {
  Unmap();
}

void SharedMemoryRegion::Unmap() {
  if (data_ != nullptr)
    ::munmap(data_, size_);
  data_ = nullptr;
  size_ = 0;
}

absl::Status SendFd(int socket_fd, int fd) {
  char payload = 'F';
  iovec iov{&payload, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
  cmsg->cmsg_level = SOL_SOCKET;
  cmsg->cmsg_type = SCM_RIGHTS;
  cmsg->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(cmsg), &fd, sizeof(int));
  ssize_t sent = 0;
  do {
    sent = ::sendmsg(socket_fd, &msg, MSG_NOSIGNAL);
  } while (sent < 0 && errno == EINTR);
  if (sent < 0)
    return ErrnoError(errno, "shared memory: sending the descriptor");
  return absl::OkStatus();
}

absl::StatusOr<UniqueFd> ReceiveFd(int socket_fd) {
  char payload = 0;
  iovec iov{&payload, 1};
  // Room for a few descriptors, so that a peer sending several is seen (and refused)
  // rather than truncated.
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t received = 0;
  do {
    received = ::recvmsg(socket_fd, &msg, MSG_CMSG_CLOEXEC);
  } while (received < 0 && errno == EINTR);
  if (received < 0)
    return ErrnoError(errno, "shared memory: receiving a descriptor");
  if (received == 0)
    return absl::UnavailableError("shared memory: the peer closed the socket");
  std::vector<UniqueFd> fds;
  for (cmsghdr* cmsg = CMSG_FIRSTHDR(&msg); cmsg != nullptr; cmsg = CMSG_NXTHDR(&msg, cmsg)) {
    if (cmsg->cmsg_level != SOL_SOCKET || cmsg->cmsg_type != SCM_RIGHTS)
      continue;
    const size_t count = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int received_fd = -1;
      std::memcpy(&received_fd, CMSG_DATA(cmsg) + i * sizeof(int), sizeof(int));
      fds.emplace_back(received_fd);
    }
  }
  if ((msg.msg_flags & MSG_CTRUNC) != 0)
    return absl::InvalidArgumentError("shared memory: the peer sent too many descriptors");
  if (fds.size() != 1)
    return absl::InvalidArgumentError(
        fmt::format("shared memory: expected one descriptor in the message, got {}", fds.size()));
  return std::move(fds[0]);
}

}  // namespace switchyard::kvx
