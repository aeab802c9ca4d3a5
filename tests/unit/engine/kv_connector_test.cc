// KvConnector's peer-to-peer prefix pull over real loopback TCP, with the test playing both
// engine loops: the lender's lookups are handed to its loop (TakeLookups) and answered with
// pinned blocks (AnswerLookup), the puller reads them into its own pool and releases them,
// and the lent blocks come back to the lender's loop as an ended lease of pins. A lookup the
// loop does not answer in time and a lender that stopped are answered as holding nothing (the
// block server's rule for a source's error), as is a source that holds nothing: a miss, which
// the puller computes; an unreachable source fails the pull.
#include "engine/kv_connector.h"

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

#include "../kvx/transfer_test_memory.h"
#include "base/mutex.h"
#include "kvx/kv_block_layout.h"

namespace switchyard::engine {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int32_t kBlocks = 16;

kvx::KvBlockLayout Layout() {
  return *kvx::KvBlockLayout::ForKvCache(/*num_layers=*/2, /*block_size=*/4, /*kv_heads=*/2,
                                         /*head_dim=*/8, /*dtype_bytes=*/2);
}

KvConnectorOptions Options(kvx::KvRole role, int32_t io_timeout_ms) {
  KvConnectorOptions o;
  o.config.role = role;
  o.config.engine_id = role == kvx::KvRole::kConsumer ? "puller" : "lender";
  o.config.io_timeout_ms = io_timeout_ms;
  o.secret = "p2p-unit-secret";
  o.compatibility.model_fingerprint = "test-model";
  o.compatibility.dtype = "f16";
  o.compatibility.num_layers = 2;
  o.compatibility.kv_heads = 2;
  o.compatibility.head_dim = 8;
  o.compatibility.block_size = 4;
  return o;
}

BlockHash Hash(uint8_t n) {
  BlockHash h;
  h.bytes[0] = n;
  h.bytes[31] = 0x5a;
  return h;
}

// Counts wake calls, so a test can wait for the connector to have news for the loop.
class Waker {
 public:
  std::function<void()> Callback() {
    return [this] {
      base::MutexLock lock(&mu_);
      ++wakes_;
      cv_.NotifyAll();
    };
  }
  // Polls `ready` after each wake, up to `timeout`.
  template <typename F>
  bool WaitFor(F ready, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    const Clock::time_point deadline = Clock::now() + timeout;
    while (!ready()) {
      base::MutexLock lock(&mu_);
      const int64_t seen = wakes_;
      if (!cv_.WaitUntil(&mu_, std::min(deadline, Clock::now() + std::chrono::milliseconds(20)),
                         [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return wakes_ != seen; }) &&
          Clock::now() >= deadline) {
        return ready();
      }
    }
    return true;
  }

 private:
  base::Mutex mu_;
  base::CondVar cv_;
  int64_t wakes_ ABSL_GUARDED_BY(mu_) = 0;
};

struct Fleet {
  explicit Fleet(int32_t lender_io_timeout_ms = 5000)
      : lender_memory(Layout(), kBlocks, /*seed=*/1), puller_memory(Layout(), kBlocks, 2) {
    lender = *KvConnector::Start(Options(kvx::KvRole::kBoth, lender_io_timeout_ms),
                                 *lender_memory.region, lender_wake.Callback());
    puller = *KvConnector::Start(Options(kvx::KvRole::kConsumer, 5000), *puller_memory.region,
                                 puller_wake.Callback());
    source.host = "127.0.0.1";
    source.port = lender->port();
  }
  // The puller's finished loads, once there are any.
  std::vector<KvConnector::FinishedLoad> WaitFinished() {
    std::vector<KvConnector::FinishedLoad> done;
    EXPECT_TRUE(puller_wake.WaitFor([&] {
      for (KvConnector::FinishedLoad& f : puller->TakeFinishedLoads())
        done.push_back(f);
      return !done.empty();
    }));
    return done;
  }

