#include "engine/best_of.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace switchyard::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

TEST(BestOfTest, HighestCumulativeLogprobsFirst) {
  const std::vector<double> cumulative = {-3.0, -1.0, -2.0, -0.5};
  EXPECT_THAT(SelectBestOf(cumulative, 1), ElementsAre(3));
  EXPECT_THAT(SelectBestOf(cumulative, 2), ElementsAre(3, 1));
  EXPECT_THAT(SelectBestOf(cumulative, 4), ElementsAre(3, 1, 2, 0));
}

// Python's sorted(..., reverse=True) is stable: equal scores keep their order.
TEST(BestOfTest, TiesKeepTheLowerIndexFirst) {
  const std::vector<double> cumulative = {-1.0, -2.0, -1.0, -1.0};
  EXPECT_THAT(SelectBestOf(cumulative, 3), ElementsAre(0, 2, 3));
}

TEST(BestOfTest, NanCountsAsMinusInfinity) {
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> cumulative = {std::nan(""), -inf, -5.0};
  EXPECT_THAT(SelectBestOf(cumulative, 3), ElementsAre(2, 0, 1));
}

TEST(BestOfTest, NBeyondTheSequencesTakesThemAll) {
  const std::vector<double> cumulative = {-2.0, -1.0};
  EXPECT_THAT(SelectBestOf(cumulative, 5), ElementsAre(1, 0));
  EXPECT_THAT(SelectBestOf({}, 1), IsEmpty());
}

}  // namespace
}  // namespace switchyard::engine
