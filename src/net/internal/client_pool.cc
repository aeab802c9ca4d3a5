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

ConnectionPool::Upstream* ConnectionPool::Hold(const std::string& upstream) {
  Upstream& entry = upstreams_[upstream];
  ++entry.holders;
  return &entry;
}

bool ConnectionPool::Acquire(Upstream* upstream, Clock::time_point now,
                             std::optional<Socket>* socket) {
  std::deque<Upstream::Idle>& connections = upstream->idle;
  const auto oldest_allowed = now - idle_timeout_;
  while (!connections.empty()) {
    Upstream::Idle& idle = connections.back();
    const bool usable =
        idle.since > oldest_allowed && (idle.since > now - trusted_idle_ || StillOpen(idle.socket));
    if (usable) {
      socket->emplace(std::move(idle.socket));
    } else {
      CloseSocket(idle.socket);
    }
    connections.pop_back();
    if (usable)
      return true;
  }
  // An upstream left with none keeps its (empty) entry until the sweep: the next Hold reuses
  // it instead of allocating it again.
  return false;
}

void ConnectionPool::Release(Upstream* upstream, Socket&& socket, Clock::time_point now) {
  --upstream->holders;
  if (closed_ || max_idle_ == 0) {
    CloseSocket(socket);
    return;
  }
  std::deque<Upstream::Idle>& connections = upstream->idle;
  if (connections.size() >= max_idle_) {
    CloseSocket(connections.front().socket);
    connections.pop_front();
  }
  connections.push_back({std::move(socket), now});
  ArmSweep();
}

void ConnectionPool::Drop(Upstream* upstream) {
  --upstream->holders;
  // The sweep erases the entry when nothing else keeps it.
  if (upstream->holders == 0 && upstream->idle.empty())
    ArmSweep();
}

void ConnectionPool::ArmSweep() {
  if (sweep_armed_ || closed_)
    return;
  sweep_armed_ = true;
  sweep_deadline_.Arm(idle_timeout_, nullptr);
}

void ConnectionPool::Close() {
  closed_ = true;
  sweep_deadline_.Cancel();
  sweep_armed_ = false;
  for (auto it = upstreams_.begin(); it != upstreams_.end();) {
    for (Upstream::Idle& idle : it->second.idle)
      CloseSocket(idle.socket);
    it->second.idle.clear();
    // A held entry stays until its holder lets go.
    if (it->second.holders == 0) {
      upstreams_.erase(it++);
    } else {
      ++it;
    }
  }
}

size_t ConnectionPool::idle_connections() const {
  size_t n = 0;
  for (const auto& [name, upstream] : upstreams_)
    n += upstream.idle.size();
  return n;
}

void ConnectionPool::Sweep() {
  sweep_armed_ = false;
  const auto now = Clock::now();
  std::optional<Clock::time_point> oldest;
  for (auto it = upstreams_.begin(); it != upstreams_.end();) {
    std::deque<Upstream::Idle>& connections = it->second.idle;
    while (!connections.empty() && connections.front().since + idle_timeout_ <= now) {
      CloseSocket(connections.front().socket);
      connections.pop_front();
    }
    if (connections.empty()) {
      if (it->second.holders == 0) {
        upstreams_.erase(it++);
      } else {
        ++it;
      }
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
