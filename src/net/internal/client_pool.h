// ConnectionPool: the idle keep-alive connections of one HttpClient loop, per upstream
// ("host:port"). Acquire hands out the most recently used live one (LIFO keeps the warm
// ones warm and lets the cold ones age out); connections idle longer than the idle timeout
// are closed by a sweep timer, and an upstream never keeps more than `max_idle` of them
// (the oldest is closed to make room).
//
// Whether the server closed an idle connection is checked when it is taken (a peek, one
// syscall), except for one idle under `trusted_idle`: servers close idle keep-alive
// connections after seconds (uvicorn's default, so vLLM's and SGLang's, and llama.cpp's:
// 5 s), so under load, where a syscall per request costs, the peek would find it open; one
// lost anyway fails before its first response byte, and ClientCall sends the request again
// on a fresh connection.
//
// Threads: the loop's thread only. Owned by ClientLoop, which keeps it until the loop's
// thread was joined (the sweep timer's callback points at it).
#pragma once

#include <chrono>
#include <cstddef>
#include <deque>
#include <optional>
#include <string>
#include <unordered_map>

#include "net/internal/beast.h"
#include "net/internal/deadline.h"

namespace switchyard::net::internal {

class ConnectionPool {
 public:
  ConnectionPool(asio::io_context& context, size_t max_idle, std::chrono::milliseconds idle_timeout,
                 std::chrono::milliseconds trusted_idle = kDefaultTrustedIdle);

  static constexpr std::chrono::milliseconds kDefaultTrustedIdle{500};
  ConnectionPool(const ConnectionPool&) = delete;
  ConnectionPool& operator=(const ConnectionPool&) = delete;

  // An idle connection to `upstream` that the server has not closed (a connection with
  // end-of-stream, an error or stray bytes waiting is closed and skipped; one idle under
  // trusted_idle is not checked); nullopt when there is none.
  std::optional<Socket> Acquire(const std::string& upstream);
  // Keeps `socket`, which has just finished a response with nothing left unread, for the
  // next request to `upstream`; closes it when the pool keeps nothing or is closed.
  void Release(const std::string& upstream, Socket socket);
  // Closes every idle connection; later Releases close theirs. Idempotent.
  void Close();

  size_t idle_connections() const;

 private:
  struct Idle {
    Socket socket;
    std::chrono::steady_clock::time_point since;
  };

  // Closes what has been idle for idle_timeout_, then arms the timer for the next expiry.
  void Sweep();

  const size_t max_idle_;
  const std::chrono::milliseconds idle_timeout_;
  const std::chrono::milliseconds trusted_idle_;
  // Per upstream, oldest first; the sweep erases an upstream with none.
  std::unordered_map<std::string, std::deque<Idle>> idle_;
  Deadline sweep_deadline_;
  bool sweep_armed_ = false;
  bool closed_ = false;
};

}  // namespace switchyard::net::internal
