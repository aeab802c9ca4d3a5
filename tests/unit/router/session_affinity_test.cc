#include "router/scheduling/session_affinity.h"

#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "router/scheduling/picker_config.h"

namespace switchyard::router {
namespace {

TEST(SessionTokenCodecTest, IssuedTokensVerifyForgedOnesDoNot) {
  SessionTokenCodec codec("secret");
  const std::string token = codec.Issue("10.0.0.7:8000");
  EXPECT_EQ(codec.Verify(token), "10.0.0.7:8000");
  EXPECT_EQ(SessionTokenCodec("other").Verify(token), std::nullopt);
  // llm-d's unsigned form (plain base64 of the name) and tampering are refused.
  EXPECT_EQ(codec.Verify("MTAuMC4wLjc6ODAwMA"), std::nullopt);
  std::string tampered = token;
  tampered[0] = tampered[0] == 'A' ? 'B' : 'A';
  EXPECT_EQ(codec.Verify(tampered), std::nullopt);
  EXPECT_EQ(codec.Verify(""), std::nullopt);
  EXPECT_EQ(codec.Verify("a.b.c"), std::nullopt);
  EXPECT_EQ(codec.Verify(std::string(5000, 'A') + ".x"), std::nullopt);
}

class SessionAffinityTest : public ::testing::Test {
 protected:
  SessionAffinityTest() : eps_(3) {
    for (int i = 0; i < 3; ++i)
      eps_[static_cast<size_t>(i)].name = "e" + std::to_string(i);
    for (const Endpoint& e : eps_)
      candidates_.push_back(&e);
  }
  std::vector<Endpoint> eps_;
  Candidates candidates_;
};

TEST_F(SessionAffinityTest, TokenStrategyScoresAndFilters) {
  SessionTokenCodec codec("k");
  SessionAffinity affinity(SessionAffinity::Strategy::kToken, &codec, std::chrono::seconds(300));
  SchedulingRequest req;
  req.session_token = codec.Issue("e2");
  std::vector<double> scores(3);
  CycleState cycle;
  affinity.Score(req, cycle, candidates_, scores);
  EXPECT_EQ(scores, (std::vector<double>{0, 0, 1}));
  Candidates kept = affinity.Apply(req, cycle, candidates_);
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept[0]->name, "e2");
  // A departed endpoint fails open.
  req.session_token = codec.Issue("gone");
  EXPECT_EQ(affinity.Apply(req, cycle, candidates_).size(), 3u);
  // A forged token is no token.
  req.session_token = SessionTokenCodec("attacker").Issue("e1");
  affinity.Score(req, cycle, candidates_, scores);
  EXPECT_EQ(scores, (std::vector<double>{0, 0, 0}));
}

TEST_F(SessionAffinityTest, SessionIdStrategyRemembersThePick) {
  SessionAffinity affinity(SessionAffinity::Strategy::kSessionId, nullptr,
                           std::chrono::seconds(300));
  SchedulingRequest req;
  req.session_id = "user-42";
  EXPECT_EQ(affinity.SessionEndpoint(req), std::nullopt);
  CycleState cycle;
  affinity.OnPicked(req, cycle, eps_[1]);
  EXPECT_EQ(affinity.SessionEndpoint(req), "e1");
  std::vector<double> scores(3);
  affinity.Score(req, cycle, candidates_, scores);
  EXPECT_EQ(scores, (std::vector<double>{0, 1, 0}));
}

TEST_F(SessionAffinityTest, ConfiguredThroughThePluginSet) {
  PluginSetOptions options;
  options.session_token_secret = "shared-secret";
  auto set = PluginSet::FromYaml(
      "plugins:\n- type: session-affinity-scorer\n- type: queue-scorer\n", "t", options);
  ASSERT_TRUE(set.ok()) << set.status();
  SchedulingRequest req;
  ASSERT_NE((*set)->session_codec(), nullptr);
  req.session_token = (*set)->session_codec()->Issue("e0");
  EXPECT_EQ(SessionTokenCodec("shared-secret").Verify(req.session_token), "e0");
  std::mt19937_64 rng(5);
  CycleState cycle;
  ProfileResult r = (*set)->profile("default")->Run(req, cycle, candidates_, rng);
  ASSERT_EQ(r.picked.size(), 1u);
  EXPECT_EQ(r.picked[0]->name, "e0");
  // Without a token-strategy session-affinity plugin no token is issued, as in llm-d.
  for (const char* yaml : {"plugins:\n- type: queue-scorer\n",
                           "plugins:\n- type: session-affinity-filter\n"
                           "  parameters: {strategy: session_id}\n"}) {
    auto other = PluginSet::FromYaml(yaml, "t", options);
    ASSERT_TRUE(other.ok()) << other.status();
    EXPECT_EQ((*other)->session_codec(), nullptr) << yaml;
  }
  auto bad = PluginSet::FromYaml(
      "plugins:\n- type: session-affinity-filter\n  parameters: {strategy: cookie}\n", "t");
  EXPECT_FALSE(bad.ok());
}

}  // namespace
}  // namespace switchyard::router