  kvx::PoolMemory lender_memory;
  kvx::PoolMemory puller_memory;
  Waker lender_wake;
  Waker puller_wake;
  std::unique_ptr<KvConnector> lender;
  std::unique_ptr<KvConnector> puller;
  net::HostPort source;
};

TEST(KvConnectorP2pTest, APullReadsTheLentBlocksAndReleasesThem) {
  Fleet fleet;
  const std::vector<BlockHash> hashes = {Hash(1), Hash(2), Hash(3), Hash(4)};
  fleet.puller->StartPeerPull(/*seq=*/7, fleet.source, hashes, {12, 13, 14, 15});
  // The lender's loop: the lookup names the hashes asked for; it holds the first three, at
  // blocks 5, 9 and 2 (pinned by the loop, which the lease hands back).
  std::vector<KvConnector::PendingLookup> lookups;
  ASSERT_TRUE(fleet.lender_wake.WaitFor([&] {
    lookups = fleet.lender->TakeLookups();
    return !lookups.empty();
  }));
  ASSERT_EQ(lookups.size(), 1u);
  EXPECT_EQ(lookups[0].hashes, hashes);
  const std::vector<BlockId> lent = {5, 9, 2};
  EXPECT_TRUE(fleet.lender->AnswerLookup(lookups[0].id, lent));

  const std::vector<KvConnector::FinishedLoad> done = fleet.WaitFinished();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_TRUE(done[0].status.ok()) << done[0].status;
  EXPECT_TRUE(done[0].peer_pull);
  EXPECT_EQ(done[0].seq, 7u);
  EXPECT_EQ(done[0].num_loaded, 3);
  const kvx::KvBlockLayout layout = Layout();
  for (size_t i = 0; i < lent.size(); ++i) {
    EXPECT_EQ(fleet.puller_memory.BlockBytes(layout, 12 + static_cast<int32_t>(i)),
              fleet.lender_memory.BlockBytes(layout, lent[i]))
        << "block " << i;
  }
  // The puller released them: the lease ends, naming the pins for the loop to drop.
  std::vector<KvConnector::EndedLease> ended;
  ASSERT_TRUE(fleet.lender_wake.WaitFor([&] {
    ended = fleet.lender->TakeEndedLeases(Clock::now());
    return !ended.empty();
  }));
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_FALSE(ended[0].seq.has_value());
  EXPECT_EQ(ended[0].pinned, lent);
  EXPECT_FALSE(ended[0].expired);
  EXPECT_FALSE(fleet.lender->NextLeaseDeadline().has_value());
}

TEST(KvConnectorP2pTest, PullsRunAtOnceOnTheLoadThreads) {
  Fleet fleet;
  // Two pulls from the same source: both lookups must reach the lender's loop before it
  // answers either, which needs two load threads pulling at once.
  fleet.puller->StartPeerPull(1, fleet.source, std::vector<BlockHash>{Hash(1)}, {3});
  fleet.puller->StartPeerPull(2, fleet.source, std::vector<BlockHash>{Hash(2)}, {4});
  std::vector<KvConnector::PendingLookup> lookups;
  ASSERT_TRUE(fleet.lender_wake.WaitFor([&] {
    for (KvConnector::PendingLookup& lookup : fleet.lender->TakeLookups())
      lookups.push_back(std::move(lookup));
    return lookups.size() == 2;
  }));
  for (const KvConnector::PendingLookup& lookup : lookups) {
    const BlockId lent = lookup.hashes[0] == Hash(1) ? 8 : 9;
    EXPECT_TRUE(fleet.lender->AnswerLookup(lookup.id, std::vector<BlockId>{lent}));
  }
  std::vector<KvConnector::FinishedLoad> done;
  ASSERT_TRUE(fleet.puller_wake.WaitFor([&] {
    for (KvConnector::FinishedLoad& f : fleet.puller->TakeFinishedLoads())
      done.push_back(f);
    return done.size() == 2;
  }));
  const kvx::KvBlockLayout layout = Layout();
  for (const KvConnector::FinishedLoad& f : done) {
    EXPECT_TRUE(f.status.ok()) << f.status;
    EXPECT_EQ(f.num_loaded, 1);
  }
  EXPECT_EQ(fleet.puller_memory.BlockBytes(layout, 3), fleet.lender_memory.BlockBytes(layout, 8));
  EXPECT_EQ(fleet.puller_memory.BlockBytes(layout, 4), fleet.lender_memory.BlockBytes(layout, 9));
}

TEST(KvConnectorP2pTest, ASourceThatHoldsNothingIsAMissNotAFailure) {
  Fleet fleet;
  fleet.puller->StartPeerPull(1, fleet.source, std::vector<BlockHash>{Hash(9)}, {3});
  std::vector<KvConnector::PendingLookup> lookups;
  ASSERT_TRUE(fleet.lender_wake.WaitFor([&] {
    lookups = fleet.lender->TakeLookups();
    return !lookups.empty();
  }));
  EXPECT_TRUE(fleet.lender->AnswerLookup(lookups[0].id, {}));
  const std::vector<KvConnector::FinishedLoad> done = fleet.WaitFinished();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_TRUE(done[0].status.ok()) << done[0].status;
  EXPECT_EQ(done[0].num_loaded, 0);
  // Nothing was lent, so no lease waits to end.
  EXPECT_FALSE(fleet.lender->NextLeaseDeadline().has_value());
}

TEST(KvConnectorP2pTest, ALookupTheLoopDoesNotAnswerInTimeIsAMissAndLendsNothing) {
  Fleet fleet(/*lender_io_timeout_ms=*/200);
  fleet.puller->StartPeerPull(1, fleet.source, std::vector<BlockHash>{Hash(1), Hash(2)}, {3, 4});
  // The loop takes the lookup but answers only after the peer has given up.
  std::vector<KvConnector::PendingLookup> late;
  ASSERT_TRUE(fleet.lender_wake.WaitFor([&] {
    late = fleet.lender->TakeLookups();
    return !late.empty();
  }));
  const std::vector<KvConnector::FinishedLoad> done = fleet.WaitFinished();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_TRUE(done[0].status.ok()) << done[0].status;
  EXPECT_EQ(done[0].num_loaded, 0);
  // The late answer finds nobody waiting: nothing is lent, the loop keeps its pins.
  ASSERT_EQ(late.size(), 1u);
  EXPECT_FALSE(fleet.lender->AnswerLookup(late[0].id, std::vector<BlockId>{1, 2}));
  EXPECT_FALSE(fleet.lender->NextLeaseDeadline().has_value());
}

TEST(KvConnectorP2pTest, ALenderThatStoppedLendsNothing) {
  Fleet fleet;
  fleet.lender->StopLending();
  fleet.puller->StartPeerPull(1, fleet.source, std::vector<BlockHash>{Hash(1)}, {3});
  const std::vector<KvConnector::FinishedLoad> done = fleet.WaitFinished();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_TRUE(done[0].status.ok()) << done[0].status;
  EXPECT_EQ(done[0].num_loaded, 0);
  EXPECT_TRUE(fleet.lender->TakeLookups().empty());
}

TEST(KvConnectorP2pTest, AnUnreachableSourceFailsThePull) {
  Fleet fleet;
  net::HostPort closed = fleet.source;
  fleet.lender.reset();  // its port closes
  fleet.puller->StartPeerPull(1, closed, std::vector<BlockHash>{Hash(1)}, {3});
  const std::vector<KvConnector::FinishedLoad> done = fleet.WaitFinished();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_FALSE(done[0].status.ok());
  EXPECT_TRUE(done[0].peer_pull);
}

}  // namespace
}  // namespace switchyard::engine
