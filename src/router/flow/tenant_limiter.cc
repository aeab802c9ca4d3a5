#include "router/flow/tenant_limiter.h"

#include <algorithm>
#include <cmath>

namespace switchyard::router::flow {

std::string_view RefusalReasonName(RefusalReason reason) {
  switch (reason) {
    case RefusalReason::kRateLimitedRequests:
      return "rate-limited-requests";
    case RefusalReason::kRateLimitedTokens:
      return "rate-limited-tokens";
    case RefusalReason::kExceedsTokenQuota:
      return "exceeds-token-quota";
  }
  return "unknown";
}

TenantLimiter::TenantLimiter(const TenantTable& table) {
  base::MutexLock lock(&mu_);
  for (const Tenant& tenant : table.tenants()) {
    index_.try_emplace(tenant.id, states_.size());
    State& state = states_.emplace_back();
    const TenantLimits& limits = tenant.limits;
    if (limits.requests_per_second > 0) {
      const double burst = limits.burst > 0 ? static_cast<double>(limits.burst)
                                            : std::max(1.0, std::ceil(limits.requests_per_second));
      state.requests.emplace(burst, limits.requests_per_second);
    }
    if (limits.tokens_per_minute > 0) {
      const auto per_minute = static_cast<double>(limits.tokens_per_minute);
      state.tokens.emplace(per_minute, per_minute / 60);
    }
    state.max_concurrent = limits.max_concurrent;
    state.usage.tenant_id = tenant.id;
    state.unsent.tenant_id = tenant.id;
  }
}

std::optional<size_t> TenantLimiter::IndexOf(const Tenant& tenant) const {
  // Debian's absl::string_view is not std::string_view: the heterogeneous lookup needs it.
  const auto it = index_.find(absl::string_view(tenant.id.data(), tenant.id.size()));
  if (it == index_.end())
    return std::nullopt;
  return it->second;
}

std::optional<Refusal> TenantLimiter::CheckRequestRate(const Tenant& tenant,
                                                       Clock::time_point now) {
  const std::optional<size_t> i = IndexOf(tenant);
  if (!i.has_value())
    return std::nullopt;
  base::MutexLock lock(&mu_);
  State& state = states_[*i];
  if (!state.requests.has_value())
    return std::nullopt;
  state.requests->Refill(now);
  const std::chrono::seconds wait = state.requests->Wait(1);
  if (wait.count() == 0)
    return std::nullopt;
  ++state.usage.refusals[static_cast<size_t>(RefusalReason::kRateLimitedRequests)];
  return Refusal{RefusalReason::kRateLimitedRequests, wait};
}

std::optional<Refusal> TenantLimiter::Admit(const Tenant& tenant, int64_t prompt_tokens,
                                            Clock::time_point now) {
  const std::optional<size_t> i = IndexOf(tenant);
  if (!i.has_value())
    return std::nullopt;
  const int64_t prompt = std::max<int64_t>(0, prompt_tokens);
  const auto cost = static_cast<double>(prompt);
  base::MutexLock lock(&mu_);
  State& state = states_[*i];
  const auto refuse = [&state](RefusalReason reason, std::optional<std::chrono::seconds> wait) {
    ++state.usage.refusals[static_cast<size_t>(reason)];
    return Refusal{reason, wait};
  };
  if (state.tokens.has_value() && cost > state.tokens->capacity())
    return refuse(RefusalReason::kExceedsTokenQuota, std::nullopt);
  std::chrono::seconds requests_wait(0);
  if (state.requests.has_value()) {
    state.requests->Refill(now);
    requests_wait = state.requests->Wait(1);
  }
  std::chrono::seconds tokens_wait(0);
  if (state.tokens.has_value()) {
    state.tokens->Refill(now);
    tokens_wait = state.tokens->Wait(cost);
  }
  if (requests_wait.count() > 0 || tokens_wait.count() > 0) {
    return refuse(requests_wait.count() > 0 ? RefusalReason::kRateLimitedRequests
                                            : RefusalReason::kRateLimitedTokens,
                  std::max(requests_wait, tokens_wait));
  }
  if (state.requests.has_value())
    state.requests->Take(1);
  if (state.tokens.has_value())
    state.tokens->Take(cost);
  state.usage.prompt_tokens += prompt;
  ++state.unsent.requests;
  state.unsent.tokens += prompt;
  return std::nullopt;
}

void TenantLimiter::ChargeGenerated(const Tenant& tenant, int64_t tokens, Clock::time_point now) {
  const std::optional<size_t> i = IndexOf(tenant);
  if (!i.has_value() || tokens <= 0)
    return;
  base::MutexLock lock(&mu_);
  State& state = states_[*i];
  if (state.tokens.has_value()) {
    state.tokens->Refill(now);
    state.tokens->Take(static_cast<double>(tokens));
  }
  state.usage.generated_tokens += tokens;
  state.unsent.tokens += tokens;
}

bool TenantLimiter::TryStart(const Tenant& tenant) {
  const std::optional<size_t> i = IndexOf(tenant);
  if (!i.has_value())
    return true;
  base::MutexLock lock(&mu_);
  State& state = states_[*i];
  if (state.max_concurrent > 0 && state.usage.in_flight >= state.max_concurrent)
    return false;
  ++state.usage.in_flight;
  return true;
}

void TenantLimiter::Finish(const Tenant& tenant) {
  const std::optional<size_t> i = IndexOf(tenant);
  if (!i.has_value())
    return;
  base::MutexLock lock(&mu_);
  State& state = states_[*i];
  if (state.usage.in_flight > 0)
    --state.usage.in_flight;
}

int64_t TenantLimiter::in_flight(const Tenant& tenant) const {
  const std::optional<size_t> i = IndexOf(tenant);
  if (!i.has_value())
    return 0;
  base::MutexLock lock(&mu_);
  return states_[*i].usage.in_flight;
}

std::vector<TenantUsage> TenantLimiter::Usage() const {
  std::vector<TenantUsage> usage;
  base::MutexLock lock(&mu_);
  usage.reserve(states_.size());
  for (const State& state : states_)
    usage.push_back(state.usage);
  return usage;
}

std::vector<QuotaCharge> TenantLimiter::TakeCharges() {
  std::vector<QuotaCharge> charges;
  base::MutexLock lock(&mu_);
  for (State& state : states_) {
    if (state.unsent.requests == 0 && state.unsent.tokens == 0)
      continue;
    charges.push_back(state.unsent);
    state.unsent.requests = 0;
    state.unsent.tokens = 0;
  }
  return charges;
}

void TenantLimiter::ChargeElsewhere(const QuotaCharge& charge, Clock::time_point now) {
  const auto it = index_.find(absl::string_view(charge.tenant_id.data(), charge.tenant_id.size()));
  if (it == index_.end())
    return;
  base::MutexLock lock(&mu_);
  State& state = states_[it->second];
  if (state.requests.has_value() && charge.requests > 0) {
    state.requests->Refill(now);
    // Down to empty, not into debt: a burst elsewhere must not lock this replica out for
    // longer than the rate says.
    state.requests->Take(
        std::min(static_cast<double>(charge.requests), std::max(0.0, state.requests->available())));
  }
  if (state.tokens.has_value() && charge.tokens > 0) {
    state.tokens->Refill(now);
    state.tokens->Take(static_cast<double>(charge.tokens));
  }
}

}  // namespace switchyard::router::flow
