#include "router/endpoint_table.h"

#include <algorithm>
#include <atomic>
#include <set>

#include "fmt/format.h"

#include "base/json.h"

namespace switchyard::router {

std::string MemberAddress(const std::string& ip, int port) {
  return ip.find(':') == std::string::npos ? fmt::format("{}:{}", ip, port)
                                           : fmt::format("[{}]:{}", ip, port);
}

void EndpointTable::SetPoolMembers(const std::string& pool,
                                   const std::vector<EndpointSpec>& specs) {
  base::MutexLock lock(&mu_);
  Changed();
  std::set<std::string> keep;
  for (const EndpointSpec& spec : specs) {
    keep.insert(spec.name);
    State& s = endpoints_[spec.name];
    s.spec = spec;
    s.spec.pool = pool;
  }
  for (auto it = endpoints_.begin(); it != endpoints_.end();) {
    if (it->second.spec.pool == pool && !keep.contains(it->first))
      it = endpoints_.erase(it);
    else
      ++it;
  }
}

void EndpointTable::ReportMetrics(const std::string& name, const EndpointMetrics& metrics,
                                  Clock::time_point at) {
  base::MutexLock lock(&mu_);
  auto it = endpoints_.find(name);
  if (it == endpoints_.end())
    return;
  it->second.metrics = metrics;
  it->second.has_metrics = true;
  it->second.metrics_at = at;
  it->second.healthy = true;
  it->second.consecutive_failures = 0;
  it->second.scrape_error.clear();
  it->second.scrape_unauthorized = false;
  Changed();
}

void EndpointTable::ReportReachable(const std::string& name) {
  base::MutexLock lock(&mu_);
  auto it = endpoints_.find(name);
  if (it == endpoints_.end())
    return;
  if (!it->second.healthy)
    Changed();
  it->second.healthy = true;
  it->second.consecutive_failures = 0;
  it->second.scrape_error.clear();
  it->second.scrape_unauthorized = false;
}

bool EndpointTable::ReportScrapeFailure(const std::string& name, std::string_view error,
                                        int http_status) {
  base::MutexLock lock(&mu_);
  auto it = endpoints_.find(name);
  if (it == endpoints_.end())
    return false;
  State& s = it->second;
  if (++s.consecutive_failures >= kUnhealthyAfterFailures && s.healthy) {
    s.healthy = false;
    Changed();
    WakeWaiters(it->second);
  }
  s.scrape_unauthorized = http_status == 401 || http_status == 403;
  if (s.scrape_error == error)
    return false;
  s.scrape_error = std::string(error);
  return true;
}

void EndpointTable::ReportRefusing(const std::string& name, Clock::time_point until) {
  base::MutexLock lock(&mu_);
  auto it = endpoints_.find(name);
  if (it == endpoints_.end() || until <= it->second.refusing_until)
    return;
  it->second.refusing_until = until;
  Changed();
}

void EndpointTable::ReportKvEvents(const std::string& name, const kvx::KvEventSourceStats& stats) {
  base::MutexLock lock(&mu_);
  auto it = endpoints_.find(name);
  if (it != endpoints_.end())
    it->second.kv_events = stats;
}

void EndpointTable::WakeWaiters(State& s) {
  if (s.waiters_down)
    return;
  s.waiters_down = true;
  s.load->waiters.Down();
}

bool EndpointTable::ReportRequestFailure(std::string_view name, EndpointLoad* load,
                                         Clock::time_point now) {
  if (outlier_.consecutive_5xx <= 0 ||
      load->consecutive_failures.fetch_add(1, std::memory_order_relaxed) + 1 <
          outlier_.consecutive_5xx) {
    return false;
  }
  base::MutexLock lock(&mu_);
  auto it = endpoints_.find(name);
  if (it == endpoints_.end() || it->second.load.get() != load)
    return false;  // gone, or rejoined since (with a new load)
  State& s = it->second;
  if (s.outlier.ejected(now)) {
    // Attempts that were under way when it was ejected: their failures do not add up to
    // its next ejection.
    load->consecutive_failures.store(0, std::memory_order_relaxed);
    return false;
  }
  int members = 0;
  int ejected = 0;
  for (const auto& [other_name, other] : endpoints_) {
    if (other.spec.pool != s.spec.pool)
      continue;
    ++members;
    ejected += other.outlier.ejected(now) ? 1 : 0;
  }
  if (!MayEject(outlier_, members, ejected))
    return false;  // the count stays: its next failure tries again
  s.outlier.Eject(outlier_, now);
  load->consecutive_failures.store(0, std::memory_order_relaxed);
  Changed();
  WakeWaiters(s);
  return true;
}

Endpoint EndpointTable::ToEndpoint(const State& s, Clock::time_point now) const {
  Endpoint e;
  e.name = s.spec.name;
  e.address = s.spec.address;
  e.pool = s.spec.pool;
  e.labels = s.spec.labels;
  e.authorization = s.spec.authorization;
  e.metrics = s.metrics;
  e.metrics.fresh = s.has_metrics && now - s.metrics_at <= staleness_;
  if (s.has_metrics)
    e.metrics.scraped_at = s.metrics_at;
  e.load = s.load;
  return e;
}

std::shared_ptr<const std::vector<Endpoint>> EndpointTable::Snapshot(Clock::time_point now) const {
  base::MutexLock lock(&mu_);
  // Still right when nothing changed since and no endpoint fresh in it went stale
  // (nor is `now` before it, when a stale one might have been fresh), and no ejection or
  // refusal in it ended.
  if (snapshot_ != nullptr && now >= snapshot_at_ && now < valid_until_)
    return snapshot_;
  auto out = std::make_shared<std::vector<Endpoint>>();
  out->reserve(endpoints_.size());
  valid_until_ = Clock::time_point::max();
  for (const auto& [name, s] : endpoints_) {
    if (s.outlier.ejected(now)) {
      valid_until_ = std::min(valid_until_, s.outlier.ejected_until());
      continue;
    }
    if (!s.healthy)
      continue;
    if (s.waiters_down) {
      s.waiters_down = false;
      s.load->waiters.Up();
    }
    if (now < s.refusing_until) {
      // Back in the snapshots when its Retry-After ends.
      valid_until_ = std::min(valid_until_, s.refusing_until);
      continue;
    }
    out->push_back(ToEndpoint(s, now));
    if (out->back().metrics.fresh)  // while now - metrics_at <= staleness_
      valid_until_ = std::min(valid_until_, s.metrics_at + staleness_ + Clock::duration(1));
  }
  snapshot_ = std::move(out);
  snapshot_at_ = now;
  return snapshot_;
}

std::vector<EndpointSpec> EndpointTable::Members() const {
  base::MutexLock lock(&mu_);
  std::vector<EndpointSpec> out;
  for (const auto& [name, s] : endpoints_)
    out.push_back(s.spec);
  return out;
}

std::vector<EndpointStatus> EndpointTable::Statuses(Clock::time_point now) const {
  base::MutexLock lock(&mu_);
  std::vector<EndpointStatus> out;
  out.reserve(endpoints_.size());
  for (const auto& [name, s] : endpoints_) {
    EndpointStatus& status = out.emplace_back();
    status.endpoint = ToEndpoint(s, now);
    status.healthy = s.healthy;
    status.metrics_age_s =
        s.has_metrics ? std::chrono::duration<double>(now - s.metrics_at).count() : -1.0;
    status.engine = s.spec.engine;
    status.ejected = s.outlier.ejected(now);
    status.ejected_for_s =
        status.ejected ? std::chrono::duration<double>(s.outlier.ejected_until() - now).count() : 0;
    status.ejections = s.outlier.ejections();
    status.consecutive_failures = s.load->consecutive_failures.load(std::memory_order_relaxed);
    status.credentials = s.spec.credentials;
    status.scrape_error = s.scrape_error;
    status.refusing_s =
        std::max(0.0, std::chrono::duration<double>(s.refusing_until - now).count());
    status.scrape_unauthorized = s.scrape_unauthorized;
    status.kv_events = s.kv_events;
  }
  return out;
}

namespace {

// The credentials' source (never the key), the last scrape error, the KV event stream.
void AppendDiagnostics(const EndpointStatus& status, std::string* out) {
  out->append(",\"credentials\":");
  if (status.credentials.empty())
    out->append("null");
  else
    base::AppendJsonString(status.credentials, false, out);
  out->append(",\"scrape_error\":");
  if (status.scrape_error.empty())
    out->append("null");
  else
    base::AppendJsonString(status.scrape_error, false, out);
  out->append(fmt::format(",\"scrape_unauthorized\":{},\"refusing_s\":{:.3f}",
                          status.scrape_unauthorized, status.refusing_s));
  if (!status.kv_events.has_value())
    return;
  const kvx::KvEventSourceStats& k = *status.kv_events;
  out->append(fmt::format(",\"kv_events\":{{\"stale\":{},\"stale_reason\":", k.stale));
  if (k.stale)
    base::AppendJsonString(k.stale_reason, false, out);
  else
    out->append("null");
  out->append(fmt::format(
      ",\"last_seq\":{},\"batches\":{},\"replayed\":{},\"gaps\":{},\"losses\":{},"
      "\"restarts\":{},\"decode_errors\":{}}}",
      k.last_seq, k.batches, k.replayed, k.gaps, k.losses, k.restarts, k.decode_errors));
}

}  // namespace

std::string EndpointTable::DebugJson(Clock::time_point now) const {
  std::string out = "{\"endpoints\":[";
  bool first = true;
  for (const EndpointStatus& status : Statuses(now)) {
    const Endpoint& e = status.endpoint;
    out.append(first ? "{" : ",{");
    first = false;
    out.append("\"name\":");
    base::AppendJsonString(e.name, false, &out);
    out.append(",\"address\":");
    base::AppendJsonString(e.address, false, &out);
    out.append(",\"pool\":");
    base::AppendJsonString(e.pool, false, &out);
    out.append(",\"engine\":");
    base::AppendJsonString(EngineKindName(status.engine), false, &out);
    out.append(",\"labels\":{");
    bool first_label = true;
    for (const auto& [k, v] : e.labels) {
      out.append(first_label ? "" : ",");
      first_label = false;
      base::AppendJsonString(k, false, &out);
      out.push_back(':');
      base::AppendJsonString(v, false, &out);
    }
    out.append(fmt::format(
        "}},\"healthy\":{},\"metrics\":{{\"fresh\":{},\"age_s\":{:.3f},\"waiting_requests\":{},"
        "\"running_requests\":{},\"kv_cache_usage\":{:.4f},\"block_size\":{},"
        "\"num_gpu_blocks\":{}}},\"active_requests\":{},\"elsewhere_requests\":{},"
        "\"inflight_prompt_tokens\":{},"
        "\"outlier\":{{\"ejected\":{},\"ejected_for_s\":{:.3f},\"ejections\":{},"
        "\"consecutive_failures\":{}}}",
        status.healthy, e.metrics.fresh, status.metrics_age_s, e.metrics.waiting_requests,
        e.metrics.running_requests, e.metrics.kv_cache_usage, e.metrics.block_size,
        e.metrics.num_gpu_blocks, e.active_requests(),
        e.active_requests() - e.own_active_requests(), e.inflight_prompt_tokens(), status.ejected,
        status.ejected_for_s, status.ejections, status.consecutive_failures));
    AppendDiagnostics(status, &out);
    out.push_back('}');
  }
  out.append("]}");
  return out;
}

}  // namespace switchyard::router
