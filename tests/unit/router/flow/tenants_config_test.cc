#include "router/flow/tenants_config.h"

#include <string>

#include "gtest/gtest.h"

#include "base/config.h"
#include "router/router_config.h"

namespace switchyard::router::flow {
namespace {

std::string Key(char digit) {
  return "\"sha256:" + std::string(64, digit) + "\"";
}

absl::StatusOr<TenantsConfig> Parse(const std::string& yaml) {
  absl::StatusOr<YAML::Node> root = base::ParseYaml(yaml, "r.yaml");
  if (!root.ok())
    return root.status();
  return ParseTenantsConfig(*root, "r.yaml");
}

TEST(TenantsConfigTest, WithoutSectionsEveryRequestIsAnonymous) {
  auto c = ParseRouterConfig("model: m\npools:\n- endpoints: [{address: 'h:1'}]\n", "r", ".");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->tenants.require_api_key);
  EXPECT_FALSE(c->tenants.trust_fairness_header);
  EXPECT_EQ(c->tenants.cache_salt, CacheSaltMode::kTenant);
  EXPECT_TRUE(c->tenants.tenants.empty());
  EXPECT_TRUE(c->tenants.objectives.empty());
}

TEST(TenantsConfigTest, RouterConfigParsesBothSections) {
  const std::string yaml =
      "model: m\npools:\n- endpoints: [{address: 'h:1'}]\n"
      "tenants:\n  requireApiKey: true\n  list:\n  - id: a\n    apiKeys: [" +
      Key('1') + "]\nobjectives: [{name: chat, priority: 3}]\n";
  auto c = ParseRouterConfig(yaml, "r", ".");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->tenants.require_api_key);
  ASSERT_EQ(c->tenants.tenants.size(), 1u);
  EXPECT_EQ(c->tenants.tenants[0].id, "a");
  ASSERT_EQ(c->tenants.objectives.size(), 1u);
  EXPECT_EQ(c->tenants.objectives[0].priority, 3);

  auto bad = ParseRouterConfig(yaml + "  cacheSalt: none\n", "r", ".");
  ASSERT_FALSE(bad.ok());
}

TEST(TenantsConfigTest, ParsesEveryField) {
  auto c = Parse(R"(
tenants:
  requireApiKey: true
  trustFairnessHeader: true
  cacheSalt: tenant+client
  list:
  - id: team-a
    apiKeys: ["sha256:BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD", )" +
                 Key('2') + R"(]
    weight: 2.5
    limits: {requestsPerSecond: 0.5, burst: 3, tokensPerMinute: 60000, maxConcurrent: 4,
             maxQueued: 32}
    objectives: [interactive, batch]
    defaultObjective: batch
  - id: Team_B.2
    apiKeys: [)" +
                 Key('3') + R"(]
objectives:
- {name: interactive, priority: 10}
- {name: batch, priority: -1}
- {name: plain}
)");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->require_api_key);
  EXPECT_TRUE(c->trust_fairness_header);
  EXPECT_EQ(c->cache_salt, CacheSaltMode::kTenantAndClient);
  ASSERT_EQ(c->tenants.size(), 2u);
  const TenantConfig& a = c->tenants[0];
  EXPECT_EQ(a.id, "team-a");
  ASSERT_EQ(a.api_key_digests.size(), 2u);
  // Upper-case hex is read too.
  EXPECT_EQ(a.api_key_digests[0][0], 0xba);
  EXPECT_EQ(a.api_key_digests[0][1], 0x78);
  EXPECT_EQ(a.api_key_digests[0][31], 0xad);
  KeyDigest twos;
  twos.fill(0x22);
  EXPECT_EQ(a.api_key_digests[1], twos);
  EXPECT_DOUBLE_EQ(a.weight, 2.5);
  EXPECT_DOUBLE_EQ(a.limits.requests_per_second, 0.5);
  EXPECT_EQ(a.limits.burst, 3);
  EXPECT_EQ(a.limits.tokens_per_minute, 60000);
  EXPECT_EQ(a.limits.max_concurrent, 4);
  EXPECT_EQ(a.limits.max_queued, 32);
  EXPECT_EQ(a.objectives, (std::vector<std::string>{"interactive", "batch"}));
  EXPECT_EQ(a.default_objective, "batch");
  // Every default.
  const TenantConfig& b = c->tenants[1];
  EXPECT_EQ(b.id, "Team_B.2");
  EXPECT_DOUBLE_EQ(b.weight, 1);
  EXPECT_EQ(b.limits.requests_per_second, 0);
  EXPECT_EQ(b.limits.burst, 0);
  EXPECT_EQ(b.limits.tokens_per_minute, 0);
  EXPECT_EQ(b.limits.max_concurrent, 0);
  EXPECT_EQ(b.limits.max_queued, 0);
  EXPECT_FALSE(b.objectives.has_value());
  EXPECT_FALSE(b.default_objective.has_value());
  ASSERT_EQ(c->objectives.size(), 3u);
  EXPECT_EQ(c->objectives[1].name, "batch");
  EXPECT_EQ(c->objectives[1].priority, -1);
  EXPECT_EQ(c->objectives[2].priority, 0);
}

