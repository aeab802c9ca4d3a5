#include <algorithm>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "fmt/format.h"
#include "gtest/gtest.h"

#include "router/scheduling/label_filters.h"
#include "router/scheduling/load_scorers.h"
#include "router/scheduling/picker_config.h"
#include "router/scheduling/pickers.h"

namespace switchyard::router {
namespace {

Endpoint MakeEndpoint(std::string name, int64_t waiting, double kv, std::string role = "") {
  Endpoint e;
  e.name = name;
  e.address = name;
  e.metrics.waiting_requests = waiting;
  e.metrics.kv_cache_usage = kv;
  if (!role.empty())
    e.labels[kRoleLabel] = role;
  return e;
}

Candidates Ptrs(const std::vector<Endpoint>& endpoints) {
  Candidates out;
  for (const Endpoint& e : endpoints)
    out.push_back(&e);
  return out;
}

TEST(LoadScorersTest, QueueScorerIsMinMaxOverTheCandidates) {
  CycleState cycle;
  std::vector<Endpoint> eps = {MakeEndpoint("a", 0, 0), MakeEndpoint("b", 5, 0),
                               MakeEndpoint("c", 10, 0)};
  std::vector<double> scores(3);
  QueueScorer().Score({}, cycle, Ptrs(eps), scores);
  EXPECT_DOUBLE_EQ(scores[0], 1.0);
  EXPECT_DOUBLE_EQ(scores[1], 0.5);
  EXPECT_DOUBLE_EQ(scores[2], 0.0);

  std::vector<Endpoint> equal = {MakeEndpoint("a", 3, 0), MakeEndpoint("b", 3, 0)};
  std::vector<double> s2(2);
  QueueScorer().Score({}, cycle, Ptrs(equal), s2);
  EXPECT_EQ(s2, (std::vector<double>{1.0, 1.0}));
}

TEST(LoadScorersTest, StaleMetricsScoreZero) {
  CycleState cycle;
  std::vector<Endpoint> eps = {MakeEndpoint("a", 0, 0.2), MakeEndpoint("b", 0, 0.2)};
  eps[1].metrics.fresh = false;
  std::vector<double> scores(2);
  KvCacheUtilizationScorer().Score({}, cycle, Ptrs(eps), scores);
  EXPECT_DOUBLE_EQ(scores[0], 0.8);
  EXPECT_DOUBLE_EQ(scores[1], 0.0);
  QueueScorer().Score({}, cycle, Ptrs(eps), scores);
  EXPECT_DOUBLE_EQ(scores[0], 1.0);
  EXPECT_DOUBLE_EQ(scores[1], 0.0);
}

TEST(LoadScorersTest, ActiveRequestScorer) {
  CycleState cycle;
  std::vector<Endpoint> eps = {MakeEndpoint("a", 0, 0), MakeEndpoint("b", 0, 0),
                               MakeEndpoint("c", 0, 0)};
  eps[1].load = std::make_shared<EndpointLoad>(1);
  eps[2].load = std::make_shared<EndpointLoad>(3);
  std::vector<double> scores(3);
  ActiveRequestScorer().Score({}, cycle, Ptrs(eps), scores);
  EXPECT_DOUBLE_EQ(scores[0], 1.0);
  EXPECT_DOUBLE_EQ(scores[1], 0.75);
  EXPECT_DOUBLE_EQ(scores[2], 0.25);
}

TEST(LabelFiltersTest, RoleFiltersFollowLlmD) {
  CycleState cycle;
  std::vector<Endpoint> eps = {MakeEndpoint("p", 0, 0, "prefill"),
                               MakeEndpoint("d", 0, 0, "decode"),
                               MakeEndpoint("both", 0, 0, "both"), MakeEndpoint("none", 0, 0)};
  auto names = [](const Candidates& c) {
    std::vector<std::string> out;
    for (const Endpoint* e : c)
      out.push_back(e->name);
    return out;
  };
  EXPECT_EQ(names(RoleFilter::Decode().Apply({}, cycle, Ptrs(eps))),
            (std::vector<std::string>{"d", "both", "none"}));
  EXPECT_EQ(names(RoleFilter::Prefill().Apply({}, cycle, Ptrs(eps))),
            (std::vector<std::string>{"p", "both"}));
}

TEST(LabelFiltersTest, SelectorExpressions) {
  CycleState cycle;
  std::vector<Endpoint> eps = {MakeEndpoint("a", 0, 0), MakeEndpoint("b", 0, 0),
                               MakeEndpoint("c", 0, 0)};
  eps[0].labels["hw"] = "h100";
  eps[1].labels["hw"] = "cpu";
  LabelSelector sel;
  sel.match_expressions.push_back({"hw", LabelExpression::Op::kNotIn, {"cpu"}});
  Candidates kept = LabelSelectorFilter(sel).Apply({}, cycle, Ptrs(eps));
  ASSERT_EQ(kept.size(), 2u);  // NotIn keeps the unlabeled one
  EXPECT_EQ(kept[0]->name, "a");
  EXPECT_EQ(kept[1]->name, "c");
  LabelSelector exists;
  exists.match_expressions.push_back({"hw", LabelExpression::Op::kExists, {}});
  EXPECT_EQ(LabelSelectorFilter(exists).Apply({}, cycle, Ptrs(eps)).size(), 2u);
}

TEST(PickersTest, MaxScoreBreaksTiesAtRandom) {
  CycleState cycle;
  std::vector<Endpoint> eps = {MakeEndpoint("a", 0, 0), MakeEndpoint("b", 0, 0),
                               MakeEndpoint("c", 0, 0)};
  std::vector<double> scores = {1.0, 1.0, 0.5};
  std::mt19937_64 rng(7);
  int picked_a = 0;
  for (int i = 0; i < 200; ++i) {
    Candidates c = MaxScorePicker().Pick(cycle, Ptrs(eps), scores, rng);
    ASSERT_EQ(c.size(), 1u);
    ASSERT_NE(c[0]->name, "c");
    picked_a += c[0]->name == "a";
  }
  EXPECT_GT(picked_a, 50);
  EXPECT_LT(picked_a, 150);
  Candidates two = MaxScorePicker(2).Pick(cycle, Ptrs(eps), scores, rng);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_NE(two[0]->name, "c");
  EXPECT_NE(two[1]->name, "c");
}

TEST(PickersTest, MaxScoreSpreadsAThreeWayTieEvenlyAndFindsALoneMaxAnywhere) {
  CycleState cycle;
  std::vector<Endpoint> eps = {MakeEndpoint("a", 0, 0), MakeEndpoint("b", 0, 0),
                               MakeEndpoint("c", 0, 0), MakeEndpoint("d", 0, 0)};
  std::mt19937_64 rng(11);
  std::map<std::string, int> picks;
  for (int i = 0; i < 3000; ++i)
    ++picks[MaxScorePicker()
                .Pick(cycle, Ptrs(eps), std::vector<double>{0.7, 0.2, 0.7, 0.7}, rng)
                .at(0)
                ->name];
  EXPECT_EQ(picks.count("b"), 0u);
  for (const char* name : {"a", "c", "d"})
    EXPECT_NEAR(picks[name], 1000, 150) << name;
  for (size_t best = 0; best < eps.size(); ++best) {
    std::vector<double> scores(eps.size(), 0.1);
    scores[best] = 0.9;
    EXPECT_EQ(MaxScorePicker().Pick(cycle, Ptrs(eps), scores, rng).at(0), &eps[best]);
  }
  EXPECT_TRUE(MaxScorePicker().Pick(cycle, {}, {}, rng).empty());
}

TEST(PickersTest, WeightedRandomFollowsTheWeights) {
  CycleState cycle;
  std::vector<Endpoint> eps = {MakeEndpoint("a", 0, 0), MakeEndpoint("b", 0, 0),
                               MakeEndpoint("zero", 0, 0)};
  std::vector<double> scores = {3.0, 1.0, 0.0};
  std::mt19937_64 rng(11);
  int a = 0;
  for (int i = 0; i < 4000; ++i) {
    Candidates c = WeightedRandomPicker().Pick(cycle, Ptrs(eps), scores, rng);
    ASSERT_NE(c[0]->name, "zero");
    a += c[0]->name == "a";
  }
  EXPECT_NEAR(a / 4000.0, 0.75, 0.04);
}

TEST(PickersTest, RandomPicksUniformlyAndDistinct) {
  CycleState cycle;
  std::vector<Endpoint> eps = {MakeEndpoint("a", 0, 0), MakeEndpoint("b", 0, 0),
                               MakeEndpoint("c", 0, 0)};
  std::vector<double> scores = {0.0, 5.0, 1.0};
  std::mt19937_64 rng(11);
  std::map<std::string, int> first;
  for (int i = 0; i < 3000; ++i) {
    Candidates c = RandomPicker(2).Pick(cycle, Ptrs(eps), scores, rng);
    ASSERT_EQ(c.size(), 2u);
    ASSERT_NE(c[0], c[1]);
    ++first[c[0]->name];
  }
  ASSERT_EQ(first.size(), 3u);
  for (const auto& [name, n] : first)
    EXPECT_NEAR(n / 3000.0, 1.0 / 3, 0.04) << name;
  EXPECT_EQ(RandomPicker(5).Pick(cycle, Ptrs(eps), scores, rng).size(), 3u);
}

TEST(PickersTest, RoundRobinCyclesThroughTheCandidatesIgnoringScores) {
  CycleState cycle;
  std::vector<Endpoint> eps = {MakeEndpoint("a", 0, 0), MakeEndpoint("b", 0, 0),
                               MakeEndpoint("c", 0, 0)};
  std::vector<double> scores = {0.0, 5.0, 1.0};
  std::mt19937_64 rng(3);
  RoundRobinPicker picker;
  std::vector<std::string> seen;
  for (int i = 0; i < 6; ++i) {
    Candidates c = picker.Pick(cycle, Ptrs(eps), scores, rng);
    ASSERT_EQ(c.size(), 1u);
    seen.push_back(c[0]->name);
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"a", "b", "c", "a", "b", "c"}));
  // Two per pick: the target and the next one as fallback, wrapping at the end.
  RoundRobinPicker two(2);
  two.Pick(cycle, Ptrs(eps), scores, rng);
  two.Pick(cycle, Ptrs(eps), scores, rng);
  Candidates c = two.Pick(cycle, Ptrs(eps), scores, rng);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0]->name, "c");
  EXPECT_EQ(c[1]->name, "a");
  // The config name maps to it.
  auto set = PluginSet::FromYaml("plugins:\n- type: round-robin-picker\n", "t");
  ASSERT_TRUE(set.ok()) << set.status();
  const SchedulingProfile* profile = (*set)->profile("default");
  ASSERT_NE(profile, nullptr);
  std::vector<std::string> names;
  for (int i = 0; i < 3; ++i)
    names.push_back(profile->Run({}, cycle, Ptrs(eps), rng).picked.at(0)->name);
  EXPECT_EQ(names, (std::vector<std::string>{"a", "b", "c"}));
}

