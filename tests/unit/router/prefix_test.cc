#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "kvx/kv_events.h"
#include "router/prefix/block_keys.h"
#include "router/prefix/kv_event_indexer.h"
#include "router/prefix/prefix_index.h"
#include "router/scheduling/picker_config.h"
#include "router/scheduling/prefix_plugins.h"

namespace switchyard::router {
namespace {

std::vector<int32_t> Tokens(int n, int offset = 0) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    t[static_cast<size_t>(i)] = i + offset;
  return t;
}

TEST(BlockKeysTest, ChainNamesTheWholePrefix) {
  const uint64_t seed = PrefixSeed("m", "");
  std::vector<int32_t> a = Tokens(40);
  std::vector<int32_t> b = a;
  b[5] = 999;  // differs in block 0
  auto ka = BlockKeys(seed, a, 16, false, 100);
  auto kb = BlockKeys(seed, b, 16, false, 100);
  ASSERT_EQ(ka.size(), 2u);
  EXPECT_NE(ka[0], kb[0]);
  EXPECT_NE(ka[1], kb[1]);  // same tokens in block 1, different prefix
  EXPECT_EQ(BlockKeys(seed, a, 16, true, 100).size(), 3u);
  EXPECT_EQ(BlockKeys(seed, a, 16, true, 2).size(), 2u);
  EXPECT_NE(BlockKeys(PrefixSeed("m", "salt"), a, 16, false, 100)[0], ka[0]);
  EXPECT_EQ(NextBlockKey(seed, std::span<const int32_t>(a).first(16)), ka[0]);
}

TEST(PrefixIndexTest, MatchIsTheLongestLeadingRunPerEndpoint) {
  PrefixIndex index(100);
  index.Add("e1", std::vector<uint64_t>{1, 2, 3});
  index.Add("e2", std::vector<uint64_t>{1, 2});
  index.Add("e3", std::vector<uint64_t>{2, 3});  // no block 0: never matches
  auto m = index.Match(std::vector<uint64_t>{1, 2, 3, 4});
  ASSERT_EQ(m.size(), 2u);
  for (const auto& e : m) {
    if (e.endpoint == "e1") {
      EXPECT_EQ(e.blocks, 3u);
    }
    if (e.endpoint == "e2") {
      EXPECT_EQ(e.blocks, 2u);
    }
  }
  index.Remove("e1", std::vector<uint64_t>{2});
  for (const auto& e : index.Match(std::vector<uint64_t>{1, 2, 3}))
    EXPECT_EQ(e.blocks, e.endpoint == "e1" ? 1u : 2u);
  index.RemoveEndpoint("e2");
  EXPECT_EQ(index.Match(std::vector<uint64_t>{1}).size(), 1u);
}

TEST(PrefixIndexTest, LruEvictsLeastRecentlyUsedKeys) {
  PrefixIndex index(3);
  index.Add("e", std::vector<uint64_t>{1, 2, 3});
  index.Add("e", std::vector<uint64_t>{1});  // refresh 1
  index.Add("e", std::vector<uint64_t>{4});  // evicts 2
  EXPECT_EQ(index.num_keys("e"), 3u);
  auto m = index.Match(std::vector<uint64_t>{1, 2});
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].blocks, 1u);
  index.SetCapacity("e", 1);
  EXPECT_EQ(index.num_keys("e"), 1u);
}

