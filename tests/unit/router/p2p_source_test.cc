// p2p-source-producer: which peer it names as the picked endpoint's KV source, and its config.
#include "router/scheduling/p2p_source.h"

#include <optional>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "router/router_config.h"
#include "router/scheduling/picker_config.h"

namespace switchyard::router {
namespace {

// An endpoint at `address`, named after it; `kv_port` sets its kKvPortLabel.
Endpoint At(std::string address, std::optional<std::string> kv_port = std::nullopt) {
  Endpoint e;
  e.name = address;
  e.address = std::move(address);
  if (kv_port.has_value())
    e.labels[kKvPortLabel] = *kv_port;
  return e;
}

// A cycle whose prefix-cache scorer predicted `cached` (endpoint name, tokens, all in the
// pool) of 1000 tokens.
CycleState Predicted(const std::vector<std::pair<std::string, int64_t>>& cached) {
  CycleState cycle;
  PrefixMatch& match = cycle.prefix_match.emplace();
  match.prompt_tokens = 1000;
  for (const auto& [name, tokens] : cached)
    match.cached.push_back({name, tokens, tokens});
  return cycle;
}

TEST(P2pSourceTest, TheLargestHolderPastTheThresholdIsTheSource) {
  const std::vector<Endpoint> eps = {At("10.0.0.1:8000", "9001"), At("10.0.0.2:8000", "9002"),
                                     At("10.0.0.3:8000", "9003")};
  const P2pSourceProducer producer(/*min_extra_tokens=*/100, std::nullopt);
  const CycleState cycle =
      Predicted({{"10.0.0.1:8000", 50}, {"10.0.0.2:8000", 400}, {"10.0.0.3:8000", 600}});
  EXPECT_EQ(producer.Source(cycle, eps, eps[0]), "10.0.0.3:9003");
  EXPECT_EQ(producer.Source(cycle, eps, eps[1]), "10.0.0.3:9003");
  // The largest holder picked: it is not its own source, and nobody holds 100 more than it.
  EXPECT_EQ(producer.Source(cycle, eps, eps[2]), std::nullopt);
}

TEST(P2pSourceTest, BelowTheThresholdThereIsNoSource) {
  const std::vector<Endpoint> eps = {At("10.0.0.1:8000", "9001"), At("10.0.0.2:8000", "9002")};
  const P2pSourceProducer producer(/*min_extra_tokens=*/100, std::nullopt);
  // Exactly minExtraTokens more: a source; one fewer: none.
  EXPECT_EQ(
      producer.Source(Predicted({{"10.0.0.1:8000", 200}, {"10.0.0.2:8000", 300}}), eps, eps[0]),
      "10.0.0.2:9002");
  EXPECT_EQ(
      producer.Source(Predicted({{"10.0.0.1:8000", 201}, {"10.0.0.2:8000", 300}}), eps, eps[0]),
      std::nullopt);
  // The pick holding more than everyone: none.
  EXPECT_EQ(
      producer.Source(Predicted({{"10.0.0.1:8000", 900}, {"10.0.0.2:8000", 300}}), eps, eps[0]),
      std::nullopt);
  // Nothing predicted (no prefix-cache-scorer in the profile): none.
  EXPECT_EQ(producer.Source(CycleState(), eps, eps[0]), std::nullopt);
}

TEST(P2pSourceTest, OnlyWhatAPeersPoolHoldsCountsForItButThePickCountsItsTiers) {
  const std::vector<Endpoint> eps = {At("10.0.0.1:8000", "9001"), At("10.0.0.2:8000", "9002"),
                                     At("10.0.0.3:8000", "9003")};
  const P2pSourceProducer producer(/*min_extra_tokens=*/100, std::nullopt);
  CycleState cycle;
  PrefixMatch& match = cycle.prefix_match.emplace();
  match.prompt_tokens = 1000;
  // .2 holds the most, but most of it in its host tier, which it does not lend.
  match.cached = {
      {"10.0.0.1:8000", 300, 0}, {"10.0.0.2:8000", 900, 200}, {"10.0.0.3:8000", 500, 500}};
  EXPECT_EQ(producer.Source(cycle, eps, eps[0]), "10.0.0.3:9003");
  // The pick's own tiers count: .1 holds 300 (loaded from its tier), .3 lends 500, not 100 more.
  match.cached[0].tokens = 450;
  EXPECT_EQ(producer.Source(cycle, eps, eps[0]), std::nullopt);
}

TEST(P2pSourceTest, AnEndpointWithoutAKvPortIsSkipped) {
  // The largest holder has no port (no label, no kvPort), or a label that is not a port: the
  // next largest with one is the source.
  for (const std::optional<std::string>& label :
       std::vector<std::optional<std::string>>{std::nullopt, "abc", "0", "65536", "-1", ""}) {
    const std::vector<Endpoint> eps = {At("10.0.0.1:8000", "9001"), At("10.0.0.2:8000", label),
                                       At("10.0.0.3:8000", "9003")};
    const CycleState cycle =
        Predicted({{"10.0.0.1:8000", 0}, {"10.0.0.2:8000", 900}, {"10.0.0.3:8000", 500}});
    EXPECT_EQ(P2pSourceProducer(100, std::nullopt).Source(cycle, eps, eps[0]), "10.0.0.3:9003")
        << label.value_or("(none)");
  }
}

TEST(P2pSourceTest, KvPortIsEveryonesUnlessALabelOverridesIt) {
  const std::vector<Endpoint> eps = {At("10.0.0.1:8000"), At("10.0.0.2:8000"),
                                     At("10.0.0.3:8000", "7000"), At("10.0.0.4:8000", "abc")};
  const P2pSourceProducer producer(100, uint16_t{14579});
  EXPECT_EQ(producer.Source(Predicted({{"10.0.0.2:8000", 500}}), eps, eps[0]), "10.0.0.2:14579");
  EXPECT_EQ(producer.Source(Predicted({{"10.0.0.3:8000", 500}}), eps, eps[0]), "10.0.0.3:7000");
  // A label that is not a port is no port, not kvPort.
  EXPECT_EQ(producer.Source(Predicted({{"10.0.0.4:8000", 500}}), eps, eps[0]), std::nullopt);
}

TEST(P2pSourceTest, OnlyEndpointsOfTheSnapshotAreSources) {
  // The scorer saw an endpoint that is not in the snapshot (gone since): not a source.
  const std::vector<Endpoint> eps = {At("10.0.0.1:8000", "9001"), At("10.0.0.2:8000", "9002")};
  const P2pSourceProducer producer(100, std::nullopt);
  EXPECT_EQ(
      producer.Source(Predicted({{"10.0.0.9:8000", 900}, {"10.0.0.2:8000", 300}}), eps, eps[0]),
      "10.0.0.2:9002");
  EXPECT_EQ(producer.Source(Predicted({{"10.0.0.9:8000", 900}}), eps, eps[0]), std::nullopt);
}

TEST(P2pSourceTest, TheHostIsKeptAsWrittenIPv6InBrackets) {
  const std::vector<Endpoint> eps = {At("[::1]:8000", "9001"), At("[fd00::2]:8000", "9002"),
                                     At("engine-2.pool.svc:8000", "9003"), At("no-port", "9004")};
  const P2pSourceProducer producer(100, std::nullopt);
  EXPECT_EQ(producer.Source(Predicted({{"[fd00::2]:8000", 500}}), eps, eps[0]), "[fd00::2]:9002");
  EXPECT_EQ(producer.Source(Predicted({{"[::1]:8000", 500}}), eps, eps[2]), "[::1]:9001");
  EXPECT_EQ(producer.Source(Predicted({{"engine-2.pool.svc:8000", 500}}), eps, eps[0]),
            "engine-2.pool.svc:9003");
  // An address that is not host:port names no host to pull from.
  EXPECT_EQ(producer.Source(Predicted({{"no-port", 500}}), eps, eps[0]), std::nullopt);
}

// A profile of prefix-cache-scorer, queue-scorer and `producer` (YAML of the plugin entry).
std::string ProfileWith(const std::string& producer, const std::string& ref) {
  return "plugins:\n- type: prefix-cache-scorer\n- type: queue-scorer\n" + producer +
         "schedulingProfiles:\n- name: default\n  plugins:\n"
         "  - {pluginRef: prefix-cache-scorer}\n  - {pluginRef: queue-scorer}\n" +
         ref;
}

TEST(P2pSourceConfigTest, DefaultsAndParameters) {
  // Defaults: minExtraTokens 256, no kvPort (only labelled endpoints are sources).
  auto set = PluginSet::FromYaml(
      ProfileWith("- type: p2p-source-producer\n", "  - {pluginRef: p2p-source-producer}\n"), "t");
  ASSERT_TRUE(set.ok()) << set.status();
  const P2pSourceProducer* producer = (*set)->primary_profile()->p2p_source();
  ASSERT_NE(producer, nullptr);
  const std::vector<Endpoint> eps = {At("10.0.0.1:8000", "9001"), At("10.0.0.2:8000", "9002"),
                                     At("10.0.0.3:8000")};
  EXPECT_EQ(producer->Source(Predicted({{"10.0.0.2:8000", 256}}), eps, eps[0]), "10.0.0.2:9002");
  EXPECT_EQ(producer->Source(Predicted({{"10.0.0.2:8000", 255}}), eps, eps[0]), std::nullopt);
  EXPECT_EQ(producer->Source(Predicted({{"10.0.0.3:8000", 900}}), eps, eps[0]), std::nullopt);

  set = PluginSet::FromYaml(ProfileWith("- name: p2p\n  type: p2p-source-producer\n"
                                        "  parameters: {minExtraTokens: 16, kvPort: 14579}\n",
                                        "  - {pluginRef: p2p}\n"),
                            "t");
  ASSERT_TRUE(set.ok()) << set.status();
  producer = (*set)->primary_profile()->p2p_source();
  ASSERT_NE(producer, nullptr);
  EXPECT_EQ(producer->Source(Predicted({{"10.0.0.3:8000", 16}}), eps, eps[0]), "10.0.0.3:14579");
  EXPECT_EQ(producer->Source(Predicted({{"10.0.0.3:8000", 15}}), eps, eps[0]), std::nullopt);

  // A profile that does not reference it has none.
  set = PluginSet::FromYaml(ProfileWith("- type: p2p-source-producer\n", ""), "t");
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ((*set)->primary_profile()->p2p_source(), nullptr);
}

TEST(P2pSourceConfigTest, Errors) {
  auto expect_error = [](const std::string& yaml, const std::string& needle) {
    auto s = PluginSet::FromYaml(yaml, "t");
    ASSERT_FALSE(s.ok()) << yaml;
    EXPECT_NE(std::string(s.status().message()).find(needle), std::string::npos)
        << s.status().message();
  };
  const std::string ref = "  - {pluginRef: p2p-source-producer}\n";
  for (const std::string bad : {"0", "-5"}) {
    expect_error(
        ProfileWith("- type: p2p-source-producer\n  parameters: {minExtraTokens: " + bad + "}\n",
                    ref),
        "t: plugins[2]: minExtraTokens must be >= 1");
  }
  for (const std::string bad : {"0", "65536", "-1"}) {
    expect_error(
        ProfileWith("- type: p2p-source-producer\n  parameters: {kvPort: " + bad + "}\n", ref),
        "t: plugins[2]: kvPort must be in 1..65535");
  }
  expect_error(ProfileWith("- type: p2p-source-producer\n  parameters: {kvPort: abc}\n", ref),
               "kvPort");
  expect_error(
      ProfileWith("- type: p2p-source-producer\n  parameters: {minExtraTokens: [1]}\n", ref),
      "minExtraTokens");
  // A weight: it is not a scorer.
  expect_error(ProfileWith("- type: p2p-source-producer\n",
                           "  - {pluginRef: p2p-source-producer, weight: 2}\n"),
               "gives a weight to plugin 'p2p-source-producer' (p2p-source-producer), which is "
               "not a scorer");
  // Two in one profile.
  expect_error(ProfileWith("- type: p2p-source-producer\n- name: again\n"
                           "  type: p2p-source-producer\n",
                           ref + "  - {pluginRef: again}\n"),
               "profile 'default' has more than one p2p-source-producer");
  // Under a disagg-profile-handler, only the decode profile's pick is the request's endpoint.
  expect_error(
      "plugins:\n- type: prefill-filter\n- type: decode-filter\n- type: p2p-source-producer\n"
      "- type: always-disagg-pd-decider\n- type: disagg-profile-handler\n"
      "  parameters: {deciders: {prefill: always-disagg-pd-decider}}\n"
      "schedulingProfiles:\n- name: prefill\n"
      "  plugins: [{pluginRef: prefill-filter}, {pluginRef: p2p-source-producer}]\n"
      "- name: decode\n  plugins: [{pluginRef: decode-filter}]\n",
      "the prefill profile 'prefill' has a p2p-source-producer");
}

TEST(P2pSourceConfigTest, TheDefaultConfigTakesTheProducerOnRequest) {
  for (PrefixScoring scoring : {PrefixScoring::kApproximate, PrefixScoring::kPrecise}) {
    auto plain = PluginSet::FromYaml(DefaultSchedulingYaml(scoring), "up");
    ASSERT_TRUE(plain.ok()) << plain.status();
    EXPECT_EQ((*plain)->primary_profile()->p2p_source(), nullptr);
    auto p2p = PluginSet::FromYaml(DefaultSchedulingYaml(scoring, 64), "up");
    ASSERT_TRUE(p2p.ok()) << p2p.status();
    const P2pSourceProducer* producer = (*p2p)->primary_profile()->p2p_source();
    ASSERT_NE(producer, nullptr);
    EXPECT_EQ((*p2p)->precise_index() != nullptr, scoring == PrefixScoring::kPrecise);
    // minExtraTokens 64, and only labelled endpoints are sources.
    const std::vector<Endpoint> eps = {At("127.0.0.1:8001", "9001"), At("127.0.0.1:8002", "9002"),
                                       At("127.0.0.1:8003")};
    EXPECT_EQ(producer->Source(Predicted({{"127.0.0.1:8002", 64}}), eps, eps[0]), "127.0.0.1:9002");
    EXPECT_EQ(producer->Source(Predicted({{"127.0.0.1:8002", 63}}), eps, eps[0]), std::nullopt);
    EXPECT_EQ(producer->Source(Predicted({{"127.0.0.1:8003", 900}}), eps, eps[0]), std::nullopt);
  }
}

}  // namespace
}  // namespace switchyard::router