// Writes fixed scores, whatever the candidates.
class FixedScorer : public Scorer {
 public:
  explicit FixedScorer(std::vector<double> scores) : scores_(std::move(scores)) {}
  void Score(const SchedulingRequest&, CycleState&, const Candidates&,
             std::span<double> scores) override {
    std::copy(scores_.begin(), scores_.end(), scores.begin());
  }

 private:
  std::vector<double> scores_;
};

TEST(SchedulingProfileTest, ClampsScoresToZeroOneAndCountsNanAsZero) {
  CycleState cycle;
  std::vector<Endpoint> eps = {MakeEndpoint("neg", 0, 0),  MakeEndpoint("big", 0, 0),
                               MakeEndpoint("nan", 0, 0),  MakeEndpoint("mid", 0, 0),
                               MakeEndpoint("-inf", 0, 0), MakeEndpoint("+inf", 0, 0)};
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  FixedScorer broken({-3.0, 2.5, nan, 0.4, -inf, inf});
  FixedScorer flat({0.5, 0.5, 0.5, 0.5, 0.5, 0.5});
  MaxScorePicker picker;
  SchedulingProfile profile("p", {}, {{"broken", &broken, 2.0}, {"flat", &flat, 1.0}}, &picker);
  std::mt19937_64 rng(5);
  ProfileResult r = profile.Run({}, cycle, Ptrs(eps), rng);
  const std::vector<double> want = {0.5, 2.5, 0.5, 1.3, 0.5, 2.5};
  ASSERT_EQ(r.totals.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_DOUBLE_EQ(r.totals[i], want[i]) << eps[i].name;
  // 2.5 and +inf clamp to 1 and tie at the top; NaN does not poison the sum.
  for (int i = 0; i < 20; ++i) {
    const std::string picked = profile.Run({}, cycle, Ptrs(eps), rng).picked.at(0)->name;
    EXPECT_TRUE(picked == "big" || picked == "+inf") << picked;
  }
  // One scorer alone: each total is exactly weight x clamped score.
  FixedScorer in_range({-3.0, 2.5, nan, 0.4, -inf, 0.9});
  SchedulingProfile one("one", {}, {{"in_range", &in_range, 2.0}}, &picker);
  ProfileResult r1 = one.Run({}, cycle, Ptrs(eps), rng);
  const std::vector<double> want1 = {0.0, 2.0, 0.0, 0.8, 0.0, 1.8};
  ASSERT_EQ(r1.totals.size(), want1.size());
  for (size_t i = 0; i < want1.size(); ++i)
    EXPECT_DOUBLE_EQ(r1.totals[i], want1[i]) << eps[i].name;
  EXPECT_EQ(r1.picked.at(0)->name, "big");
}

constexpr char kConfig[] = R"(
apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: queue-scorer
- type: kv-cache-utilization-scorer
- type: decode-filter
- name: picker
  type: max-score-picker
schedulingProfiles:
- name: decode
  plugins:
  - pluginRef: decode-filter
  - pluginRef: queue-scorer
    weight: 2
  - pluginRef: kv-cache-utilization-scorer
  - pluginRef: picker
)";

