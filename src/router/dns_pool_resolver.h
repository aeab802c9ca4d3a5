// DnsPoolResolver: the members of pools named by DNS (`pools[].dns` in the router config).
// Each entry is resolved (A and AAAA records) every refreshSeconds; its addresses become
// endpoints named "<ip>:<port>" ("[<ipv6>]:<port>"), which join the pool's static members in
// the endpoint table through SetPoolMembers (new ones are added, gone ones removed,
// survivors keep their health, metrics and in-flight counts). A failed resolution keeps the
// entry's previous members and logs a warning, so a DNS hiccup never empties a pool; a
// resolution that succeeds with no address (NXDOMAIN or no records: the service is gone or
// scaled to zero) does remove them.
//
// Threads: Start resolves every entry on the calling thread, then refreshes on an owned
// thread, "sy-dns" (getaddrinfo blocks; the scraper must not wait on it). Stop wakes and
// joins it, after a resolution in progress returns. RefreshDue is what that thread runs;
// tests call it directly with an injected resolve function and their own times, without
// Start. Borrows the table, which must outlive it.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"

#include "base/mutex.h"
#include "router/endpoint_table.h"
#include "router/router_config.h"

namespace switchyard::router {

// The numeric addresses `host` resolves to (A and AAAA), sorted, without duplicates; an
// empty list when the name has no address. Unavailable for a failed lookup (no answer from
// the resolver, out of memory): the caller keeps what it had.
using DnsResolveFn =
    std::function<absl::StatusOr<std::vector<std::string>>(const std::string& host)>;

// DnsResolveFn over getaddrinfo.
absl::StatusOr<std::vector<std::string>> ResolveHostAddresses(const std::string& host);

class DnsPoolResolver {
 public:
  using Clock = std::chrono::steady_clock;

  // Keeps the pools of `pools` that have dns entries (the others are left alone).
  DnsPoolResolver(const std::vector<PoolConfig>& pools, EndpointTable* table,
                  DnsResolveFn resolve = ResolveHostAddresses);
  ~DnsPoolResolver();
  DnsPoolResolver(const DnsPoolResolver&) = delete;
  DnsPoolResolver& operator=(const DnsPoolResolver&) = delete;

  // Resolves every entry now (the members are in the table when it returns), then starts
  // the refresh thread. Call once.
  void Start();
  // Idempotent.
  void Stop();

  // Resolves the entries due at `now` (all of them the first time), updates the pools whose
  // members changed, and returns when the next entry is due.
  // REQUIRES: not concurrently with itself (the refresh thread runs it after Start).
  Clock::time_point RefreshDue(Clock::time_point now);

 private:
  struct Entry {
    DnsMembersConfig config;
    std::vector<EndpointSpec> members;
    Clock::time_point next_due = Clock::time_point::min();
  };
  struct Pool {
    std::string name;
    std::vector<EndpointSpec> static_members;
    std::vector<Entry> entries;
  };

  // Returns whether the entry's members changed.
  bool Refresh(const std::string& pool, Entry* entry, Clock::time_point now);
  void Publish(const Pool& pool);
  void Loop(Clock::time_point next);

  EndpointTable* const table_;
  const DnsResolveFn resolve_;
  std::vector<Pool> pools_;  // only RefreshDue's thread

  base::Mutex mu_;
  base::CondVar cv_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace switchyard::router