TEST(PrefixIndexTest, BlocksCountTheBestWeightOfTheTiersHoldingThem) {
  PrefixIndex index(100);
  index.Add("pool", std::vector<uint64_t>{1, 2, 3});
  index.Add("host", std::vector<uint64_t>{1, 2, 3}, KvTier::kHost);
  index.Add("mixed", std::vector<uint64_t>{1, 2}, KvTier::kHost);
  index.Add("mixed", std::vector<uint64_t>{1}, KvTier::kPool);
  index.Add("mixed", std::vector<uint64_t>{3}, KvTier::kDisk);
  const KvTierWeights weights = {1.0, 0.8, 0.5};
  auto m = index.Match(std::vector<uint64_t>{1, 2, 3}, weights);
  ASSERT_EQ(m.size(), 3u);
  for (const auto& e : m) {
    EXPECT_EQ(e.blocks, 3u) << e.endpoint;
    if (e.endpoint == "pool") {
      EXPECT_DOUBLE_EQ(e.weighted_blocks, 3.0);
      EXPECT_EQ(e.pool_blocks, 3u);
    }
    if (e.endpoint == "host") {
      EXPECT_DOUBLE_EQ(e.weighted_blocks, 2.4);
      EXPECT_EQ(e.pool_blocks, 0u);
    }
    if (e.endpoint == "mixed") {  // block 1 in the pool and the host tier: the pool's weight
      EXPECT_DOUBLE_EQ(e.weighted_blocks, 1.0 + 0.8 + 0.5);
      EXPECT_EQ(e.pool_blocks, 1u);
    }
  }
  // The pool's run is a leading one: a pool block after a gap does not extend it.
  index.Add("gap", std::vector<uint64_t>{1, 3}, KvTier::kPool);
  index.Add("gap", std::vector<uint64_t>{2}, KvTier::kHost);
  for (const auto& e : index.Match(std::vector<uint64_t>{1, 2, 3}, weights)) {
    if (e.endpoint == "gap") {
      EXPECT_EQ(e.blocks, 3u);
      EXPECT_EQ(e.pool_blocks, 1u);
    }
  }
  index.Remove("gap", std::vector<uint64_t>{1, 3}, KvTier::kPool);
  index.Remove("gap", std::vector<uint64_t>{2}, KvTier::kHost);
  // Removing a tier's copy keeps the others; the last one gone, the block is gone.
  index.Remove("mixed", std::vector<uint64_t>{1}, KvTier::kPool);
  index.Remove("mixed", std::vector<uint64_t>{3}, KvTier::kHost);  // never there: no-op
  for (const auto& e : index.Match(std::vector<uint64_t>{1, 2, 3}, weights)) {
    if (e.endpoint == "mixed") {
      EXPECT_EQ(e.blocks, 3u);
      EXPECT_DOUBLE_EQ(e.weighted_blocks, 0.8 + 0.8 + 0.5);
    }
  }
  index.Remove("mixed", std::vector<uint64_t>{2}, KvTier::kHost);
  for (const auto& e : index.Match(std::vector<uint64_t>{1, 2, 3}, weights)) {
    if (e.endpoint == "mixed")
      EXPECT_EQ(e.blocks, 1u);
  }
  EXPECT_EQ(index.num_keys("mixed", KvTier::kHost), 1u);
  EXPECT_EQ(index.num_keys("mixed", KvTier::kDisk), 1u);
  EXPECT_EQ(index.num_keys("mixed"), 0u);
  index.RemoveEndpoint("mixed");
  EXPECT_EQ(index.Match(std::vector<uint64_t>{1}).size(), 2u);
}

TEST(PrefixIndexTest, ThePoolCapacityBoundsOnlyThePoolsKeys) {
  PrefixIndex index(4);
  index.SetCapacity("e", 2);
  index.Add("e", std::vector<uint64_t>{1, 2, 3});
  index.Add("e", std::vector<uint64_t>{1, 2, 3}, KvTier::kHost);
  EXPECT_EQ(index.num_keys("e"), 2u);
  EXPECT_EQ(index.num_keys("e", KvTier::kHost), 3u);
  // Block 1 left the pool but is still in the host tier: the chain holds.
  auto m = index.Match(std::vector<uint64_t>{1, 2, 3});
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].blocks, 3u);
  EXPECT_DOUBLE_EQ(m[0].weighted_blocks, 0.8 + 1.0 + 1.0);
}

