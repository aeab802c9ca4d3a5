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
// A call holds its upstream's entry for as long as it runs (Hold, then Release or Drop), so
// that taking a connection and giving it back cost one lookup of the upstream in all, and the
// connection moves straight between the pool and the call's socket.
//
// Threads: the loop's thread only. Owned by ClientLoop, which keeps it until the loop's
// thread was joined (the sweep timer's callback points at it).
#pragma once

#include <chrono>
#include <cstddef>
#include <deque>
#include <optional>
#include <string>

#include "absl/container/node_hash_map.h"

#include "net/internal/beast.h"
#include "net/internal/deadline.h"

namespace switchyard::net::internal {

class ConnectionPool {
 public:
  using Clock = std::chrono::steady_clock;

  ConnectionPool(asio::io_context& context, size_t max_idle, std::chrono::milliseconds idle_timeout,
                 std::chrono::milliseconds trusted_idle = kDefaultTrustedIdle);

  static constexpr std::chrono::milliseconds kDefaultTrustedIdle{500};
  ConnectionPool(const ConnectionPool&) = delete;
  ConnectionPool& operator=(const ConnectionPool&) = delete;

  // One upstream's entry: its idle connections, oldest first. A call holds its upstream's
  // entry from Hold until Release or Drop and reaches it through the pointer meanwhile, so
  // that a request looks its upstream up once. The sweep erases an entry that keeps no
  // connection and that no call holds.
  struct Upstream {
    struct Idle {
      Socket socket;
      Clock::time_point since;
    };
    std::deque<Idle> idle;
    size_t holders = 0;
  };

  // `upstream`'s entry (made when new), held until Release or Drop.
  Upstream* Hold(const std::string& upstream);
  // Puts an idle connection of `upstream`'s that the server has not closed into `*socket` and
  // returns true (a connection with end-of-stream, an error or stray bytes waiting is closed
  // and skipped; one idle under trusted_idle at `now` is not checked); false when there is
  // none. REQUIRES: `upstream` is held.
  bool Acquire(Upstream* upstream, Clock::time_point now, std::optional<Socket>* socket);
  // Keeps `socket`, which has just finished a response with nothing left unread (idle since
  // `now`), for the next request to `upstream`, and ends the hold; closes it when the pool
  // keeps nothing or is closed. REQUIRES: `upstream` is held.
  void Release(Upstream* upstream, Socket&& socket, Clock::time_point now);
  // Ends the hold without a connection to keep. REQUIRES: `upstream` is held.
  void Drop(Upstream* upstream);
  // Closes every idle connection; later Releases close theirs. Idempotent.
  void Close();

  size_t idle_connections() const;

 private:
  // Closes what has been idle for idle_timeout_, then arms the timer for the next expiry.
  void Sweep();
  void ArmSweep();

  const size_t max_idle_;
  const std::chrono::milliseconds idle_timeout_;
  const std::chrono::milliseconds trusted_idle_;
  // Node-based: an entry stays where it is while held. Abseil's hash: a lookup per request.
  absl::node_hash_map<std::string, Upstream> upstreams_;
  Deadline sweep_deadline_;
  bool sweep_armed_ = false;
  bool closed_ = false;
};

}  // namespace switchyard::net::internal
