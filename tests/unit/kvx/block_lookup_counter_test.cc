// BlockLookupCounter: per-key lookup counts over the `capacity` most recently looked-up keys.
#include "kvx/block_lookup_counter.h"

#include <cstdint>

#include "gtest/gtest.h"

namespace switchyard::kvx {
namespace {

using Key = BlockLookupCounter::Key;

Key K(uint8_t n) {
  Key key{};
  key[0] = n;
  return key;
}

TEST(BlockLookupCounterTest, CountsEachKeysLookups) {
  BlockLookupCounter counter;
  EXPECT_EQ(counter.Count(K(1)), 0);
  EXPECT_EQ(counter.Add(K(1)), 1);
  EXPECT_EQ(counter.Add(K(1)), 2);
  EXPECT_EQ(counter.Add(K(2)), 1);
  EXPECT_EQ(counter.Add(K(1)), 3);
  EXPECT_EQ(counter.Count(K(1)), 3);
  EXPECT_EQ(counter.Count(K(2)), 1);
  EXPECT_EQ(counter.Count(K(3)), 0);
  EXPECT_EQ(counter.size(), 2);
}

TEST(BlockLookupCounterTest, CountChangesNothing) {
  BlockLookupCounter counter(2);
  counter.Add(K(1));
  counter.Add(K(2));
  // Asking about K(1), the least recent, neither counts it nor makes it recent.
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(counter.Count(K(1)), 1);
  EXPECT_EQ(counter.Count(K(3)), 0);
  EXPECT_EQ(counter.size(), 2);
  counter.Add(K(3));
  EXPECT_EQ(counter.Count(K(1)), 0);
  EXPECT_EQ(counter.Count(K(2)), 1);
}

TEST(BlockLookupCounterTest, CapacityForgetsTheLeastRecentlyLookedUpKey) {
  BlockLookupCounter counter(2);
  counter.Add(K(1));
  counter.Add(K(1));
  counter.Add(K(2));
  counter.Add(K(3));
  EXPECT_EQ(counter.size(), 2);
  EXPECT_EQ(counter.Count(K(1)), 0);
  EXPECT_EQ(counter.Count(K(2)), 1);
  EXPECT_EQ(counter.Count(K(3)), 1);
  // A forgotten key starts again from 0, and pushes out the next least recent.
  EXPECT_EQ(counter.Add(K(1)), 1);
  EXPECT_EQ(counter.Count(K(2)), 0);
  EXPECT_EQ(counter.Count(K(3)), 1);
}

TEST(BlockLookupCounterTest, AKeyLookedUpAgainSurvives) {
  BlockLookupCounter counter(2);
  counter.Add(K(1));
  counter.Add(K(2));
  counter.Add(K(1));
  counter.Add(K(3));
  EXPECT_EQ(counter.Count(K(1)), 2);
  EXPECT_EQ(counter.Count(K(2)), 0);
  EXPECT_EQ(counter.Count(K(3)), 1);
}

TEST(BlockLookupCounterTest, ACapacityOfOneKeepsOnlyTheLastKey) {
  BlockLookupCounter counter(1);
  EXPECT_EQ(counter.Add(K(1)), 1);
  EXPECT_EQ(counter.Add(K(1)), 2);
  EXPECT_EQ(counter.Add(K(2)), 1);
  EXPECT_EQ(counter.Count(K(1)), 0);
  EXPECT_EQ(counter.size(), 1);
}

}  // namespace
}  // namespace switchyard::kvx