kvx::BlockStored Stored(std::vector<uint64_t> hashes, std::optional<uint64_t> parent,
                        std::vector<int32_t> tokens) {
  kvx::BlockStored s;
  for (uint64_t h : hashes)
    s.block_hashes.push_back(kvx::EventHash::FromInt(h));
  if (parent.has_value())
    s.parent_block_hash = kvx::EventHash::FromInt(*parent);
  s.token_ids = std::move(tokens);
  s.block_size = 4;
  return s;
}

TEST(KvEventIndexerTest, EventsKeyBlocksLikeRequests) {
  PrefixIndex index(1000);
  const uint64_t seed = PrefixSeed("m", "");
  KvEventIndexer indexer(&index, seed);
  const std::vector<int32_t> prompt = Tokens(12);
  kvx::KvEventBatch batch;
  // Two events: blocks 0-1, then block 2 chained by the engine's parent hash.
  batch.events.push_back(Stored({100, 101}, std::nullopt, Tokens(8)));
  batch.events.push_back(Stored({102}, 101, Tokens(4, 8)));
  indexer.Apply("e1", batch);
  auto keys = BlockKeys(seed, prompt, 4, false, 100);
  auto m = index.Match(keys);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].blocks, 3u);

  // A host tier dropping its copy of block 1 leaves the pool's copy indexed.
  kvx::KvEventBatch tier_removed;
  tier_removed.events.push_back(
      kvx::BlockRemoved{{kvx::EventHash::FromInt(101)}, kvx::kMediumCpu, {}});
  indexer.Apply("e1", tier_removed);
  EXPECT_EQ(index.Match(keys)[0].blocks, 3u);

  kvx::KvEventBatch removed;
  removed.events.push_back(kvx::BlockRemoved{{kvx::EventHash::FromInt(101)}, {}, {}});
  indexer.Apply("e1", removed);
  EXPECT_EQ(index.Match(keys)[0].blocks, 1u);

  // Unknown parent: skipped, not guessed.
  kvx::KvEventBatch orphan;
  orphan.events.push_back(Stored({200}, 555, Tokens(4)));
  indexer.Apply("e1", orphan);
  EXPECT_EQ(indexer.num_skipped(), 1);

  kvx::KvEventBatch cleared;
  cleared.events.push_back(kvx::AllBlocksCleared{});
  indexer.Apply("e1", cleared);
  EXPECT_TRUE(index.Match(keys).empty());
}

kvx::BlockStored StoredInTier(std::vector<uint64_t> hashes, const char* medium) {
  kvx::BlockStored s = Stored(std::move(hashes), std::nullopt, {});
  s.medium = medium;
  return s;
}

kvx::BlockRemoved RemovedFrom(std::vector<uint64_t> hashes, std::optional<std::string> medium) {
  kvx::BlockRemoved r;
  for (uint64_t h : hashes)
    r.block_hashes.push_back(kvx::EventHash::FromInt(h));
  r.medium = std::move(medium);
  return r;
}

