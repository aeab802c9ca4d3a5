#include "router/flow/tenant_limiter.h"

#include <atomic>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace switchyard::router::flow {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr std::string_view kSecret = "limiter test secret";
const Clock::time_point kT0 = Clock::time_point() + seconds(1000);

// One tenant, "t", with `limits`; tenants()[1] of the table.
TenantsConfig OneTenant(const TenantLimits& limits) {
  TenantsConfig config;
  TenantConfig t;
  t.id = "t";
  t.api_key_digests = {ApiKeyDigest("key")};
  t.limits = limits;
  config.tenants = {t};
  return config;
}

int64_t Refusals(const TenantLimiter& limiter, size_t tenant, RefusalReason reason) {
  return limiter.Usage()[tenant].refusals[static_cast<size_t>(reason)];
}

TEST(TenantLimiterTest, ReasonNames) {
  EXPECT_EQ(RefusalReasonName(RefusalReason::kRateLimitedRequests), "rate-limited-requests");
  EXPECT_EQ(RefusalReasonName(RefusalReason::kRateLimitedTokens), "rate-limited-tokens");
  EXPECT_EQ(RefusalReasonName(RefusalReason::kExceedsTokenQuota), "exceeds-token-quota");
}

struct Step {
  milliseconds at;  // since kT0
  int64_t prompt_tokens;
  std::optional<RefusalReason> refused;  // nullopt: admitted
  seconds retry_after{0};
};

struct LimitCase {
  const char* name;
  TenantLimits limits;
  std::vector<Step> steps;
};

TEST(TenantLimiterTest, BucketsOverASteppedClock) {
  constexpr auto kRequests = RefusalReason::kRateLimitedRequests;
  constexpr auto kTokens = RefusalReason::kRateLimitedTokens;
  const std::vector<LimitCase> cases = {
      {"2/s, burst defaults to 2",
       {.requests_per_second = 2},
       {{milliseconds(0), 0, std::nullopt},
        {milliseconds(0), 0, std::nullopt},
        {milliseconds(0), 0, kRequests, seconds(1)},
        {milliseconds(499), 0, kRequests, seconds(1)},
        {milliseconds(500), 0, std::nullopt},  // the refusals took nothing
        {milliseconds(500), 0, kRequests, seconds(1)},
        {milliseconds(5000), 0, std::nullopt},
        {milliseconds(5000), 0, std::nullopt},
        {milliseconds(5000), 0, kRequests, seconds(1)}}},
      {"one per 4 s, burst defaults to 1",
       {.requests_per_second = 0.25},
       {{milliseconds(0), 0, std::nullopt},
        {milliseconds(0), 0, kRequests, seconds(4)},
        {milliseconds(1000), 0, kRequests, seconds(3)},
        {milliseconds(3500), 0, kRequests, seconds(1)},
        {milliseconds(4000), 0, std::nullopt}}},
      {"1/s with a burst of 3",
       {.requests_per_second = 1, .burst = 3},
       {{milliseconds(0), 0, std::nullopt},
        {milliseconds(0), 0, std::nullopt},
        {milliseconds(0), 0, std::nullopt},
        {milliseconds(0), 0, kRequests, seconds(1)},
        {milliseconds(1000), 0, std::nullopt},
        {milliseconds(1000), 0, kRequests, seconds(1)}}},
      {"600 tokens/min: 10 a second",
       {.tokens_per_minute = 600},
       {{milliseconds(0), 400, std::nullopt},
        {milliseconds(0), 300, kTokens, seconds(10)},
        {milliseconds(0), 200, std::nullopt},  // the refusal took nothing
        {milliseconds(0), 1, kTokens, seconds(1)},
        {milliseconds(9000), 100, kTokens, seconds(1)},
        {milliseconds(10000), 100, std::nullopt},
        {milliseconds(10000), 0, std::nullopt}}},
      {"both: the later bucket's wait, the first refusing bucket's reason",
       {.requests_per_second = 1, .tokens_per_minute = 60},
       {{milliseconds(0), 50, std::nullopt},
        {milliseconds(0), 20, kRequests, seconds(10)},
        {milliseconds(1000), 20, kTokens, seconds(9)},
        {milliseconds(10000), 20, std::nullopt}}},
  };
  for (const LimitCase& c : cases) {
    const TenantTable table(OneTenant(c.limits), kSecret);
    TenantLimiter limiter(table);
    const Tenant& t = table.tenants()[1];
    int64_t admitted_tokens = 0;
    for (size_t i = 0; i < c.steps.size(); ++i) {
      const Step& step = c.steps[i];
      const std::optional<Refusal> refusal = limiter.Admit(t, step.prompt_tokens, kT0 + step.at);
      ASSERT_EQ(refusal.has_value(), step.refused.has_value()) << c.name << " step " << i;
      if (refusal.has_value()) {
        EXPECT_EQ(refusal->reason, *step.refused) << c.name << " step " << i;
        EXPECT_EQ(refusal->retry_after, step.retry_after) << c.name << " step " << i;
      } else {
        admitted_tokens += step.prompt_tokens;
      }
    }
    EXPECT_EQ(limiter.Usage()[1].prompt_tokens, admitted_tokens) << c.name;
  }
}