TEST(TenantsConfigTest, SectionDefaults) {
  auto c = Parse("tenants: {list: [{id: a, apiKeys: [" + Key('1') + "]}]}\n");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->require_api_key);
  EXPECT_FALSE(c->trust_fairness_header);
  EXPECT_EQ(c->cache_salt, CacheSaltMode::kTenant);
  for (const auto& [text, mode] : {std::pair{"tenant", CacheSaltMode::kTenant},
                                   std::pair{"tenant+client", CacheSaltMode::kTenantAndClient},
                                   std::pair{"client", CacheSaltMode::kClient}}) {
    auto m = Parse(std::string("tenants: {cacheSalt: ") + text + "}\n");
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_EQ(m->cache_salt, mode) << text;
  }
}

struct ErrorCase {
  std::string yaml;
  std::string message;  // the whole error
};

TEST(TenantsConfigTest, EachErrorNamesItsField) {
  const std::string k1 = Key('1');
  const std::string k2 = Key('2');
  const std::string tenant_a = "- {id: a, apiKeys: [" + k1 + "]";
  const std::string objectives = "objectives: [{name: chat, priority: 1}, {name: bulk}]\n";
  const std::vector<ErrorCase> cases = {
      {"tenants: [a]\n", "r.yaml: tenants: expected a mapping"},
      {"tenants: {requireApiKeys: true}\n",
       "r.yaml: tenants: unknown key \"requireApiKeys\" (expected requireApiKey, "
       "trustFairnessHeader, cacheSalt, list)"},
      {"tenants: {requireApiKey: maybe}\n",
       "r.yaml: tenants.requireApiKey: expected true or false"},
      {"tenants: {trustFairnessHeader: [1]}\n",
       "r.yaml: tenants.trustFairnessHeader: expected true or false"},
      {"tenants: {cacheSalt: none}\n",
       "r.yaml: tenants.cacheSalt: expected tenant, tenant+client or client"},
      {"tenants: {requireApiKey: true}\n",
       "r.yaml: tenants.requireApiKey: no tenant has a key: tenants.list is empty"},
      {"tenants: {list: {id: a}}\n", "r.yaml: tenants.list: expected a list of tenants"},
      {"tenants:\n  list:\n  - id: a\n    id: b\n", "r.yaml: tenants.list[0].id: given twice"},
      {"tenants:\n  list:\n  " + tenant_a + ", key: x}\n",
       "r.yaml: tenants.list[0]: unknown key \"key\" (expected id, apiKeys, weight, limits, "
       "objectives, defaultObjective)"},
      {"tenants:\n  list:\n  - {apiKeys: [" + k1 + "]}\n",
       "r.yaml: tenants.list[0].id: expected 1 to 64 characters of [A-Za-z0-9._-]"},
      {"tenants:\n  list:\n  - {id: 'a b', apiKeys: [" + k1 + "]}\n",
       "r.yaml: tenants.list[0].id: expected 1 to 64 characters of [A-Za-z0-9._-]"},
      {"tenants:\n  list:\n  - {id: " + std::string(65, 'x') + ", apiKeys: [" + k1 + "]}\n",
       "r.yaml: tenants.list[0].id: expected 1 to 64 characters of [A-Za-z0-9._-]"},
      {"tenants:\n  list:\n  - {id: anonymous, apiKeys: [" + k1 + "]}\n",
       "r.yaml: tenants.list[0].id: \"anonymous\" is reserved for requests without a key"},
      {"tenants:\n  list:\n  " + tenant_a + "}\n  - {id: a, apiKeys: [" + k2 + "]}\n",
       "r.yaml: tenants.list[1].id: \"a\" is also tenants.list[0]'s id"},
      {"tenants:\n  list:\n  - {id: a}\n",
       "r.yaml: tenants.list[0].apiKeys: expected a non-empty list of \"sha256:<64 hex digits>\""},
      {"tenants:\n  list:\n  - {id: a, apiKeys: []}\n",
       "r.yaml: tenants.list[0].apiKeys: expected a non-empty list of \"sha256:<64 hex digits>\""},
      {"tenants:\n  list:\n  - {id: a, apiKeys: [" + k1 + ", sk-raw-key]}\n",
       "r.yaml: tenants.list[0].apiKeys[1]: expected \"sha256:\" and 64 hex digits"},
      {"tenants:\n  list:\n  - {id: a, apiKeys: [\"sha256:" + std::string(63, 'a') + "\"]}\n",
       "r.yaml: tenants.list[0].apiKeys[0]: expected \"sha256:\" and 64 hex digits"},
      {"tenants:\n  list:\n  - {id: a, apiKeys: [\"sha256:" + std::string(63, 'a') + "g\"]}\n",
       "r.yaml: tenants.list[0].apiKeys[0]: expected \"sha256:\" and 64 hex digits"},
      {"tenants:\n  list:\n  - {id: a, apiKeys: [\"sha512:" + std::string(64, 'a') + "\"]}\n",
       "r.yaml: tenants.list[0].apiKeys[0]: expected \"sha256:\" and 64 hex digits"},
      {"tenants:\n  list:\n  " + tenant_a + "}\n  - {id: b, apiKeys: [" + k2 + ", " + k1 + "]}\n",
       "r.yaml: tenants.list[1].apiKeys[1]: the same key as tenants.list[0].apiKeys[0]"},
      {"tenants:\n  list:\n  " + tenant_a + ", weight: 0}\n",
       "r.yaml: tenants.list[0].weight: must be a finite number > 0"},
      {"tenants:\n  list:\n  " + tenant_a + ", weight: -1}\n",
       "r.yaml: tenants.list[0].weight: must be a finite number > 0"},
      {"tenants:\n  list:\n  " + tenant_a + ", weight: .nan}\n",
       "r.yaml: tenants.list[0].weight: must be a finite number > 0"},
      {"tenants:\n  list:\n  " + tenant_a + ", weight: heavy}\n",
       "r.yaml: tenants.list[0].weight: expected a number"},
      {"tenants:\n  list:\n  " + tenant_a + ", limits: 5}\n",
       "r.yaml: tenants.list[0].limits: expected a mapping"},
      {"tenants:\n  list:\n  " + tenant_a + ", limits: {rps: 5}}\n",
       "r.yaml: tenants.list[0].limits: unknown key \"rps\" (expected requestsPerSecond, burst, "
       "tokensPerMinute, maxConcurrent, maxQueued)"},
      {"tenants:\n  list:\n  " + tenant_a + ", limits: {requestsPerSecond: -1}}\n",
       "r.yaml: tenants.list[0].limits.requestsPerSecond: must be a finite number >= 0 (0: none)"},
      {"tenants:\n  list:\n  " + tenant_a + ", limits: {requestsPerSecond: .inf}}\n",
       "r.yaml: tenants.list[0].limits.requestsPerSecond: must be a finite number >= 0 (0: none)"},
      {"tenants:\n  list:\n  " + tenant_a + ", limits: {requestsPerSecond: 1, burst: -2}}\n",
       "r.yaml: tenants.list[0].limits.burst: must be >= 0 (0: none)"},
      {"tenants:\n  list:\n  " + tenant_a + ", limits: {burst: 2}}\n",
       "r.yaml: tenants.list[0].limits.burst: needs requestsPerSecond"},
      {"tenants:\n  list:\n  " + tenant_a + ", limits: {tokensPerMinute: -1}}\n",
       "r.yaml: tenants.list[0].limits.tokensPerMinute: must be >= 0 (0: none)"},
      {"tenants:\n  list:\n  " + tenant_a + ", limits: {tokensPerMinute: 1.5}}\n",
       "r.yaml: tenants.list[0].limits.tokensPerMinute: expected an integer"},
      {"tenants:\n  list:\n  " + tenant_a + ", limits: {maxConcurrent: -1}}\n",
       "r.yaml: tenants.list[0].limits.maxConcurrent: must be >= 0 (0: none)"},
      {"tenants:\n  list:\n  " + tenant_a + ", limits: {maxQueued: -1}}\n",
       "r.yaml: tenants.list[0].limits.maxQueued: must be >= 0 (0: none)"},
      {objectives + "tenants:\n  list:\n  " + tenant_a + ", objectives: chat}\n",
       "r.yaml: tenants.list[0].objectives: expected a list of objective names"},
      {objectives + "tenants:\n  list:\n  " + tenant_a + ", objectives: []}\n",
       "r.yaml: tenants.list[0].objectives: name at least one objective (omit the key for "
       "every one)"},
      {objectives + "tenants:\n  list:\n  " + tenant_a + ", objectives: [chat, gold]}\n",
       "r.yaml: tenants.list[0].objectives[1]: no objective named \"gold\" in objectives"},
      {"tenants:\n  list:\n  " + tenant_a + ", objectives: [chat]}\n",
       "r.yaml: tenants.list[0].objectives[0]: no objective named \"chat\" in objectives"},
      {objectives + "tenants:\n  list:\n  " + tenant_a + ", objectives: [chat, chat]}\n",
       "r.yaml: tenants.list[0].objectives[1]: \"chat\" is listed twice"},
      {objectives + "tenants:\n  list:\n  " + tenant_a + ", objectives: [chat]}\n",
       "r.yaml: tenants.list[0].defaultObjective: required when objectives limits the tenant"},
      {objectives + "tenants:\n  list:\n  " + tenant_a + ", defaultObjective: gold}\n",
       "r.yaml: tenants.list[0].defaultObjective: no objective named \"gold\" in objectives"},
      {objectives + "tenants:\n  list:\n  " + tenant_a +
           ", objectives: [chat], defaultObjective: bulk}\n",
       "r.yaml: tenants.list[0].defaultObjective: \"bulk\" is not in the tenant's objectives"},
      {"objectives: {name: chat}\n", "r.yaml: objectives: expected a list of {name, priority}"},
      {"objectives: [chat]\n", "r.yaml: objectives[0]: expected a mapping"},
      {"objectives: [{name: chat, prio: 1}]\n",
       "r.yaml: objectives[0]: unknown key \"prio\" (expected name, priority)"},
      {"objectives: [{priority: 1}]\n",
       "r.yaml: objectives[0].name: expected 1 to 253 characters of [A-Za-z0-9._-]"},
      {"objectives: [{name: chat, priority: 3000000000}]\n",
       "r.yaml: objectives[0].priority: expected a 32-bit integer"},
      {"objectives: [{name: chat, priority: high}]\n",
       "r.yaml: objectives[0].priority: expected a 32-bit integer"},
      {"objectives: [{name: chat}, {name: bulk}, {name: chat, priority: 2}]\n",
       "r.yaml: objectives[2].name: \"chat\" is also objectives[0]'s name"},
  };
  for (const ErrorCase& c : cases) {
    auto parsed = Parse(c.yaml);
    ASSERT_FALSE(parsed.ok()) << c.yaml;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << c.yaml;
    EXPECT_EQ(parsed.status().message(), c.message) << c.yaml;
  }
}

TEST(TenantsConfigTest, NullValuesReadAsAbsent) {
  auto c = Parse("tenants:\nobjectives:\n");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->tenants.empty());
  auto d = Parse("tenants:\n  list:\n  - {id: a, apiKeys: [" + Key('1') +
                 "], weight: ~, limits: {maxQueued: ~}}\n");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_DOUBLE_EQ(d->tenants[0].weight, 1);
  EXPECT_EQ(d->tenants[0].limits.max_queued, 0);
}

}  // namespace
}  // namespace switchyard::router::flow