TEST(KvEventIndexerTest, TierEventsKeyTheBlocksThePoolNamed) {
  PrefixIndex index(1000);
  const uint64_t seed = PrefixSeed("m", "");
  KvEventIndexer indexer(&index, seed);
  const auto keys = BlockKeys(seed, Tokens(12), 4, false, 100);
  kvx::KvEventBatch batch;
  batch.events.push_back(Stored({100, 101, 102}, std::nullopt, Tokens(12)));
  // The host tier copies blocks 0-1 (hash-only events), then a hash it never saw in the pool.
  batch.events.push_back(StoredInTier({100, 101}, kvx::kMediumCpu));
  batch.events.push_back(StoredInTier({999}, kvx::kMediumCpu));
  // A shared Redis tier is not indexed: every engine reads it alike.
  batch.events.push_back(StoredInTier({102}, kvx::kMediumRedis));
  indexer.Apply("e", batch);
  EXPECT_EQ(indexer.num_skipped(), 1);
  EXPECT_EQ(index.num_keys("e", KvTier::kHost), 2u);

  // The pool evicts blocks 1 and 2: block 1 is still in the host tier, block 2 is gone.
  kvx::KvEventBatch evicted;
  evicted.events.push_back(RemovedFrom({101, 102}, std::nullopt));
  indexer.Apply("e", evicted);
  auto m = index.Match(keys);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].blocks, 2u);
  EXPECT_DOUBLE_EQ(m[0].weighted_blocks, 1.0 + 0.8);

  // The block comes back into the pool from the tier (a stored event with tokens), and the
  // tier's own removal later leaves the pool's copy.
  kvx::KvEventBatch reloaded;
  reloaded.events.push_back(Stored({101}, 100, Tokens(4, 4)));
  reloaded.events.push_back(RemovedFrom({101}, std::string(kvx::kMediumCpu)));
  indexer.Apply("e", reloaded);
  m = index.Match(keys);
  EXPECT_EQ(m[0].blocks, 2u);
  EXPECT_DOUBLE_EQ(m[0].weighted_blocks, 2.0);

  // Once no tier holds a hash, the indexer forgets it: a later tier event cannot revive it.
  kvx::KvEventBatch gone;
  gone.events.push_back(RemovedFrom({101}, std::nullopt));
  gone.events.push_back(StoredInTier({101}, kvx::kMediumDisk));
  indexer.Apply("e", gone);
  EXPECT_EQ(index.Match(keys)[0].blocks, 1u);
  EXPECT_EQ(indexer.num_skipped(), 2);
}

TEST(PrefixScorerTest, PreciseScoresWeighTheTiers) {
  auto set = PluginSet::FromYaml(
      "plugins:\n- type: prefix-cache-scorer\n  parameters: {mode: precise, blockSizeTokens: 4, "
      "mediumWeights: {CPU: 0.5}}\n",
      "t");
  ASSERT_TRUE(set.ok()) << set.status();
  PrefixIndex* index = (*set)->precise_index();
  const auto keys = BlockKeys(PrefixSeed("m", ""), Tokens(8), 4, false, 100);
  index->Add("pool", keys);
  index->Add("host", keys, KvTier::kHost);
  std::vector<Endpoint> eps(2);
  eps[0].name = "pool";
  eps[1].name = "host";
  Candidates c = {&eps[0], &eps[1]};
  const std::vector<int32_t> prompt = Tokens(9);
  SchedulingRequest req;
  req.model = "m";
  req.prompt_tokens = prompt;
  std::mt19937_64 rng(3);
  CycleState cycle;
  const ProfileResult r = (*set)->profile("default")->Run(req, cycle, c, rng);
  EXPECT_EQ(r.totals, (std::vector<double>{1.0, 0.5}));
  EXPECT_EQ(r.picked[0]->name, "pool");
  // Either serves the 8 tokens without computing them.
  EXPECT_EQ(cycle.prefix_match->CachedTokens("host"), 8);
  EXPECT_EQ(cycle.prefix_match->CachedTokens("pool"), 8);
  // What each lends a peer: only the pool's.
  for (const PrefixMatch::Holder& h : cycle.prefix_match->cached)
    EXPECT_EQ(h.pool_tokens, h.name == "pool" ? 8 : 0) << h.name;
}

TEST(PrefixScorerTest, MediumWeightsAreChecked) {
  for (const char* bad : {"mediumWeights: [1]", "mediumWeights: {TPU: 1}",
                          "mediumWeights: {CPU: 2}", "mediumWeights: {CPU: x}"}) {
    auto set = PluginSet::FromYaml(
        std::string("plugins:\n- type: prefix-cache-scorer\n  parameters: {mode: precise, ") + bad +
            "}\n",
        "t");
    EXPECT_FALSE(set.ok()) << bad;
    if (!set.ok())
      EXPECT_NE(set.status().message().find("mediumWeights"), std::string::npos) << bad;
  }
}

