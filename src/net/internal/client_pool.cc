#include "net/internal/client_pool.h"

#include <sys/socket.h>

#include <cerrno>
#include <utility>

namespace switchyard::net::internal {
namespace {

// An idle keep-alive connection must have nothing to read: end-of-stream means the server
// closed it (its keep-alive timeout), bytes mean it broke the protocol. A peek that would
// block is the one healthy answer. Checking costs one syscall and saves sending a request
// into a connection the server already closed.
bool StillOpen(Socket& socket) {
  char byte;
  const ssize_t n = ::recv(socket.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

void CloseSocket(Socket& socket) {
  ErrorCode ec;
  socket.close(ec);
}

}  // namespace

ConnectionPool::ConnectionPool(asio::io_context& context, size_t max_idle,
                               std::chrono::milliseconds idle_timeout,
                               std::chrono::milliseconds trusted_idle)
    : max_idle_(max_idle),
      idle_timeout_(idle_timeout),
      trusted_idle_(trusted_idle),
      sweep_deadline_(context.get_executor(), [this] { Sweep(); }) {}

std::optional<Socket> ConnectionPool::Acquire(const std::string& upstream) {
  const auto it = idle_.find(upstream);
  if (it == idle_.end())
    return std::nullopt;
  std::deque<Idle>& connections = it->second;
  const auto now = std::chrono::steady_clock::now();
  const auto oldest_allowed = now - idle_timeout_;
  std::optional<Socket> found;
  while (!connections.empty() && !found.has_value()) {
    Idle idle = std::move(connections.back());
    connections.pop_back();
    if (idle.since > oldest_allowed &&
        (idle.since > now - trusted_idle_ || StillOpen(idle.socket))) {
      found.emplace(std::move(idle.socket));
    } else {
      CloseSocket(idle.socket);
    }
  }
  // An upstream left with none keeps its (empty) entry until the sweep: the next Release
  // reuses it instead of allocating it again.
  return found;
}

void ConnectionPool::Release(const std::string& upstream, Socket socket) {
  if (closed_ || max_idle_ == 0) {
    CloseSocket(socket);
    return;
  }
  std::deque<Idle>& connections = idle_[upstream];
  if (connections.size() >= max_idle_) {
    CloseSocket(connections.front().socket);
    connections.pop_front();
  }
  connections.push_back({std::move(socket), std::chrono::steady_clock::now()});
  if (!sweep_armed_) {
    sweep_armed_ = true;
    sweep_deadline_.Arm(idle_timeout_, nullptr);
  }
}

void ConnectionPool::Close() {
  closed_ = true;
  sweep_deadline_.Cancel();
  sweep_armed_ = false;
  for (auto& [upstream, connections] : idle_) {
    for (Idle& idle : connections)
      CloseSocket(idle.socket);
  }
  idle_.clear();
}

size_t ConnectionPool::idle_connections() const {
  size_t n = 0;
  for (const auto& [upstream, connections] : idle_)
    n += connections.size();
  return n;
}

void ConnectionPool::Sweep() {
  sweep_armed_ = false;
  const auto now = std::chrono::steady_clock::now();
  std::optional<std::chrono::steady_clock::time_point> oldest;
  for (auto it = idle_.begin(); it != idle_.end();) {
    std::deque<Idle>& connections = it->second;
    while (!connections.empty() && connections.front().since + idle_timeout_ <= now) {
      CloseSocket(connections.front().socket);
      connections.pop_front();
    }
    if (connections.empty()) {
      it = idle_.erase(it);
      continue;
    }
    if (!oldest.has_value() || connections.front().since < *oldest)
      oldest = connections.front().since;
    ++it;
  }
  if (oldest.has_value()) {
    sweep_armed_ = true;
    sweep_deadline_.Arm(std::chrono::ceil<std::chrono::milliseconds>(*oldest + idle_timeout_ - now),
                        nullptr);
  }
}

}  // namespace switchyard::net::internal
