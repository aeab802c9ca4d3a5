#include "router/dns_pool_resolver.h"

#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <set>
#include <utility>

#include "fmt/format.h"

#include "base/logging.h"
#include "base/thread_name.h"

namespace switchyard::router {
namespace {

std::vector<EndpointSpec> MembersOf(const std::string& pool, const DnsMembersConfig& config,
                                    const std::vector<std::string>& ips) {
  std::vector<EndpointSpec> members;
  members.reserve(ips.size());
  for (const std::string& ip : ips) {
    EndpointSpec spec;
    spec.address = MemberAddress(ip, config.port);
    spec.name = spec.address;
    spec.labels = config.labels;
    spec.engine = config.engine;
    spec.pool = pool;
    spec.authorization = config.authorization;
    spec.credentials = config.credentials;
    members.push_back(std::move(spec));
  }
  return members;
}

bool SameNames(const std::vector<EndpointSpec>& a, const std::vector<EndpointSpec>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [](const EndpointSpec& x, const EndpointSpec& y) { return x.name == y.name; });
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ResolveHostAddresses(const std::string& host) {
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &result);
  // No such name, or no address for it: an answer (the members go), not a failure.
  if (rc == EAI_NONAME || rc == EAI_NODATA)
    return std::vector<std::string>{};
  if (rc != 0) {
    return absl::UnavailableError(
        fmt::format("cannot resolve '{}': {}", host, std::string(::gai_strerror(rc))));
  }
  std::set<std::string> ips;
  for (const addrinfo* a = result; a != nullptr; a = a->ai_next) {
    char ip[NI_MAXHOST];
    if (::getnameinfo(a->ai_addr, a->ai_addrlen, ip, sizeof(ip), nullptr, 0, NI_NUMERICHOST) == 0)
      ips.insert(ip);
  }
  ::freeaddrinfo(result);
  return std::vector<std::string>(ips.begin(), ips.end());
}

DnsPoolResolver::DnsPoolResolver(const std::vector<PoolConfig>& pools, EndpointTable* table,
                                 DnsResolveFn resolve)
    : table_(table), resolve_(std::move(resolve)) {
  for (const PoolConfig& config : pools) {
    if (config.dns.empty())
      continue;
    Pool pool;
    pool.name = config.name;
    for (const StaticEndpointConfig& e : config.endpoints)
      pool.static_members.push_back(e.spec);
    for (const DnsMembersConfig& d : config.dns)
      pool.entries.push_back({d, {}, Clock::time_point::min()});
    pools_.push_back(std::move(pool));
  }
}

DnsPoolResolver::~DnsPoolResolver() {
  Stop();
}

void DnsPoolResolver::Start() {
  const Clock::time_point next = RefreshDue(Clock::now());
  thread_ = std::thread([this, next] {
    base::SetCurrentThreadName("sy-dns");
    Loop(next);
  });
}

void DnsPoolResolver::Stop() {
  {
    base::MutexLock lock(&mu_);
    stopping_ = true;
  }
  cv_.NotifyAll();
  if (thread_.joinable())
    thread_.join();
}

void DnsPoolResolver::Loop(Clock::time_point next) {
  for (;;) {
    {
      base::MutexLock lock(&mu_);
      // A timed wait, not a sleep: Stop wakes it at once.
      cv_.WaitUntil(&mu_, next, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; });
      if (stopping_)
        return;
    }
    next = RefreshDue(Clock::now());
  }
}

DnsPoolResolver::Clock::time_point DnsPoolResolver::RefreshDue(Clock::time_point now) {
  Clock::time_point next = Clock::time_point::max();
  for (Pool& pool : pools_) {
    bool changed = false;
    for (Entry& entry : pool.entries) {
      if (entry.next_due <= now) {
        const bool first = entry.next_due == Clock::time_point::min();
        changed = Refresh(pool.name, &entry, now) || changed || first;
      }
      next = std::min(next, entry.next_due);
    }
    if (changed)
      Publish(pool);
  }
  return next;
}

bool DnsPoolResolver::Refresh(const std::string& pool, Entry* entry, Clock::time_point now) {
  entry->next_due = now + std::chrono::seconds(entry->config.refresh_seconds);
  absl::StatusOr<std::vector<std::string>> ips = resolve_(entry->config.name);
  if (!ips.ok()) {
    SY_LOG_WARN("router: pool {}: {}; keeping its {} members from {}", pool,
                std::string(ips.status().message()), entry->members.size(), entry->config.name);
    return false;
  }
  std::vector<EndpointSpec> members = MembersOf(pool, entry->config, *ips);
  if (SameNames(members, entry->members))
    return false;
  SY_LOG_INFO("router: pool {}: {} resolves to {} members (was {})", pool, entry->config.name,
              members.size(), entry->members.size());
  entry->members = std::move(members);
  return true;
}

void DnsPoolResolver::Publish(const Pool& pool) {
  // Static members first: a DNS address equal to one keeps the static spec.
  std::vector<EndpointSpec> specs = pool.static_members;
  std::set<std::string> names;
  for (const EndpointSpec& s : specs)
    names.insert(s.name);
  for (const Entry& entry : pool.entries) {
    for (const EndpointSpec& s : entry.members) {
      if (names.insert(s.name).second)
        specs.push_back(s);
    }
  }
  table_->SetPoolMembers(pool.name, specs);
}

}  // namespace switchyard::router