TEST(TenantLimiterTest, PromptLargerThanTheQuotaNeverPasses) {
  const TenantTable table(OneTenant({.requests_per_second = 1, .tokens_per_minute = 100}), kSecret);
  TenantLimiter limiter(table);
  const Tenant& t = table.tenants()[1];
  for (Clock::time_point now : {kT0, kT0 + seconds(3600)}) {
    const std::optional<Refusal> refusal = limiter.Admit(t, 101, now);
    ASSERT_TRUE(refusal.has_value());
    EXPECT_EQ(refusal->reason, RefusalReason::kExceedsTokenQuota);
    EXPECT_EQ(refusal->retry_after, std::nullopt);
  }
  // Nothing was taken: the whole quota and the one request of the burst are still there.
  EXPECT_EQ(limiter.Admit(t, 100, kT0 + seconds(3600)), std::nullopt);
  EXPECT_EQ(Refusals(limiter, 1, RefusalReason::kExceedsTokenQuota), 2);
  EXPECT_EQ(limiter.Usage()[1].prompt_tokens, 100);
}

TEST(TenantLimiterTest, CheckRequestRateRefusesAnEmptyBucketAndTakesNothing) {
  const TenantTable table(OneTenant({.requests_per_second = 0.5, .tokens_per_minute = 100}),
                          kSecret);
  TenantLimiter limiter(table);
  const Tenant& t = table.tenants()[1];
  // The check passes without taking: the burst's one request is still there to admit.
  EXPECT_EQ(limiter.CheckRequestRate(t, kT0), std::nullopt);
  EXPECT_EQ(limiter.CheckRequestRate(t, kT0), std::nullopt);
  EXPECT_EQ(limiter.Admit(t, 10, kT0), std::nullopt);
  const std::optional<Refusal> refusal = limiter.CheckRequestRate(t, kT0 + milliseconds(500));
  ASSERT_TRUE(refusal.has_value());
  EXPECT_EQ(refusal->reason, RefusalReason::kRateLimitedRequests);
  EXPECT_EQ(refusal->retry_after, seconds(2));
  EXPECT_EQ(Refusals(limiter, 1, RefusalReason::kRateLimitedRequests), 1);
  EXPECT_EQ(limiter.CheckRequestRate(t, kT0 + seconds(2)), std::nullopt);
  // A tenant without a request rate is never refused by it.
  const TenantTable unlimited(OneTenant({.tokens_per_minute = 1}), kSecret);
  TenantLimiter free_limiter(unlimited);
  EXPECT_EQ(free_limiter.CheckRequestRate(unlimited.tenants()[1], kT0), std::nullopt);
  EXPECT_EQ(limiter.Usage()[1].prompt_tokens, 10);
}

