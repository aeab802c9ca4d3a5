#include "kvx/tcp_socket.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/strings/str_format.h"

namespace switchyard::kvx {
namespace {

// iovecs are processed in chunks of this many (IOV_MAX is 1024 on Linux).
constexpr size_t kMaxIovPerCall = 512;

std::string Errno(int err) {
  char buf[128];
  return strerror_r(err, buf, sizeof(buf));
}

struct AddrInfoDeleter {
  void operator()(addrinfo* info) const { freeaddrinfo(info); }
};
using AddrInfoPtr = std::unique_ptr<addrinfo, AddrInfoDeleter>;

absl::StatusOr<AddrInfoPtr> Resolve(const std::string& host, uint16_t port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* result = nullptr;
  const std::string service = std::to_string(port);
  const int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &result);
  if (rc != 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("cannot resolve '%s': %s", host, gai_strerror(rc)));
  }
  return AddrInfoPtr(result);
}

void SetNoDelay(int fd) {
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// Waits until `fd` is ready for `events`, the deadline passes or cancel_fd is readable.
absl::Status Wait(int fd, short events, absl::Time deadline, int cancel_fd) {
  for (;;) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration())
      return absl::DeadlineExceededError("KV peer I/O timed out");
    std::array<pollfd, 2> fds = {pollfd{fd, events, 0}, pollfd{cancel_fd, POLLIN, 0}};
    const int timeout_ms =
        static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, 60'000));
    const int n = poll(fds.data(), cancel_fd >= 0 ? 2 : 1, timeout_ms);
    if (n < 0 && errno != EINTR)
      return absl::UnavailableError("poll: " + Errno(errno));
    if (cancel_fd >= 0 && (fds[1].revents & POLLIN) != 0)
      return absl::CancelledError("KV peer I/O cancelled: shutting down");
    if (n > 0 && fds[0].revents != 0)
      return absl::OkStatus();  // ready, or an error the next call reports
  }
}

// Drops the first `bytes` of `iov` (a working copy).
void Advance(std::vector<iovec>& iov, size_t& first, size_t bytes) {
  while (bytes > 0 && first < iov.size()) {
    const size_t take = std::min(bytes, iov[first].iov_len);
    iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + take;
    iov[first].iov_len -= take;
    bytes -= take;
    if (iov[first].iov_len == 0)
      ++first;
  }
  while (first < iov.size() && iov[first].iov_len == 0)
    ++first;
}

size_t TotalBytes(std::span<const iovec> iov) {
  size_t total = 0;
  for (const iovec& v : iov)
    total += v.iov_len;
  return total;
}

template <typename Io>
absl::Status Transfer(int fd, std::span<const iovec> iov_in, absl::Time deadline, int cancel_fd,
                      short events, const char* what, Io io) {
  std::vector<iovec> iov(iov_in.begin(), iov_in.end());
  size_t first = 0;
  Advance(iov, first, 0);
  const size_t total = TotalBytes(iov_in);
  size_t done = 0;
  while (first < iov.size()) {
    const size_t count = std::min(kMaxIovPerCall, iov.size() - first);
    const ssize_t n = io(fd, iov.data() + first, static_cast<int>(count));
    if (n > 0) {
      done += static_cast<size_t>(n);
      Advance(iov, first, static_cast<size_t>(n));
      continue;
    }
    if (n == 0) {
      return absl::UnavailableError(absl::StrFormat(
          "KV peer closed the connection after %d of %d bytes of a %s", done, total, what));
    }
    if (errno == EINTR)
      continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK)
      return absl::UnavailableError(absl::StrFormat("KV peer %s failed: %s", what, Errno(errno)));
    if (absl::Status s = Wait(fd, events, deadline, cancel_fd); !s.ok())
      return s;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<UniqueFd> ListenTcp(const std::string& address, uint16_t port) {
  auto info = Resolve(address, port, /*passive=*/true);
  if (!info.ok())
    return info.status();
  std::string last_error = "no address";
  for (addrinfo* ai = info->get(); ai != nullptr; ai = ai->ai_next) {
    UniqueFd fd(
        socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol));
    if (!fd.valid()) {
      last_error = "socket: " + Errno(errno);
      continue;
    }
    const int one = 1;
    setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
      last_error = "bind: " + Errno(errno);
      continue;
    }
    if (listen(fd.get(), SOMAXCONN) != 0) {
      last_error = "listen: " + Errno(errno);
      continue;
    }
    return fd;
  }
  return absl::UnavailableError(
      absl::StrFormat("KV peer port %s:%d: %s", address, port, last_error));
}

absl::StatusOr<uint16_t> LocalPort(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    return absl::UnavailableError("getsockname: " + Errno(errno));
  if (addr.ss_family == AF_INET)
    return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
}

absl::StatusOr<UniqueFd> AcceptTcp(int listen_fd) {
  UniqueFd fd(accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
  if (!fd.valid())
    return absl::UnavailableError("accept: " + Errno(errno));
  SetNoDelay(fd.get());
  return fd;
}

absl::StatusOr<UniqueFd> ConnectTcp(const std::string& host, uint16_t port,
                                    absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  auto info = Resolve(host, port, /*passive=*/false);
  if (!info.ok())
    return info.status();
  absl::Status last = absl::UnavailableError("no address");
  for (addrinfo* ai = info->get(); ai != nullptr; ai = ai->ai_next) {
    UniqueFd fd(
        socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol));
    if (!fd.valid()) {
      last = absl::UnavailableError("socket: " + Errno(errno));
      continue;
    }
    if (connect(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) {
        last = absl::UnavailableError(
            absl::StrFormat("connect to KV peer %s:%d: %s", host, port, Errno(errno)));
        continue;
      }
      if (absl::Status s = Wait(fd.get(), POLLOUT, deadline, -1); !s.ok())
        return s;
      int err = 0;
      socklen_t len = sizeof(err);
      getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) {
        last = absl::UnavailableError(
            absl::StrFormat("connect to KV peer %s:%d: %s", host, port, Errno(err)));
        continue;
      }
    }
    SetNoDelay(fd.get());
    return fd;
  }
  return last;
}

absl::Status ReadFully(int fd, std::span<const iovec> iov, absl::Time deadline, int cancel_fd) {
  return Transfer(fd, iov, deadline, cancel_fd, POLLIN, "read",
                  [](int f, const iovec* v, int n) { return readv(f, v, n); });
}

absl::Status WriteFully(int fd, std::span<const iovec> iov, absl::Time deadline, int cancel_fd) {
  return Transfer(fd, iov, deadline, cancel_fd, POLLOUT, "write", [](int f, const iovec* v, int n) {
    msghdr msg{};
    msg.msg_iov = const_cast<iovec*>(v);
    msg.msg_iovlen = static_cast<size_t>(n);
    // MSG_NOSIGNAL: a peer that has closed is an error value, not SIGPIPE.
    return sendmsg(f, &msg, MSG_NOSIGNAL);
  });
}

}  // namespace switchyard::kvx
