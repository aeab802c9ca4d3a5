// Outlier detection's arithmetic: Envoy's ejection time (base x ejections, capped), the
// multiplier forgiven one per interval without ejection, and the share of a pool that may be
// ejected (at least one).
#include "router/outlier_detection.h"

#include "gtest/gtest.h"

namespace switchyard::router {
namespace {

using std::chrono::seconds;

TEST(OutlierDetectionTest, EjectionTimeGrowsWithEjectionsUpToTheCap) {
  OutlierDetectionConfig config;
  config.base_ejection_time = seconds(30);
  config.max_ejection_time = seconds(100);
  config.interval = seconds(10);
  OutlierState state;
  auto now = OutlierState::Clock::time_point() + seconds(1000);
  EXPECT_FALSE(state.ejected(now));
  state.Eject(config, now);
  EXPECT_TRUE(state.ejected(now + seconds(29)));
  EXPECT_FALSE(state.ejected(now + seconds(30)));
  // Ejected again as soon as it is back: 60 s, then 90 s, then the cap.
  for (const int expect_s : {60, 90, 100, 100}) {
    now = state.ejected_until();
    state.Eject(config, now);
    EXPECT_EQ(state.ejected_until() - now, seconds(expect_s));
  }
  EXPECT_EQ(state.ejections(), 5u);
  // Forgiven: every interval back in the set takes one off (the multiplier stopped at 4).
  now = state.ejected_until() + seconds(25);  // two intervals: 4 -> 2, then this one: 3
  state.Eject(config, now);
  EXPECT_EQ(state.ejected_until() - now, seconds(90));
  now = state.ejected_until() + seconds(3600);  // all forgiven
  state.Eject(config, now);
  EXPECT_EQ(state.ejected_until() - now, seconds(30));
}

TEST(OutlierDetectionTest, APoolKeepsMostOfItsMembersButOneMayAlwaysGo) {
  OutlierDetectionConfig config;  // 10%
  EXPECT_TRUE(MayEject(config, 2, 0));
  EXPECT_FALSE(MayEject(config, 2, 1));
  EXPECT_TRUE(MayEject(config, 20, 1));
  EXPECT_FALSE(MayEject(config, 20, 2));
  config.max_ejection_percent = 0;
  EXPECT_TRUE(MayEject(config, 3, 0));
  config.max_ejection_percent = 100;
  EXPECT_TRUE(MayEject(config, 3, 2));
}

}  // namespace
}  // namespace switchyard::router
