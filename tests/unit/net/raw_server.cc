#include "raw_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <utility>

#include "fmt/format.h"

namespace switchyard::net::testing {
namespace {

using Clock = std::chrono::steady_clock;

// Waits for `fd` to become readable; false on timeout.
bool WaitReadable(int fd, Clock::time_point deadline) {
  while (true) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0)
      return false;
    pollfd p = {fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR)
      continue;
    return ready > 0;
  }
}

// The Content-Length of a request head (0 when absent).
size_t ContentLength(std::string_view head) {
  std::string lower(head);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const size_t at = lower.find("\r\ncontent-length:");
  if (at == std::string::npos)
    return 0;
  return static_cast<size_t>(std::strtoull(lower.c_str() + at + 17, nullptr, 10));
}

}  // namespace

RawConnection::~RawConnection() {
  Close();
}

RawConnection::RawConnection(RawConnection&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), buffer_(std::move(other.buffer_)) {}

RawConnection& RawConnection::operator=(RawConnection&& other) noexcept {
  if (this != &other) {
    Close();
    fd_ = std::exchange(other.fd_, -1);
    buffer_ = std::move(other.buffer_);
  }
  return *this;
}

std::optional<std::string> RawConnection::ReadRequest(std::chrono::milliseconds timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  while (true) {
    const size_t head_end = buffer_.find("\r\n\r\n");
    if (head_end != std::string::npos) {
      const size_t total =
          head_end + 4 + ContentLength(std::string_view(buffer_).substr(0, head_end));
      if (buffer_.size() >= total) {
        std::string request = buffer_.substr(0, total);
        buffer_.erase(0, total);
        return request;
      }
    }
    if (fd_ < 0 || !WaitReadable(fd_, deadline))
      return std::nullopt;
    char data[16384];
    const ssize_t n = ::recv(fd_, data, sizeof(data), 0);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return std::nullopt;
    buffer_.append(data, static_cast<size_t>(n));
  }
}

bool RawConnection::Send(std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

bool RawConnection::WaitForClose(std::chrono::milliseconds timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  while (fd_ >= 0 && WaitReadable(fd_, deadline)) {
    char data[16384];
    const ssize_t n = ::recv(fd_, data, sizeof(data), 0);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return true;
  }
  return false;
}

void RawConnection::Close() {
  if (fd_ >= 0)
    ::close(fd_);
  fd_ = -1;
}

void RawConnection::Reset() {
  if (fd_ < 0)
    return;
  const linger abort_on_close = {1, 0};
  ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &abort_on_close, sizeof(abort_on_close));
  Close();
}

RawServer::RawServer(int backlog) {
  fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd_ < 0)
    return;
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  if (::bind(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0 ||
      ::listen(fd_, backlog) != 0 ||
      ::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    ::close(fd_);
    fd_ = -1;
    return;
  }
  port_ = ntohs(address.sin_port);
}

RawServer::~RawServer() {
  if (fd_ >= 0)
    ::close(fd_);
}

std::string RawServer::upstream() const {
  return fmt::format("127.0.0.1:{}", port_);
}

RawConnection RawServer::Accept(std::chrono::milliseconds timeout) {
  if (fd_ < 0 || !WaitReadable(fd_, Clock::now() + timeout))
    return RawConnection();
  return RawConnection(::accept(fd_, nullptr, nullptr));
}

}  // namespace switchyard::net::testing