TEST(PickerConfigTest, ProfileFiltersScoresAndPicks) {
  CycleState cycle;
  auto set = PluginSet::FromYaml(kConfig, "test");
  ASSERT_TRUE(set.ok()) << set.status();
  const SchedulingProfile* decode = (*set)->profile("decode");
  ASSERT_NE(decode, nullptr);
  std::vector<Endpoint> eps = {MakeEndpoint("p", 0, 0.0, "prefill"),
                               MakeEndpoint("busy", 10, 0.0, "decode"),
                               MakeEndpoint("idle", 0, 0.5, "decode")};
  std::mt19937_64 rng(1);
  ProfileResult r = decode->Run({}, cycle, Ptrs(eps), rng);
  ASSERT_EQ(r.picked.size(), 1u);
  EXPECT_EQ(r.picked[0]->name, "idle");
  ASSERT_EQ(r.totals.size(), 2u);
  EXPECT_DOUBLE_EQ(r.totals[0], 0 * 2 + 1.0);    // busy: queue 0, kv 1
  EXPECT_DOUBLE_EQ(r.totals[1], 1.0 * 2 + 0.5);  // idle
}

TEST(PickerConfigTest, DefaultsAndErrors) {
  auto set = PluginSet::FromYaml("plugins:\n- type: queue-scorer\n", "t");
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_NE((*set)->profile("default"), nullptr);

  auto expect_error = [](std::string yaml, std::string needle) {
    auto s = PluginSet::FromYaml(yaml, "t");
    ASSERT_FALSE(s.ok()) << yaml;
    EXPECT_NE(std::string(s.status().message()).find(needle), std::string::npos)
        << s.status().message();
  };
  expect_error("plugins:\n- type: nope\n", "unknown plugin type 'nope'");
  expect_error("plugins:\n- type: queue-scorer\n- type: queue-scorer\n", "duplicate plugin name");
  expect_error(
      "plugins:\n- type: queue-scorer\nschedulingProfiles:\n- name: x\n  plugins:\n"
      "  - pluginRef: missing\n",
      "no plugin named 'missing'");
  expect_error("plugins:\n- type: max-score-picker\n  parameters: {maxNumOfEndpoints: 0}\n",
               "maxNumOfEndpoints");
  expect_error("kind: Other\nplugins:\n- type: queue-scorer\n", "kind must be");
  expect_error("plugins: [\n", "t");
  expect_error("plugins:\n- type: queue-scorer\n  parameters: 3\n", "parameters must be a map");
  expect_error("plugins: 7\n", "plugins must be a non-empty list");
  expect_error("plugins:\n- type: label-selector-filter\n  parameters:\n    matchLabels: [a]\n",
               "matchLabels must be a map");
  // Two profiles need a profile handler, which the router does not have: not silently the
  // first one.
  expect_error(
      "plugins:\n- type: queue-scorer\n- type: prefill-filter\n- type: decode-filter\n"
      "schedulingProfiles:\n- name: prefill\n  plugins: [{pluginRef: prefill-filter}, "
      "{pluginRef: queue-scorer}]\n- name: decode\n  plugins: [{pluginRef: decode-filter}, "
      "{pluginRef: queue-scorer}]\n",
      "schedulingProfiles has 2 profiles; the router runs exactly one");
}

