#include "base/drain_gate.h"

#include <chrono>
#include <thread>

#include "gtest/gtest.h"

namespace switchyard::base {
namespace {

using Clock = DrainGate::Clock;

TEST(DrainGateTest, AdmitsUntilTheDrainBegins) {
  DrainGate gate;
  DrainGate::Ticket a = gate.Admit();
  ASSERT_NE(a, nullptr);
  DrainGate::Ticket copy = a;
  EXPECT_EQ(gate.num_in_flight(), 1);
  EXPECT_FALSE(gate.draining());
  gate.BeginDrain();
  EXPECT_TRUE(gate.draining());
  EXPECT_EQ(gate.Admit(), nullptr);
  a.reset();
  EXPECT_EQ(gate.num_in_flight(), 1);  // a copy still holds it
  copy.reset();
  EXPECT_EQ(gate.num_in_flight(), 0);
  EXPECT_TRUE(gate.AwaitIdle(Clock::now(), true));
}

TEST(DrainGateTest, AwaitIdleReturnsWhenTheLastTicketGoes) {
  DrainGate gate;
  DrainGate::Ticket ticket = gate.Admit();
  gate.BeginDrain();
  std::thread releaser([&ticket] { ticket.reset(); });
  EXPECT_TRUE(gate.AwaitIdle(Clock::now() + std::chrono::seconds(30), true));
  releaser.join();
}

TEST(DrainGateTest, DeadlineAndInterrupt) {
  DrainGate gate;
  DrainGate::Ticket ticket = gate.Admit();
  gate.BeginDrain();
  EXPECT_FALSE(gate.AwaitIdle(Clock::now(), true));
  std::thread interrupter([&gate] { gate.Interrupt(); });
  EXPECT_FALSE(gate.AwaitIdle(Clock::now() + std::chrono::seconds(30), true));
  interrupter.join();
  // The final wait for the answers to be written is not cut by the interrupt.
  EXPECT_FALSE(gate.AwaitIdle(Clock::now() + std::chrono::milliseconds(1), false));
  std::thread releaser([&ticket] { ticket.reset(); });
  EXPECT_TRUE(gate.AwaitIdle(Clock::now() + std::chrono::seconds(30), false));
  releaser.join();
}

}  // namespace
}  // namespace switchyard::base
