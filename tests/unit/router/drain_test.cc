// The router's Drain over its base::DrainGate: a ticket counts its request in flight until the
// ticket goes (whether or not a call was attached), and none is handed out once the drain
// began.
#include "router/internal/drain.h"

#include <chrono>
#include <memory>
#include <thread>

#include "gtest/gtest.h"

namespace switchyard::router::internal {
namespace {

using Clock = std::chrono::steady_clock;

TEST(DrainTest, TicketsCountUntilTheyGoAndNoneOnceDraining) {
  Drain drain;
  std::unique_ptr<Drain::Ticket> ticket = drain.Admit();
  ASSERT_NE(ticket, nullptr);
  EXPECT_EQ(drain.gate().num_in_flight(), 1);
  drain.gate().BeginDrain();
  EXPECT_EQ(drain.Admit(), nullptr);
  EXPECT_EQ(drain.gate().num_in_flight(), 1);
  EXPECT_FALSE(drain.gate().AwaitIdle(Clock::now(), true));
  drain.AbortAll();  // no call attached: nothing to end, the ticket stays
  EXPECT_EQ(drain.gate().num_in_flight(), 1);
  std::thread releaser([&ticket] { ticket.reset(); });
  EXPECT_TRUE(drain.gate().AwaitIdle(Clock::now() + std::chrono::seconds(30), true));
  releaser.join();
}

}  // namespace
}  // namespace switchyard::router::internal