TEST(TenantLimiterTest, ChargesAreTakenOnceAndChargesElsewhereCountAgainstTheQuota) {
  const TenantTable table(
      OneTenant({.requests_per_second = 1, .burst = 4, .tokens_per_minute = 600}), kSecret);
  TenantLimiter limiter(table);
  const Tenant& t = table.tenants()[1];
  ASSERT_EQ(limiter.Admit(t, 10, kT0), std::nullopt);
  limiter.ChargeGenerated(t, 5, kT0);
  std::vector<QuotaCharge> charges = limiter.TakeCharges();
  ASSERT_EQ(charges.size(), 1u);
  EXPECT_EQ(charges[0].tenant_id, "t");
  EXPECT_EQ(charges[0].requests, 1);
  EXPECT_EQ(charges[0].tokens, 15);
  EXPECT_TRUE(limiter.TakeCharges().empty());
  // Another replica admitted 2 requests and used 580 tokens: one request of the burst is
  // left here, and the token bucket is in debt (600 - 15 - 580 = 5 left).
  limiter.ChargeElsewhere({"t", 2, 580}, kT0);
  limiter.ChargeElsewhere({"nobody", 9, 9}, kT0);  // not in the table: ignored
  const std::optional<Refusal> tokens = limiter.Admit(t, 10, kT0);
  ASSERT_TRUE(tokens.has_value());
  EXPECT_EQ(tokens->reason, RefusalReason::kRateLimitedTokens);
  ASSERT_EQ(limiter.Admit(t, 5, kT0), std::nullopt);
  EXPECT_EQ(limiter.CheckRequestRate(t, kT0)->reason, RefusalReason::kRateLimitedRequests);
  // A burst elsewhere larger than the bucket empties it, no more: one second refills one.
  limiter.ChargeElsewhere({"t", 100, 0}, kT0);
  EXPECT_EQ(limiter.CheckRequestRate(t, kT0 + seconds(1)), std::nullopt);
  // What was charged elsewhere is neither usage nor a charge to send on.
  EXPECT_EQ(limiter.Usage()[1].prompt_tokens, 15);
  charges = limiter.TakeCharges();
  ASSERT_EQ(charges.size(), 1u);
  EXPECT_EQ(charges[0].requests, 1);
  EXPECT_EQ(charges[0].tokens, 5);
}

TEST(TenantLimiterTest, GeneratedTokensPutTheBucketInDebt) {
  const TenantTable table(OneTenant({.tokens_per_minute = 60}), kSecret);
  TenantLimiter limiter(table);
  const Tenant& t = table.tenants()[1];
  ASSERT_EQ(limiter.Admit(t, 10, kT0), std::nullopt);
  limiter.ChargeGenerated(t, 40, kT0);
  limiter.ChargeGenerated(t, 60, kT0 + seconds(1));  // 50 + 1 - 100: 49 in debt
  std::optional<Refusal> refusal = limiter.Admit(t, 1, kT0 + seconds(1));
  ASSERT_TRUE(refusal.has_value());
  EXPECT_EQ(refusal->reason, RefusalReason::kRateLimitedTokens);
  EXPECT_EQ(refusal->retry_after, seconds(50));
  EXPECT_TRUE(limiter.Admit(t, 1, kT0 + seconds(50)).has_value());
  EXPECT_EQ(limiter.Admit(t, 1, kT0 + seconds(51)), std::nullopt);
  const TenantUsage usage = limiter.Usage()[1];
  EXPECT_EQ(usage.prompt_tokens, 11);
  EXPECT_EQ(usage.generated_tokens, 100);
  EXPECT_EQ(usage.refusals[static_cast<size_t>(RefusalReason::kRateLimitedTokens)], 2);
}

TEST(TenantLimiterTest, GeneratedTokensAreCountedWithoutAQuota) {
  const TenantTable table(OneTenant({}), kSecret);
  TenantLimiter limiter(table);
  limiter.ChargeGenerated(table.tenants()[1], 7, kT0);
  limiter.ChargeGenerated(table.tenants()[1], 0, kT0);
  EXPECT_EQ(limiter.Usage()[1].generated_tokens, 7);
  EXPECT_EQ(limiter.Usage()[0].generated_tokens, 0);
}

TEST(TenantLimiterTest, Concurrency) {
  const TenantTable table(OneTenant({.max_concurrent = 2}), kSecret);
  TenantLimiter limiter(table);
  const Tenant& t = table.tenants()[1];
  EXPECT_TRUE(limiter.TryStart(t));
  EXPECT_TRUE(limiter.TryStart(t));
  EXPECT_FALSE(limiter.TryStart(t));
  EXPECT_EQ(limiter.in_flight(t), 2);
  limiter.Finish(t);
  EXPECT_EQ(limiter.in_flight(t), 1);
  EXPECT_TRUE(limiter.TryStart(t));
  EXPECT_FALSE(limiter.TryStart(t));
  limiter.Finish(t);
  limiter.Finish(t);
  limiter.Finish(t);  // one too many: stays at zero
  EXPECT_EQ(limiter.in_flight(t), 0);
  // No limit for the anonymous tenant.
  for (int i = 0; i < 100; ++i)
    EXPECT_TRUE(limiter.TryStart(table.anonymous()));
  EXPECT_EQ(limiter.in_flight(table.anonymous()), 100);
  EXPECT_EQ(limiter.Usage()[0].in_flight, 100);
}