TEST(PrefixScorerTest, ReplicasPlaceAnUnseenPrefixAlike) {
  // Two router replicas (two PluginSets, nothing shared) score a prefix neither has seen
  // the same way: the tie-break is a hash of the prefix and the endpoint names, not a
  // process's random seed. Over many prefixes it spreads them across the endpoints.
  std::vector<Endpoint> eps(4);
  for (size_t i = 0; i < eps.size(); ++i)
    eps[i].name = "10.0.0." + std::to_string(i) + ":8000";
  Candidates c = {&eps[0], &eps[1], &eps[2], &eps[3]};
  const auto yaml = "plugins:\n- type: prefix-cache-scorer\n- type: max-score-picker\n";
  auto one = PluginSet::FromYaml(yaml, "t");
  auto two = PluginSet::FromYaml(yaml, "t");
  ASSERT_TRUE(one.ok() && two.ok());
  std::mt19937_64 rng(5);
  std::set<std::string> placed;
  for (int p = 0; p < 64; ++p) {
    std::vector<int32_t> prompt = Tokens(40);
    prompt[0] = 1000 + p;
    SchedulingRequest req;
    req.model = "m";
    req.prompt_tokens = prompt;
    CycleState a_cycle, b_cycle;
    const ProfileResult a = (*one)->profile("default")->Run(req, a_cycle, c, rng);
    const ProfileResult b = (*two)->profile("default")->Run(req, b_cycle, c, rng);
    EXPECT_EQ(a.totals, b.totals);
    ASSERT_FALSE(a.picked.empty());
    EXPECT_EQ(a.picked[0]->name, b.picked[0]->name);
    placed.insert(a.picked[0]->name);
  }
  EXPECT_EQ(placed.size(), eps.size());
}

TEST(PrefixScorerTest, ApproximateModeLearnsFromPicks) {
  auto set = PluginSet::FromYaml(
      "plugins:\n- type: prefix-cache-scorer\n  parameters: {blockSizeTokens: 4}\n", "t");
  ASSERT_TRUE(set.ok()) << set.status();
  const SchedulingProfile* profile = (*set)->profile("default");
  std::vector<Endpoint> eps(2);
  eps[0].name = "a";
  eps[1].name = "b";
  Candidates c = {&eps[0], &eps[1]};
  const std::vector<int32_t> prompt = Tokens(10);
  SchedulingRequest req;
  req.model = "m";
  req.prompt_tokens = prompt;
  std::mt19937_64 rng(3);
  CycleState first_cycle;
  ProfileResult first = profile->Run(req, first_cycle, c, rng);
  // A prefix nobody holds: only the placement tie-break, under a millionth.
  ASSERT_EQ(first.totals.size(), 2u);
  EXPECT_LT(std::max(first.totals[0], first.totals[1]), 1e-6);
  profile->NotifyPicked(req, first_cycle, eps[1]);
  CycleState cycle;
  ProfileResult second = profile->Run(req, cycle, c, rng);
  EXPECT_EQ(second.totals, (std::vector<double>{0, 1}));
  EXPECT_EQ(second.picked[0]->name, "b");
  // The scorer leaves its prediction in the cycle: b holds all 10 tokens (3 keys of 4, the
  // last one partial, capped at the prompt), a none.
  ASSERT_TRUE(cycle.prefix_match.has_value());
  EXPECT_EQ(cycle.prefix_match->prompt_tokens, 10);
  EXPECT_EQ(cycle.prefix_match->CachedTokens("b"), 10);
  EXPECT_EQ(cycle.prefix_match->CachedTokens("a"), 0);
  // Another tenant's salt does not see b's entries, not even through a cycle state that
  // holds the unsalted request's keys.
  req.cache_salt = "other";
  const std::vector<double> salted = profile->Run(req, cycle, c, rng).totals;
  EXPECT_LT(std::max(salted[0], salted[1]), 1e-6);  // only the placement tie-break
  EXPECT_EQ((*set)->precise_index(), nullptr);
}

