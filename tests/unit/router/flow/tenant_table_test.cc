#include "router/flow/tenant_table.h"

#include <optional>
#include <string>
#include <vector>

#include "fmt/format.h"
#include "gtest/gtest.h"

namespace switchyard::router::flow {
namespace {

constexpr std::string_view kSecret = "0123456789abcdef0123456789abcdef";

TEST(TenantTableTest, KeyDigestIsSha256) {
  // FIPS 180-2's test vector: SHA-256("abc").
  const KeyDigest digest = ApiKeyDigest("abc");
  std::string hex;
  for (unsigned char byte : digest)
    hex += fmt::format("{:02x}", byte);
  EXPECT_EQ(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TenantsConfig Config(CacheSaltMode salt = CacheSaltMode::kTenant) {
  TenantsConfig c;
  c.cache_salt = salt;
  c.objectives = {{"interactive", 10}, {"batch", -1}, {"bulk", -5}};
  TenantConfig a;
  a.id = "team-a";
  a.api_key_digests = {ApiKeyDigest("key-a"), ApiKeyDigest("key-a2")};
  a.weight = 3;
  a.limits.max_concurrent = 4;
  a.objectives = std::vector<std::string>{"interactive", "batch"};
  a.default_objective = "interactive";
  TenantConfig b;
  b.id = "team-b";
  b.api_key_digests = {ApiKeyDigest("key-b")};
  c.tenants = {a, b};
  return c;
}

TEST(TenantTableTest, HoldsEachTenantAnonymousFirst) {
  const TenantTable table(Config(), kSecret);
  ASSERT_EQ(table.tenants().size(), 3u);
  const Tenant& anonymous = table.anonymous();
  EXPECT_EQ(&anonymous, &table.tenants()[0]);
  EXPECT_EQ(anonymous.id, "anonymous");
  EXPECT_TRUE(anonymous.anonymous);
  EXPECT_FALSE(anonymous.objectives.has_value());
  EXPECT_EQ(anonymous.limits.max_concurrent, 0);
  const Tenant& a = table.tenants()[1];
  EXPECT_EQ(a.id, "team-a");
  EXPECT_FALSE(a.anonymous);
  EXPECT_DOUBLE_EQ(a.weight, 3);
  EXPECT_EQ(a.limits.max_concurrent, 4);
  EXPECT_EQ(a.default_priority, 10);
  EXPECT_EQ(table.tenants()[2].default_priority, 0);
}

struct AuthCase {
  std::optional<std::string> header;
  std::optional<std::string> tenant;  // nullopt: Unauthenticated
};

TEST(TenantTableTest, Authenticates) {
  const std::vector<AuthCase> cases = {
      {"Bearer key-a", "team-a"},      {"Bearer key-a2", "team-a"},
      {"Bearer key-b", "team-b"},      {"bearer key-b", "team-b"},  // the scheme in any case
      {"BEARER key-b", "team-b"},      {"BeArEr   key-b", "team-b"},
      {std::nullopt, "anonymous"},  // no header, keys not required
      {"Bearer key-c", std::nullopt},  {"Bearer KEY-A", std::nullopt},  // the key is exact
      {"Bearer key-a ", std::nullopt}, {"Bearer key-a extra", std::nullopt},
      {"Bearer", std::nullopt},        {"Bearer ", std::nullopt},
      {"key-a", std::nullopt},         {"Basic a2V5LWE=", std::nullopt},
      {"Bearerkey-a", std::nullopt},   {"", std::nullopt},
  };
  const TenantTable table(Config(), kSecret);
  for (const AuthCase& c : cases) {
    const std::string label = c.header.value_or("<none>");
    auto tenant = table.Authenticate(c.header);
    if (c.tenant.has_value()) {
      ASSERT_TRUE(tenant.ok()) << label << ": " << tenant.status();
      EXPECT_EQ((*tenant)->id, *c.tenant) << label;
    } else {
      ASSERT_FALSE(tenant.ok()) << label;
      EXPECT_EQ(tenant.status().code(), absl::StatusCode::kUnauthenticated) << label;
      EXPECT_EQ(tenant.status().message().find("key-"), absl::string_view::npos)
          << label << ": " << tenant.status();
    }
  }
}

TEST(TenantTableTest, MissingHeaderWhenKeysAreRequired) {
  TenantsConfig config = Config();
  config.require_api_key = true;
  const TenantTable table(config, kSecret);
  auto none = table.Authenticate(std::nullopt);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kUnauthenticated);
  auto a = table.Authenticate("Bearer key-a");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ((*a)->id, "team-a");
}

TEST(TenantTableTest, WithoutTenantsNothingIsChecked) {
  // As before tenants existed: the client's Authorization header is the engines' business.
  const TenantTable table(TenantsConfig{}, kSecret);
  for (std::optional<std::string_view> header :
       {std::optional<std::string_view>(), std::optional<std::string_view>("Bearer engine-key"),
        std::optional<std::string_view>("Basic x")}) {
    auto tenant = table.Authenticate(header);
    ASSERT_TRUE(tenant.ok()) << tenant.status();
    EXPECT_TRUE((*tenant)->anonymous);
  }
}

struct PriorityCase {
  size_t tenant;  // index in tenants()
  std::optional<std::string> objective;
  absl::StatusCode code;
  int32_t priority;
};

TEST(TenantTableTest, ResolvesPriorities) {
  using absl::StatusCode;
  const std::vector<PriorityCase> cases = {
      {1, std::nullopt, StatusCode::kOk, 10},  // the default objective's
      {1, "", StatusCode::kOk, 10},
      {1, "batch", StatusCode::kOk, -1},
      {1, "interactive", StatusCode::kOk, 10},
      {1, "bulk", StatusCode::kPermissionDenied, 0},  // not in its objectives
      {1, "gold", StatusCode::kInvalidArgument, 0},
      {2, std::nullopt, StatusCode::kOk, 0},  // no default objective
      {2, "bulk", StatusCode::kOk, -5},       // every objective
      {2, "Bulk", StatusCode::kInvalidArgument, 0},
      {0, std::nullopt, StatusCode::kOk, 0},
      {0, "interactive", StatusCode::kOk, 10},
      {0, std::string("\x01\xff", 2), StatusCode::kInvalidArgument, 0},
  };
  const TenantTable table(Config(), kSecret);
  for (const PriorityCase& c : cases) {
    const Tenant& tenant = table.tenants()[c.tenant];
    const std::string label = tenant.id + " " + c.objective.value_or("<none>");
    auto priority = table.Priority(tenant, c.objective);
    EXPECT_EQ(priority.status().code(), c.code) << label << ": " << priority.status();
    if (priority.ok()) {
      EXPECT_EQ(*priority, c.priority) << label;
    }
  }
  auto unknown = table.Priority(table.anonymous(), "gold");
  EXPECT_EQ(unknown.status().message(), "x-llm-d-inference-objective: unknown objective \"gold\"");
  auto forbidden = table.Priority(table.tenants()[1], "bulk");
  EXPECT_EQ(forbidden.status().message(), "tenant team-a may not use objective bulk");
}

TEST(TenantTableTest, FairnessId) {
  const std::string longest(kMaxFairnessIdBytes, 'f');
  const std::string too_long(kMaxFairnessIdBytes + 1, 'f');
  const TenantTable untrusted(Config(), kSecret);
  const Tenant& a = untrusted.tenants()[1];
  EXPECT_EQ(untrusted.FairnessId(a, "gateway-user"), "team-a");
  EXPECT_EQ(untrusted.FairnessId(a, std::nullopt), "team-a");

  TenantsConfig config = Config();
  config.trust_fairness_header = true;
  const TenantTable trusted(config, kSecret);
  const Tenant& ta = trusted.tenants()[1];
  EXPECT_EQ(trusted.FairnessId(ta, "gateway-user"), "gateway-user");
  EXPECT_EQ(trusted.FairnessId(ta, std::nullopt), "team-a");
  EXPECT_EQ(trusted.FairnessId(ta, ""), "team-a");
  EXPECT_EQ(trusted.FairnessId(ta, longest), longest);
  EXPECT_EQ(trusted.FairnessId(ta, too_long), "team-a");
  EXPECT_EQ(trusted.FairnessId(trusted.anonymous(), "gateway-user"), "gateway-user");
}

bool IsLowerHex(const std::string& s) {
  return s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

TEST(TenantTableTest, CacheSaltInEachMode) {
  const TenantTable tenant_mode(Config(CacheSaltMode::kTenant), kSecret);
  const Tenant& a = tenant_mode.tenants()[1];
  const Tenant& b = tenant_mode.tenants()[2];
  ASSERT_EQ(a.cache_salt.size(), 64u);
  EXPECT_TRUE(IsLowerHex(a.cache_salt));
  EXPECT_NE(a.cache_salt, b.cache_salt);
  EXPECT_EQ(tenant_mode.CacheSalt(a, std::nullopt), a.cache_salt);
  EXPECT_EQ(tenant_mode.CacheSalt(a, "client-salt"), a.cache_salt);  // replaces the client's
  EXPECT_EQ(tenant_mode.CacheSalt(b, "client-salt"), b.cache_salt);

  const TenantTable combined(Config(CacheSaltMode::kTenantAndClient), kSecret);
  const Tenant& ca = combined.tenants()[1];
  EXPECT_EQ(combined.CacheSalt(ca, std::nullopt), ca.cache_salt);
  EXPECT_EQ(combined.CacheSalt(ca, ""), ca.cache_salt);
  EXPECT_EQ(combined.CacheSalt(ca, "client-salt"), ca.cache_salt + ".client-salt");

  const TenantTable client_mode(Config(CacheSaltMode::kClient), kSecret);
  EXPECT_EQ(client_mode.CacheSalt(client_mode.tenants()[1], "client-salt"), std::nullopt);
  EXPECT_EQ(client_mode.CacheSalt(client_mode.tenants()[1], std::nullopt), std::nullopt);

  // The anonymous tenant keeps the client's salt in every mode.
  for (const TenantTable* table : {&tenant_mode, &combined, &client_mode}) {
    EXPECT_TRUE(table->anonymous().cache_salt.empty());
    EXPECT_EQ(table->CacheSalt(table->anonymous(), "client-salt"), std::nullopt);
    EXPECT_EQ(table->CacheSalt(table->anonymous(), std::nullopt), std::nullopt);
  }
}

TEST(TenantTableTest, SaltDependsOnTheSecretNotOnlyTheId) {
  const TenantTable one(Config(), kSecret);
  const TenantTable same(Config(), kSecret);
  const TenantTable other(Config(), "another router secret");
  EXPECT_EQ(one.tenants()[1].cache_salt, same.tenants()[1].cache_salt);
  EXPECT_NE(one.tenants()[1].cache_salt, other.tenants()[1].cache_salt);
  EXPECT_EQ(one.tenants()[1].cache_salt.find("team-a"), std::string::npos);
}

}  // namespace
}  // namespace switchyard::router::flow
