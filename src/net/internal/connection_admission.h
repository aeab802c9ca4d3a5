// ConnectionAdmission: which accepted connections an HttpServer takes, under its connection
// limits: at most max_connections open in all, at most max_connections_per_client from one
// client address (so that one client, say a slowloris, cannot take every slot). A taken
// connection holds a ConnectionSlot until it closes.
//
// Past max_connections a connection is still taken, marked over capacity: the server then
// sheds an idle or stalled connection for it, or closes it (http_server.cc). Over capacity is
// bounded: past max_connections + kMaxOverCapacity (connections waiting for their shed) a new
// one is refused outright.
//
// After a wave (open connections climbed past kWaveConnections and fell to a quarter of
// their peak), the slot that ends it releases the allocator's free memory to the system: a
// wave of slow connections would otherwise leave the process that much bigger for good.
//
// Threads: thread-safe; the accepting loop takes slots, any loop releases them.
#pragma once

#include <atomic>
#include <cstddef>
#include <string>

#include "absl/container/flat_hash_map.h"

#include "base/mutex.h"

namespace switchyard::net::internal {

class ConnectionAdmission;

// One open connection's place under the limits; move-only, released on destruction.
class ConnectionSlot {
 public:
  ConnectionSlot() = default;
  ConnectionSlot(ConnectionSlot&& other) noexcept;
  ConnectionSlot& operator=(ConnectionSlot&& other) noexcept;
  ConnectionSlot(const ConnectionSlot&) = delete;
  ConnectionSlot& operator=(const ConnectionSlot&) = delete;
  ~ConnectionSlot() { Release(); }

  // Gives the slot back; idempotent.
  void Release();
  bool held() const { return admission_ != nullptr; }
  // Taken past max_connections: the server must shed another connection or close this one.
  bool over_capacity() const { return over_capacity_; }

 private:
  friend class ConnectionAdmission;
  ConnectionSlot(ConnectionAdmission* admission, std::string client, bool over_capacity)
      : admission_(admission), client_(std::move(client)), over_capacity_(over_capacity) {}

  ConnectionAdmission* admission_ = nullptr;
  std::string client_;
  bool over_capacity_ = false;
};

class ConnectionAdmission {
 public:
  static constexpr size_t kMaxOverCapacity = 64;
  static constexpr size_t kWaveConnections = 512;

  // 0 for max_per_client: no per-client limit.
  ConnectionAdmission(size_t max_connections, size_t max_per_client);
  ConnectionAdmission(const ConnectionAdmission&) = delete;
  ConnectionAdmission& operator=(const ConnectionAdmission&) = delete;

  enum class Refusal { kNone, kClientLimit, kFull };
  // A slot for a connection from `client` (an address without its port), or why not; on a
  // refusal the slot is not held.
  ConnectionSlot Take(std::string client, Refusal* refusal);

  size_t open() const { return open_.load(std::memory_order_relaxed); }
  // Connections from `client` now.
  size_t OpenFrom(const std::string& client);

 private:
  friend class ConnectionSlot;
  void Release(const std::string& client);

  const size_t max_connections_;
  const size_t max_per_client_;
  std::atomic<size_t> open_{0};
  base::Mutex mu_;
  absl::flat_hash_map<std::string, size_t> per_client_ ABSL_GUARDED_BY(mu_);
  size_t peak_ ABSL_GUARDED_BY(mu_) = 0;  // the most open since the last release
};

}  // namespace switchyard::net::internal