// Small candidate lists are matched by a scan, large ones by a map: both find the holder.
TEST(PrefixScorerTest, FindsTheHolderAmongFewOrManyCandidates) {
  for (size_t n : {2, 40}) {
    auto set = PluginSet::FromYaml(
        "plugins:\n- type: prefix-cache-scorer\n  parameters: {blockSizeTokens: 4}\n", "t");
    ASSERT_TRUE(set.ok()) << set.status();
    const SchedulingProfile* profile = (*set)->profile("default");
    std::vector<Endpoint> eps(n);
    Candidates c;
    for (size_t i = 0; i < n; ++i) {
      eps[i].name = "e" + std::to_string(i);
      c.push_back(&eps[i]);
    }
    const std::vector<int32_t> prompt = Tokens(8);
    SchedulingRequest req;
    req.model = "m";
    req.prompt_tokens = prompt;
    std::mt19937_64 rng(3);
    CycleState picked_cycle;
    profile->NotifyPicked(req, picked_cycle, eps[n - 1]);
    CycleState cycle;
    const ProfileResult r = profile->Run(req, cycle, c, rng);
    for (size_t i = 0; i < n; ++i)
      EXPECT_EQ(r.totals[i], i == n - 1 ? 1.0 : 0.0) << n << " " << i;
  }
}

TEST(PrefixScorerTest, PreciseModeReadsTheEventIndex) {
  auto set = PluginSet::FromYaml(
      "plugins:\n- type: prefix-cache-scorer\n  parameters: {mode: precise, blockSizeTokens: 4}\n",
      "t");
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_NE((*set)->precise_index(), nullptr);
  KvEventIndexer indexer((*set)->precise_index(), PrefixSeed("m", ""));
  kvx::KvEventBatch batch;
  batch.events.push_back(Stored({1, 2}, std::nullopt, Tokens(8)));
  indexer.Apply("a", batch);
  std::vector<Endpoint> eps(2);
  eps[0].name = "a";
  eps[1].name = "b";
  const std::vector<int32_t> prompt = Tokens(16);
  SchedulingRequest req;
  req.model = "m";
  req.prompt_tokens = prompt;
  std::mt19937_64 rng(3);
  CycleState cycle;
  ProfileResult r = (*set)->profile("default")->Run(req, cycle, {&eps[0], &eps[1]}, rng);
  EXPECT_EQ(r.totals, (std::vector<double>{0.5, 0}));
  ASSERT_TRUE(cycle.prefix_match.has_value());
  EXPECT_EQ(cycle.prefix_match->prompt_tokens, 16);
  EXPECT_EQ(cycle.prefix_match->CachedTokens("a"), 8);  // 2 of 4 full blocks
  EXPECT_EQ(cycle.prefix_match->CachedTokens("b"), 0);
}

}  // namespace
}  // namespace switchyard::router

namespace switchyard::router {
namespace {

class PrefixPluginsTest : public ::testing::Test {
 protected:
  PrefixPluginsTest() : eps_(3), index_(1000) {
    for (int i = 0; i < 3; ++i)
      eps_[static_cast<size_t>(i)].name = "e" + std::to_string(i);
    for (const Endpoint& e : eps_)
      candidates_.push_back(&e);
    prompt_ = Tokens(64);
    req_.model = "m";
    req_.prompt_tokens = prompt_;
  }
  PrefixMatcher Matcher() {
    PrefixMatchOptions o;
    o.block_size = 16;
    return PrefixMatcher(&index_, o);
  }
  std::vector<std::string> Names(const Candidates& c) {
    std::vector<std::string> out;
    for (const Endpoint* e : c)
      out.push_back(e->name);
    return out;
  }

