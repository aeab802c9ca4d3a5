// Prefill/decode scheduling: the pd deciders and the disagg-profile-handler's config.
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "router/router_config.h"
#include "router/scheduling/pd_deciders.h"
#include "router/scheduling/picker_config.h"

namespace switchyard::router {
namespace {

Endpoint Named(std::string name, std::string role) {
  Endpoint e;
  e.name = name;
  e.address = name;
  e.labels[kRoleLabel] = role;
  return e;
}

// A 100-token prompt of which the decode endpoint "d" holds `cached`.
struct Prompt {
  explicit Prompt(int64_t cached) : tokens(100, 7) {
    request.prompt_tokens = tokens;
    cycle.prefix_match = PrefixMatch{100, {{"d", cached}}};
  }
  std::vector<int32_t> tokens;
  SchedulingRequest request;
  CycleState cycle;
};

TEST(PdDecidersTest, PrefixBasedDisaggregatesWhenEnoughOfThePromptIsNotCached) {
  const Endpoint d = Named("d", "decode");
  const PrefixBasedPdDecider decider(/*non_cached_tokens=*/16, /*prompt_tokens=*/0);
  EXPECT_TRUE(decider.Disaggregate(Prompt(0).request, Prompt(0).cycle, d));
  Prompt p84(84);  // 16 not cached: just enough
  EXPECT_TRUE(decider.Disaggregate(p84.request, p84.cycle, d));
  Prompt p85(85);
  EXPECT_FALSE(decider.Disaggregate(p85.request, p85.cycle, d));
  // What another endpoint holds does not count.
  Prompt other(100);
  EXPECT_TRUE(decider.Disaggregate(other.request, other.cycle, Named("x", "decode")));
  // No prefix scorer ran: nothing is known cached.
  Prompt unscored(100);
  unscored.cycle.prefix_match.reset();
  EXPECT_TRUE(decider.Disaggregate(unscored.request, unscored.cycle, d));
}

TEST(PdDecidersTest, PrefixBasedHonoursItsThresholds) {
  const Endpoint d = Named("d", "decode");
  Prompt p(0);
  // nonCachedTokens 0 (llm-d's default) never disaggregates.
  EXPECT_FALSE(PrefixBasedPdDecider(0, 0).Disaggregate(p.request, p.cycle, d));
  // A prompt shorter than promptTokens stays on the decode endpoint.
  EXPECT_FALSE(PrefixBasedPdDecider(16, 101).Disaggregate(p.request, p.cycle, d));
  EXPECT_TRUE(PrefixBasedPdDecider(16, 100).Disaggregate(p.request, p.cycle, d));
  // More uncached tokens asked for than the prompt has.
  EXPECT_FALSE(PrefixBasedPdDecider(101, 0).Disaggregate(p.request, p.cycle, d));
}

TEST(PdDecidersTest, AlwaysDisaggregates) {
  Prompt p(100);
  EXPECT_TRUE(AlwaysDisaggPdDecider().Disaggregate(p.request, p.cycle, Named("d", "decode")));
}

constexpr char kPdConfig[] = R"(
apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: queue-scorer
- type: prefill-filter
- type: decode-filter
- type: prefix-based-pd-decider
  parameters: {nonCachedTokens: 16}
- type: disagg-profile-handler
  parameters: {deciders: {prefill: prefix-based-pd-decider}}
schedulingProfiles:
- name: prefill
  plugins: [{pluginRef: prefill-filter}, {pluginRef: queue-scorer}]
- name: decode
  plugins: [{pluginRef: decode-filter}, {pluginRef: queue-scorer}]
)";

TEST(DisaggProfileHandlerTest, RunsTheDecodeProfileFirstAndThePrefillOneByTheDecider) {
  auto set = PluginSet::FromYaml(kPdConfig, "t");
  ASSERT_TRUE(set.ok()) << set.status();
  const std::optional<DisaggProfiles>& disagg = (*set)->disagg();
  ASSERT_TRUE(disagg.has_value());
  EXPECT_EQ(disagg->decode, (*set)->profile("decode"));
  EXPECT_EQ(disagg->prefill, (*set)->profile("prefill"));
  EXPECT_EQ((*set)->primary_profile(), disagg->decode);
  ASSERT_NE(disagg->decider, nullptr);

  std::vector<Endpoint> eps = {Named("p", "prefill"), Named("d", "decode")};
  const Candidates all = {&eps[0], &eps[1]};
  std::mt19937_64 rng(1);
  Prompt cold(0);
  ProfileResult decode = disagg->decode->Run(cold.request, cold.cycle, all, rng);
  ASSERT_EQ(decode.picked.size(), 1u);
  EXPECT_EQ(decode.picked[0]->name, "d");
  EXPECT_TRUE(disagg->decider->Disaggregate(cold.request, cold.cycle, *decode.picked[0]));
  CycleState prefill_cycle;
  ProfileResult prefill = disagg->prefill->Run(cold.request, prefill_cycle, all, rng);
  ASSERT_EQ(prefill.picked.size(), 1u);
  EXPECT_EQ(prefill.picked[0]->name, "p");
}

TEST(DisaggProfileHandlerTest, NamesItsProfilesAndDecider) {
  auto set = PluginSet::FromYaml(
      "plugins:\n- type: prefill-filter\n- type: decode-filter\n- name: yes\n"
      "  type: always-disagg-pd-decider\n- type: disagg-profile-handler\n"
      "  parameters: {profiles: {decode: d, prefill: p}, deciders: {prefill: yes}}\n"
      "schedulingProfiles:\n- name: p\n  plugins: [{pluginRef: prefill-filter}]\n"
      "- name: d\n  plugins: [{pluginRef: decode-filter}]\n",
      "t");
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ((*set)->disagg()->decode, (*set)->profile("d"));
  EXPECT_EQ((*set)->disagg()->prefill, (*set)->profile("p"));
  // Without the handler the single profile runs, and there is no disaggregation.
  auto single = PluginSet::FromYaml("plugins:\n- type: queue-scorer\n", "t");
  ASSERT_TRUE(single.ok()) << single.status();
  EXPECT_FALSE((*single)->disagg().has_value());
  EXPECT_EQ((*single)->primary_profile(), (*single)->profile("default"));
}

TEST(DisaggProfileHandlerTest, TheConfigOfUpPdBuilds) {
  for (PrefixScoring scoring : {PrefixScoring::kApproximate, PrefixScoring::kPrecise}) {
    auto set = PluginSet::FromYaml(DisaggSchedulingYaml(scoring, 16), "up");
    ASSERT_TRUE(set.ok()) << set.status();
    ASSERT_TRUE((*set)->disagg().has_value());
    EXPECT_EQ((*set)->disagg()->decode->name(), "decode");
    EXPECT_EQ((*set)->disagg()->prefill->name(), "prefill");
    EXPECT_EQ((*set)->precise_index() != nullptr, scoring == PrefixScoring::kPrecise);
    // 16 uncached tokens disaggregate; 15 do not.
    const Endpoint d = Named("d", "decode");
    Prompt p84(84);
    EXPECT_TRUE((*set)->disagg()->decider->Disaggregate(p84.request, p84.cycle, d));
    Prompt p85(85);
    EXPECT_FALSE((*set)->disagg()->decider->Disaggregate(p85.request, p85.cycle, d));
  }
}

TEST(DisaggProfileHandlerTest, ConfigErrors) {
  auto expect_error = [](const std::string& yaml, const std::string& needle) {
    auto s = PluginSet::FromYaml(yaml, "t");
    ASSERT_FALSE(s.ok()) << yaml;
    EXPECT_NE(std::string(s.status().message()).find(needle), std::string::npos)
        << s.status().message();
  };
  const std::string profiles =
      "schedulingProfiles:\n- name: prefill\n  plugins: [{pluginRef: prefill-filter}]\n"
      "- name: decode\n  plugins: [{pluginRef: decode-filter}]\n";
  const std::string filters = "plugins:\n- type: prefill-filter\n- type: decode-filter\n";
  // Two profiles without the handler: refused.
  expect_error(filters + profiles,
               "schedulingProfiles has 2 profiles; the router runs exactly one");
  expect_error(filters + "- type: disagg-profile-handler\n" + profiles,
               "deciders.prefill must name a pd decider plugin");
  expect_error(filters +
                   "- type: disagg-profile-handler\n  parameters: {deciders: {prefill: "
                   "decode-filter}}\n" +
                   profiles,
               "deciders.prefill 'decode-filter' is not a pd decider");
  expect_error(filters +
                   "- type: always-disagg-pd-decider\n- type: disagg-profile-handler\n"
                   "  parameters: {deciders: {prefill: always-disagg-pd-decider}}\n"
                   "schedulingProfiles:\n- name: decode\n  plugins: [{pluginRef: decode-filter}]\n",
               "no scheduling profile named 'prefill'");
  expect_error(filters +
                   "- type: always-disagg-pd-decider\n- type: disagg-profile-handler\n"
                   "  parameters: {profiles: {prefill: decode}, deciders: {prefill: "
                   "always-disagg-pd-decider}}\n" +
                   profiles,
               "the decode and prefill profiles must differ");
  expect_error(filters +
                   "- type: always-disagg-pd-decider\n- type: disagg-profile-handler\n"
                   "  parameters: {deciders: {prefill: always-disagg-pd-decider}}\n"
                   "- name: again\n  type: disagg-profile-handler\n"
                   "  parameters: {deciders: {prefill: always-disagg-pd-decider}}\n" +
                   profiles,
               "more than one disagg-profile-handler");
  expect_error("plugins:\n- type: prefix-based-pd-decider\n  parameters: {nonCachedTokens: -1}\n",
               "nonCachedTokens and promptTokens must be >= 0");
}

}  // namespace
}  // namespace switchyard::router