TEST(TenantLimiterTest, AnonymousHasNoLimits) {
  const TenantTable table(OneTenant({.requests_per_second = 1, .tokens_per_minute = 10}), kSecret);
  TenantLimiter limiter(table);
  for (int i = 0; i < 1000; ++i)
    ASSERT_EQ(limiter.Admit(table.anonymous(), 1000, kT0), std::nullopt);
  const std::vector<TenantUsage> usage = limiter.Usage();
  ASSERT_EQ(usage.size(), 2u);
  EXPECT_EQ(usage[0].tenant_id, "anonymous");
  EXPECT_EQ(usage[0].prompt_tokens, 1'000'000);
  EXPECT_EQ(usage[1].tenant_id, "t");
  EXPECT_EQ(usage[1].prompt_tokens, 0);
}

TEST(TenantLimiterTest, ATenantOfAnotherTableIsNotLimitedNorCounted) {
  const TenantTable table(OneTenant({.requests_per_second = 1, .max_concurrent = 1}), kSecret);
  TenantLimiter limiter(table);
  Tenant stranger;
  stranger.id = "stranger";
  stranger.limits.max_concurrent = 1;
  EXPECT_EQ(limiter.Admit(stranger, 10, kT0), std::nullopt);
  EXPECT_EQ(limiter.Admit(stranger, 10, kT0), std::nullopt);
  EXPECT_TRUE(limiter.TryStart(stranger));
  EXPECT_TRUE(limiter.TryStart(stranger));
  EXPECT_EQ(limiter.in_flight(stranger), 0);
  limiter.Finish(stranger);
  for (const TenantUsage& usage : limiter.Usage())
    EXPECT_EQ(usage.prompt_tokens, 0) << usage.tenant_id;
}

// Many request threads on one limiter (TSan checks it in the tsan preset): the limits hold
// under contention, and every counter adds up.
TEST(TenantLimiterTest, ManyThreads) {
  TenantsConfig config;
  for (const char* id : {"a", "b"}) {
    TenantConfig t;
    t.id = id;
    t.api_key_digests = {ApiKeyDigest(id)};
    t.limits = {
        .requests_per_second = 100, .burst = 10, .tokens_per_minute = 600'000, .max_concurrent = 3};
    config.tenants.push_back(t);
  }
  const TenantTable table(config, kSecret);
  TenantLimiter limiter(table);
  constexpr int kThreads = 8;
  constexpr int kIterations = 2000;
  constexpr int64_t kPrompt = 5;
  std::atomic<int64_t> admitted[2] = {0, 0};
  std::atomic<int64_t> refused[2] = {0, 0};
  std::atomic<int> over_limit{0};
  std::vector<std::thread> threads;
  for (int k = 0; k < kThreads; ++k) {
    threads.emplace_back([&, k] {
      for (int i = 0; i < kIterations; ++i) {
        const size_t which = static_cast<size_t>((i + k) % 2);
        const Tenant& t = table.tenants()[which + 1];
        // Each thread's clock lags or leads the others' by up to kThreads ms.
        const Clock::time_point now = kT0 + milliseconds(i + k);
        if (limiter.Admit(t, kPrompt, now).has_value()) {
          ++refused[which];
          continue;
        }
        ++admitted[which];
        if (!limiter.TryStart(t))
          continue;
        if (limiter.in_flight(t) > 3)
          ++over_limit;
        limiter.ChargeGenerated(t, 2, now);
        limiter.Finish(t);
      }
    });
  }
  for (std::thread& thread : threads)
    thread.join();
  EXPECT_EQ(over_limit.load(), 0);
  const std::vector<TenantUsage> usage = limiter.Usage();
  for (size_t which = 0; which < 2; ++which) {
    const TenantUsage& u = usage[which + 1];
    EXPECT_EQ(u.in_flight, 0);
    EXPECT_EQ(u.prompt_tokens, admitted[which].load() * kPrompt);
    EXPECT_EQ(u.refusals[static_cast<size_t>(RefusalReason::kRateLimitedRequests)] +
                  u.refusals[static_cast<size_t>(RefusalReason::kRateLimitedTokens)],
              refused[which].load());
    // The clock spans kIterations + kThreads ms: at most the burst plus 100/s of it.
    EXPECT_LE(admitted[which].load(), 10 + (kIterations + kThreads) / 10 + 1);
    EXPECT_GT(admitted[which].load(), 0);
  }
}

}  // namespace
}  // namespace switchyard::router::flow
