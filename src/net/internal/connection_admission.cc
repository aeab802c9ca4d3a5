#include "net/internal/connection_admission.h"

#include <utility>

#include "base/memory_release.h"

namespace switchyard::net::internal {

ConnectionSlot::ConnectionSlot(ConnectionSlot&& other) noexcept
    : admission_(std::exchange(other.admission_, nullptr)),
      client_(std::move(other.client_)),
      over_capacity_(other.over_capacity_) {}

ConnectionSlot& ConnectionSlot::operator=(ConnectionSlot&& other) noexcept {
  if (this != &other) {
    Release();
    admission_ = std::exchange(other.admission_, nullptr);
    client_ = std::move(other.client_);
    over_capacity_ = other.over_capacity_;
  }
  return *this;
}

void ConnectionSlot::Release() {
  if (ConnectionAdmission* admission = std::exchange(admission_, nullptr))
    admission->Release(client_);
}

ConnectionAdmission::ConnectionAdmission(size_t max_connections, size_t max_per_client)
    : max_connections_(max_connections), max_per_client_(max_per_client) {}

ConnectionSlot ConnectionAdmission::Take(std::string client, Refusal* refusal) {
  base::MutexLock lock(&mu_);
  const size_t open = open_.load(std::memory_order_relaxed);
  if (open >= max_connections_ + kMaxOverCapacity) {
    *refusal = Refusal::kFull;
    return {};
  }
  size_t& from_client = per_client_[client];
  if (max_per_client_ > 0 && from_client >= max_per_client_) {
    *refusal = Refusal::kClientLimit;
    return {};
  }
  ++from_client;
  open_.store(open + 1, std::memory_order_relaxed);
  peak_ = std::max(peak_, open + 1);
  *refusal = Refusal::kNone;
  return ConnectionSlot(this, std::move(client), open >= max_connections_);
}

size_t ConnectionAdmission::OpenFrom(const std::string& client) {
  base::MutexLock lock(&mu_);
  const auto it = per_client_.find(client);
  return it == per_client_.end() ? 0 : it->second;
}

void ConnectionAdmission::Release(const std::string& client) {
  bool wave_ended = false;
  {
    base::MutexLock lock(&mu_);
    const auto it = per_client_.find(client);
    if (it != per_client_.end() && --it->second == 0)
      per_client_.erase(it);
    const size_t open = open_.load(std::memory_order_relaxed) - 1;
    open_.store(open, std::memory_order_relaxed);
    if (peak_ >= kWaveConnections && open * 4 <= peak_) {
      wave_ended = true;
      peak_ = open;
    }
  }
  if (wave_ended)
    base::ReleaseFreeMemory();
}

}  // namespace switchyard::net::internal