TEST(PickerConfigTest, AWeightOnANonScorerIsAnError) {
  auto build = [](const std::string& ref_line) {
    return PluginSet::FromYaml(
        "plugins:\n- type: queue-scorer\n- type: decode-filter\n- name: pick\n"
        "  type: random-picker\nschedulingProfiles:\n- name: decode\n  plugins:\n"
        "  - {pluginRef: queue-scorer, weight: 2}\n" +
            ref_line,
        "t");
  };
  for (const char* ref : {"decode-filter", "pick"}) {
    auto s = build(fmt::format("  - {{pluginRef: {}, weight: 1}}\n", ref));
    ASSERT_FALSE(s.ok()) << ref;
    const std::string message(s.status().message());
    EXPECT_NE(message.find(fmt::format("profile 'decode' gives a weight to plugin '{}'", ref)),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("not a scorer"), std::string::npos) << message;
    EXPECT_NE(message.find("schedulingProfiles[0].plugins[1]"), std::string::npos) << message;
  }
  // Without a weight the same references are fine.
  auto ok = build("  - pluginRef: decode-filter\n  - pluginRef: pick\n");
  EXPECT_TRUE(ok.ok()) << ok.status();
}

TEST(PickerConfigTest, AnEndpointsKvCacheSizeBoundsItsPrefixKeys) {
  // Two precise plugins share one index; its blocks are the smaller size, 16 tokens.
  auto set = PluginSet::FromYaml(
      "plugins:\n"
      "- type: prefix-cache-scorer\n"
      "  parameters: {mode: precise, blockSizeTokens: 64, lruCapacityPerServer: 100}\n"
      "- type: no-hit-lru-scorer\n"
      "  parameters: {mode: precise, blockSizeTokens: 16}\n",
      "t");
  ASSERT_TRUE(set.ok()) << set.status();
  PrefixIndex& index = *(*set)->precise_index();
  std::vector<uint64_t> keys(150);
  for (size_t i = 0; i < keys.size(); ++i)
    keys[i] = i + 1;
  index.Add("a", keys);
  index.Add("b", keys);
  EXPECT_EQ(index.num_keys("a"), 100u);  // lruCapacityPerServer
  // 2 engine blocks of 256 tokens: 512 tokens, 32 blocks of 16.
  (*set)->SetEndpointKvCache("a", 2, 256);
  EXPECT_EQ(index.num_keys("a"), 32u);
  EXPECT_EQ(index.num_keys("b"), 100u);
  index.Add("a", keys);
  EXPECT_EQ(index.num_keys("a"), 32u);
  // Fewer tokens than one block: one block, not "unknown".
  (*set)->SetEndpointKvCache("a", 1, 8);
  EXPECT_EQ(index.num_keys("a"), 1u);
  // Unknown again (an engine that stopped reporting it): the configured default.
  (*set)->SetEndpointKvCache("a", 0, 16);
  index.Add("a", keys);
  EXPECT_EQ(index.num_keys("a"), 100u);
  // Absurd numbers from a broken peer saturate rather than overflow to a small bound.
  (*set)->SetEndpointKvCache("b", std::numeric_limits<int64_t>::max(), 1 << 20);
  index.Add("b", keys);
  EXPECT_EQ(index.num_keys("b"), 150u);
  // A set without prefix plugins has no index to size.
  auto plain = PluginSet::FromYaml("plugins:\n- type: queue-scorer\n", "t");
  ASSERT_TRUE(plain.ok()) << plain.status();
  (*plain)->SetEndpointKvCache("a", 2, 256);
}

}  // namespace
}  // namespace switchyard::router