  std::vector<Endpoint> eps_;
  Candidates candidates_;
  PrefixIndex index_;
  std::vector<int32_t> prompt_;
  SchedulingRequest req_;
};

TEST_F(PrefixPluginsTest, AffinityFilterKeepsStickyEndpointsUntilTheLoadGate) {
  PrefixMatcher m = Matcher();
  CycleState picked;
  m.Record(req_, picked, eps_[1]);  // e1 holds the whole prompt
  PrefixAffinityOptions o;
  o.max_ttft_penalty_ms = 1000;
  o.peak_prefill_tokens_per_s = 1000;  // 1 token = 1 ms
  PrefixCacheAffinityFilter filter(Matcher(), o, 1);
  CycleState cycle;
  EXPECT_EQ(Names(filter.Apply(req_, cycle, candidates_)), std::vector<std::string>{"e1"});
  // e1 has 1500 ms of queued prefill more than e0: stickiness breaks.
  eps_[1].load = std::make_shared<EndpointLoad>(0, 1600);
  eps_[0].load = std::make_shared<EndpointLoad>(0, 100);
  EXPECT_EQ(filter.Apply(req_, cycle, candidates_).size(), 3u);
  // A short shared prefix (below the threshold) is not sticky.
  std::vector<int32_t> other = Tokens(64);
  for (size_t i = 16; i < other.size(); ++i)
    other[i] = 7;
  SchedulingRequest r2 = req_;
  r2.prompt_tokens = other;
  eps_[1].load = nullptr;
  CycleState other_cycle;
  EXPECT_EQ(filter.Apply(r2, other_cycle, candidates_).size(), 3u);
}

TEST_F(PrefixPluginsTest, NoHitLruSpreadsColdRequests) {
  NoHitLruScorer scorer(Matcher(), 16);
  std::vector<double> scores(3);
  CycleState cycle;
  scorer.Score(req_, cycle, candidates_, scores);
  EXPECT_EQ(scores, (std::vector<double>{1, 1, 1}));
  ASSERT_TRUE(cycle.cold_prefix.value_or(false));
  scorer.OnPicked(req_, cycle, eps_[0]);
  // Another cold request: e0 was used last, so it ranks below the never-used ones.
  std::vector<int32_t> other = Tokens(64, 1000);
  SchedulingRequest r2 = req_;
  r2.prompt_tokens = other;
  CycleState other_cycle;
  scorer.Score(r2, other_cycle, candidates_, scores);
  EXPECT_LT(scores[0], scores[1]);
  EXPECT_EQ(scores[1], 1.0);
  // A warm request scores 0.5 everywhere and does not touch the LRU.
  CycleState recorded;
  Matcher().Record(req_, recorded, eps_[2]);
  CycleState warm;
  scorer.Score(req_, warm, candidates_, scores);
  EXPECT_EQ(scores, (std::vector<double>{0.5, 0.5, 0.5}));
  EXPECT_FALSE(warm.cold_prefix.value_or(true));
}

TEST_F(PrefixPluginsTest, ConfiguredTokenAwareProfile) {
  // llm-d's mid-2026 default shape for prefill-bound traffic.
  auto set = PluginSet::FromYaml(
      "plugins:\n"
      "- type: prefix-cache-affinity-filter\n"
      "- type: prefix-cache-scorer\n"
      "- type: no-hit-lru-scorer\n"
      "- type: active-request-scorer\n",
      "t");
  ASSERT_TRUE(set.ok()) << set.status();
  std::mt19937_64 rng(9);
  const SchedulingProfile* p = (*set)->profile("default");
  CycleState first_cycle;
  ProfileResult first = p->Run(req_, first_cycle, candidates_, rng);
  ASSERT_EQ(first.picked.size(), 1u);
  p->NotifyPicked(req_, first_cycle, *first.picked[0]);
  // The same prompt again sticks to the same endpoint.
  for (int i = 0; i < 5; ++i) {
    CycleState cycle;
    EXPECT_EQ(p->Run(req_, cycle, candidates_, rng).picked[0], first.picked[0]);
  }
}

}  // namespace
}  // namespace switchyard::router
