// SharedMemoryRegion: memory two processes on one host both map: a memfd whose size is
// sealed (it can neither shrink under a mapping nor grow), mapped shared and read-write.
// One process Creates it and sends its descriptor over a connected AF_UNIX socket
// (SendFd); the other receives it (ReceiveFd) and Attaches, checking that it is a memfd of
// the expected, sealed size. Everything that comes from the peer is checked and reported as
// a Status: a message without a descriptor, with several, a descriptor that is no memfd or
// has another size.
//
// A mapping is move-only and owned by whoever holds it; its bytes may be read and written
// from any thread (synchronising access is the users' business, e.g. the transfer engine's
// completion). It unmaps and closes its descriptor on destruction; the memory lives while
// any process maps it.
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "kvx/unique_fd.h"

namespace switchyard::kvx {

class SharedMemoryRegion {
 public:
  // A new zero-filled memfd of `bytes`, named `name` (shown in /proc/<pid>/fd; at most 249
  // bytes), size sealed, mapped. InvalidArgument for zero bytes; the system's error
  // otherwise (e.g. ResourceExhausted when memory is short).
  static absl::StatusOr<SharedMemoryRegion> Create(size_t bytes, const std::string& name);
  // Maps a memfd received from a peer. InvalidArgument when `fd` is not a memfd, its size is
  // not sealed against shrinking and growing, or it is not expected_bytes long.
  static absl::StatusOr<SharedMemoryRegion> Attach(UniqueFd fd, size_t expected_bytes);

  SharedMemoryRegion(SharedMemoryRegion&& other) noexcept;
  SharedMemoryRegion& operator=(SharedMemoryRegion&& other) noexcept;
  ~SharedMemoryRegion();

  std::span<std::byte> bytes() const { return {data_, size_}; }
  // The memfd, for SendFd; stays owned by this mapping.
  int fd() const { return fd_.get(); }

 private:
  SharedMemoryRegion(UniqueFd fd, std::byte* data, size_t size)
      : fd_(std::move(fd)), data_(data), size_(size) {}
  void Unmap();

  UniqueFd fd_;
  std::byte* data_ = nullptr;
  size_t size_ = 0;
};

// Sends `fd` (SCM_RIGHTS, with one byte of payload) over a connected AF_UNIX socket.
// Blocks until the kernel takes the message. Unavailable when the peer has gone; the
// system's error otherwise.
absl::Status SendFd(int socket_fd, int fd);

// Receives one message sent by SendFd. Blocks until it comes. Unavailable when the peer
// closed the socket; InvalidArgument when the message carries no descriptor or more than
// one (all received descriptors are closed then).
absl::StatusOr<UniqueFd> ReceiveFd(int socket_fd);

}  // namespace switchyard::kvx
