// Deadline: moving it later or earlier, disarming and cancelling, and what its pending wait
// holds, on an io_context run by the test thread.
#include "net/internal/deadline.h"

#include <chrono>
#include <memory>

#include "gtest/gtest.h"

namespace switchyard::net::internal {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

class DeadlineTest : public ::testing::Test {
 protected:
  // Runs the context until the deadline fired or nothing is left to run.
  void RunUntilFired() {
    while (fired_ == 0 && context_.run_one_for(std::chrono::seconds(10)) > 0) {
    }
  }

  asio::io_context context_;
  int fired_ = 0;
  Deadline deadline_{context_.get_executor(), [this] { ++fired_; }};
};

TEST_F(DeadlineTest, MovedLaterFiresOnceAtTheLaterTime) {
  const Clock::time_point start = Clock::now();
  deadline_.Arm(milliseconds(10), nullptr);
  deadline_.Arm(milliseconds(60), nullptr);
  RunUntilFired();
  EXPECT_EQ(fired_, 1);
  EXPECT_GE(Clock::now() - start, milliseconds(60));
  context_.poll();
  EXPECT_EQ(fired_, 1);
}

TEST_F(DeadlineTest, MovedEarlierFiresAtTheEarlierTime) {
  const Clock::time_point start = Clock::now();
  deadline_.Arm(milliseconds(60'000), nullptr);
  deadline_.Arm(milliseconds(10), nullptr);
  RunUntilFired();
  EXPECT_EQ(fired_, 1);
  EXPECT_LT(Clock::now() - start, milliseconds(30'000));
}

TEST_F(DeadlineTest, DisarmedNeverFiresAndItsWaitLetsGoAtItsTime) {
  auto owner = std::make_shared<int>(0);
  deadline_.Arm(milliseconds(10), owner);
  deadline_.Disarm();
  EXPECT_EQ(owner.use_count(), 2);  // the pending wait holds it until its time
  while (context_.run_one_for(std::chrono::seconds(10)) > 0) {
  }
  EXPECT_EQ(fired_, 0);
  EXPECT_EQ(owner.use_count(), 1);
  // Armed again after that, it fires.
  deadline_.Arm(milliseconds(1), owner);
  context_.restart();
  RunUntilFired();
  EXPECT_EQ(fired_, 1);
}

TEST_F(DeadlineTest, CancelLetsGoAtOnce) {
  auto owner = std::make_shared<int>(0);
  deadline_.Arm(milliseconds(60'000), owner);
  deadline_.Cancel();
  context_.poll();  // the aborted wait runs now, not in a minute
  EXPECT_EQ(owner.use_count(), 1);
  EXPECT_EQ(fired_, 0);
}

}  // namespace
}  // namespace switchyard::net::internal
