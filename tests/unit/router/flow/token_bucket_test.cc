#include "router/flow/token_bucket.h"

#include "gtest/gtest.h"

namespace switchyard::router::flow {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

const Clock::time_point kT0 = Clock::time_point() + seconds(1000);

TEST(TokenBucketTest, StartsFullAndRefillsUpToItsCapacity) {
  TokenBucket bucket(3, 1);
  bucket.Refill(kT0);
  EXPECT_DOUBLE_EQ(bucket.available(), 3);
  EXPECT_EQ(bucket.Wait(3), seconds(0));
  bucket.Take(3);
  EXPECT_EQ(bucket.Wait(1), seconds(1));
  bucket.Refill(kT0 + milliseconds(500));
  EXPECT_DOUBLE_EQ(bucket.available(), 0.5);
  EXPECT_EQ(bucket.Wait(1), seconds(1));  // whole seconds, rounded up
  EXPECT_EQ(bucket.Wait(3), seconds(3));
  bucket.Refill(kT0 + seconds(1));
  EXPECT_EQ(bucket.Wait(1), seconds(0));
  bucket.Refill(kT0 + seconds(100));
  EXPECT_DOUBLE_EQ(bucket.available(), 3);
}

TEST(TokenBucketTest, AnEarlierNowAddsNothing) {
  TokenBucket bucket(10, 1);
  bucket.Refill(kT0);
  bucket.Take(10);
  bucket.Refill(kT0 + seconds(2));
  bucket.Refill(kT0 + seconds(1));  // another thread's older reading
  EXPECT_DOUBLE_EQ(bucket.available(), 2);
  bucket.Refill(kT0 + seconds(3));
  EXPECT_DOUBLE_EQ(bucket.available(), 3);
}

TEST(TokenBucketTest, DebtIsPaidBackFirst) {
  TokenBucket bucket(60, 1);
  bucket.Refill(kT0);
  bucket.Take(100);
  EXPECT_DOUBLE_EQ(bucket.available(), -40);
  EXPECT_EQ(bucket.Wait(10), seconds(50));
  bucket.Refill(kT0 + seconds(49));
  EXPECT_EQ(bucket.Wait(10), seconds(1));
  bucket.Refill(kT0 + seconds(50));
  EXPECT_EQ(bucket.Wait(10), seconds(0));
}

TEST(TokenBucketTest, SlowRates) {
  TokenBucket bucket(1, 0.25);  // one every 4 s
  bucket.Refill(kT0);
  bucket.Take(1);
  EXPECT_EQ(bucket.Wait(1), seconds(4));
  bucket.Refill(kT0 + seconds(1));
  EXPECT_EQ(bucket.Wait(1), seconds(3));
  bucket.Refill(kT0 + milliseconds(3500));
  EXPECT_EQ(bucket.Wait(1), seconds(1));
  bucket.Refill(kT0 + seconds(4));
  EXPECT_EQ(bucket.Wait(1), seconds(0));
}

}  // namespace
}  // namespace switchyard::router::flow
