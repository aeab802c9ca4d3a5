// The transfer engine's life cycle: the bounded queue, cancellation, callbacks, shutdown and
// concurrent posting. A test that needs a transfer to stand still at a known point blocks
// it in the engine's on_copy_op hook, which runs on the transfer thread before each copy op.
#include "kvx/transfer_engine.h"

#include <pthread.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

#include "transfer_test_memory.h"

namespace switchyard::kvx {
namespace {

constexpr int32_t kBlocks = 64;

KvBlockLayout SmallLayout() {
  return *KvBlockLayout::ForKvCache(2, 4, 2, 8, 2);
}

std::vector<int32_t> Range(int32_t begin, int32_t end) {
  std::vector<int32_t> ids(static_cast<size_t>(end - begin));
  std::iota(ids.begin(), ids.end(), begin);
  return ids;
}

// A pool and an interleaved store of kBlocks blocks registered in `engine`, with a table of
// all blocks each (table index = block id).
struct Memories {
  explicit Memories(TransferEngine& engine)
      : layout(SmallLayout()), pool(layout, kBlocks, 1), store(layout, kBlocks, 2) {
    pool_table = *engine.PrepareBlockList(engine.RegisterRegion(*pool.region), Range(0, kBlocks));
    store_table = *engine.PrepareBlockList(engine.RegisterRegion(*store.region), Range(0, kBlocks));
  }

  bool StoreBlockMatchesPool(int32_t store_block, int32_t pool_block) {
    for (size_t s = 0; s < layout.num_segments(); ++s) {
      std::span<std::byte> a = store.Segment(layout, store_block, s);
      std::span<std::byte> b = pool.Segment(layout, pool_block, s);
      if (std::memcmp(a.data(), b.data(), a.size()) != 0)
        return false;
    }
    return true;
  }

  KvBlockLayout layout;
  PoolMemory pool;
  InterleavedMemory store;
  BlockListHandle pool_table;
  BlockListHandle store_table;
};

// An on_copy_op hook that stops the first copy op it sees until released.
struct FirstOpBlocker {
  std::function<void(size_t)> Hook() {
    return [this](size_t) {
      if (seen.exchange(true))
        return;
      entered.Open();
      release.Wait();
    };
  }
  std::atomic<bool> seen{false};
  Gate entered;
  Gate release;
};

TEST(TransferEngineTest, PostRefusesAtOnceWhenTheQueueIsFull) {
  FirstOpBlocker blocker;
  auto engine = std::make_unique<TransferEngine>(TransferEngineOptions{
      .num_threads = 1, .max_queued_transfers = 2, .on_copy_op = blocker.Hook()});
  Memories memories(*engine);
  CallbackLog log;
  // The thread takes the first transfer and stands in its first copy op.
  ASSERT_TRUE(
      engine->Post(memories.pool_table, {{0}}, memories.store_table, {{0}}, log.Callback(0)).ok());
  blocker.entered.Wait();
  ASSERT_TRUE(
      engine->Post(memories.pool_table, {{1}}, memories.store_table, {{1}}, log.Callback(1)).ok());
  ASSERT_TRUE(
      engine->Post(memories.pool_table, {{2}}, memories.store_table, {{2}}, log.Callback(2)).ok());
  absl::StatusOr<TransferHandle> refused =
      engine->Post(memories.pool_table, {{3}}, memories.store_table, {{3}}, log.Callback(3));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);

  blocker.release.Open();
  log.WaitForCalls(3);
  for (int id : {0, 1, 2})
    EXPECT_EQ(log.Calls(id).at(0).state, TransferState::kDone);
  EXPECT_TRUE(log.Calls(3).empty());  // a refused post has no callback
  // The queue has room again.
  ASSERT_TRUE(
      engine->Post(memories.pool_table, {{3}}, memories.store_table, {{3}}, log.Callback(3)).ok());
  log.WaitForCalls(4);
  for (int32_t b = 0; b < 4; ++b)
    EXPECT_TRUE(memories.StoreBlockMatchesPool(b, b));
}

TEST(TransferEngineTest, ACancelledQueuedTransferNeverRuns) {
  FirstOpBlocker blocker;
  TransferEngine engine({.num_threads = 1, .on_copy_op = blocker.Hook()});
  Memories memories(engine);
  const std::vector<std::byte> store_before = memories.store.store;
  CallbackLog log;
  ASSERT_TRUE(
      engine.Post(memories.pool_table, {{0}}, memories.store_table, {{0}}, log.Callback(0)).ok());
  blocker.entered.Wait();
  absl::StatusOr<TransferHandle> queued =
      engine.Post(memories.pool_table, {{1, 2}}, memories.store_table, {{1, 2}}, log.Callback(1));
  ASSERT_TRUE(queued.ok());
  EXPECT_EQ(engine.Poll(*queued).state, TransferState::kPending);
  engine.Cancel(*queued);
  EXPECT_EQ(engine.Poll(*queued).state, TransferState::kCancelled);
  EXPECT_EQ(engine.Poll(*queued).status.code(), absl::StatusCode::kCancelled);

  blocker.release.Open();
  log.WaitForCalls(2);
  ASSERT_EQ(log.Calls(1).size(), 1u);
  EXPECT_EQ(log.Calls(1)[0].state, TransferState::kCancelled);
  EXPECT_EQ(log.Calls(1)[0].status.code(), absl::StatusCode::kCancelled);
  // Blocks 1 and 2 of the store are as they were.
  EXPECT_TRUE(std::equal(memories.store.store.begin() + memories.layout.block_bytes(),
                         memories.store.store.begin() + 3 * memories.layout.block_bytes(),
                         store_before.begin() + memories.layout.block_bytes()));
  EXPECT_EQ(engine.counters().transfers_cancelled, 1u);
  EXPECT_EQ(engine.counters().transfers_done, 1u);
}

TEST(TransferEngineTest, ARunningTransferStopsBetweenCopyOps) {
  FirstOpBlocker blocker;
  TransferEngine engine({.num_threads = 1, .on_copy_op = blocker.Hook()});
  Memories memories(engine);
  CallbackLog log;
  // Scattered blocks pool -> store: one copy op per segment per block, 4 x 8 = 32 ops.
  absl::StatusOr<TransferHandle> transfer =
      engine.Post(memories.pool_table, {{0, 2, 4, 6, 8, 10, 12, 14}}, memories.store_table,
                  {{0, 2, 4, 6, 8, 10, 12, 14}}, log.Callback(0));
  ASSERT_TRUE(transfer.ok());
  blocker.entered.Wait();
  EXPECT_EQ(engine.Poll(*transfer).state, TransferState::kRunning);
  engine.Cancel(*transfer);
  blocker.release.Open();
  log.WaitForCalls(1);

  EXPECT_EQ(log.Calls(0).at(0).state, TransferState::kCancelled);
  EXPECT_EQ(engine.Poll(*transfer).state, TransferState::kCancelled);
  // The op in flight when Cancel came finished; none after it started.
  EXPECT_EQ(engine.counters().copy_ops, 1u);
  EXPECT_EQ(engine.counters().bytes_moved, memories.layout.segment_bytes(0));
  EXPECT_EQ(engine.counters().transfers_cancelled, 1u);
  // Cancelling a finished transfer changes nothing.
  engine.Cancel(*transfer);
  EXPECT_EQ(engine.Poll(*transfer).state, TransferState::kCancelled);
}

std::string ThreadName() {
  char name[16] = {};
  pthread_getname_np(pthread_self(), name, sizeof(name));
  return name;
}

TEST(TransferEngineTest, EachCallbackRunsOnceOnATransferThread) {
  TransferEngine engine({.num_threads = 3, .thread_name = "kvx-test"});
  Memories memories(engine);
  // One transfer per destination block: transfers on different threads are unordered.
  constexpr int kTransfers = kBlocks;
  base::Mutex mu;
  std::vector<int> calls(kTransfers, 0);
  std::vector<std::string> thread_names;
  CallbackLog log;
  std::vector<TransferHandle> handles;
  for (int i = 0; i < kTransfers; ++i) {
    const int32_t block = i;
    TransferCallback logged = log.Callback(i);
    absl::StatusOr<TransferHandle> handle =
        engine.Post(memories.pool_table, {{block}}, memories.store_table, {{block}},
                    [&, i, logged = std::move(logged)](TransferState state,
                                                       const absl::Status& status) mutable {
                      {
                        base::MutexLock lock(&mu);
                        ++calls[static_cast<size_t>(i)];
                        thread_names.push_back(ThreadName());
                      }
                      logged(state, status);
                    });
    ASSERT_TRUE(handle.ok()) << handle.status();
    handles.push_back(*handle);
  }
  log.WaitForCalls(kTransfers);
  for (int i = 0; i < kTransfers; ++i)
    EXPECT_EQ(engine.Poll(handles[static_cast<size_t>(i)]).state, TransferState::kDone);
  base::MutexLock lock(&mu);
  for (int i = 0; i < kTransfers; ++i)
    EXPECT_EQ(calls[static_cast<size_t>(i)], 1) << "transfer " << i;
  for (const std::string& name : thread_names)
    EXPECT_TRUE(name == "kvx-test-0" || name == "kvx-test-1" || name == "kvx-test-2") << name;
  EXPECT_EQ(engine.counters().transfers_done, static_cast<uint64_t>(kTransfers));
}

TEST(TransferEngineTest, ACallbackMayPostTheNextTransfer) {
  TransferEngine engine({.num_threads = 1});
  Memories memories(engine);
  CallbackLog log;
  TransferCallback second = log.Callback(1);
  ASSERT_TRUE(engine
                  .Post(memories.pool_table, {{0}}, memories.store_table, {{0}},
                        [&](TransferState, const absl::Status&) {
                          EXPECT_TRUE(engine
                                          .Post(memories.store_table, {{0}}, memories.store_table,
                                                {{1}}, std::move(second))
                                          .ok());
                        })
                  .ok());
  log.WaitForCalls(1);
  EXPECT_EQ(log.Calls(1).at(0).state, TransferState::kDone);
  EXPECT_TRUE(memories.StoreBlockMatchesPool(1, 0));
}

TEST(TransferEngineTest, DestructionCancelsQueuedWorkAndStopsRunningWork) {
  // The first transfer stands in its first copy op until the destructor has cancelled the
  // queued ones (Poll shows that at once), then finds the engine shutting down.
  std::vector<TransferHandle> queued;
  std::atomic<TransferEngine*> engine_for_hook{nullptr};
  std::atomic<bool> seen{false};
  Gate entered;
  Gate queued_posted;
  auto hook = [&](size_t) {
    if (seen.exchange(true))
      return;
    entered.Open();
    queued_posted.Wait();
    // Only yields, no sleep: the destructor (on the test thread) cancels these promptly.
    for (const TransferHandle& handle : queued) {
      while (engine_for_hook.load()->Poll(handle).state != TransferState::kCancelled)
        std::this_thread::yield();
    }
  };
  auto engine =
      std::make_unique<TransferEngine>(TransferEngineOptions{.num_threads = 1, .on_copy_op = hook});
  engine_for_hook = engine.get();
  Memories memories(*engine);
  const std::vector<std::byte> store_before = memories.store.store;
  CallbackLog log;
  absl::StatusOr<TransferHandle> running = engine->Post(
      memories.pool_table, {{0, 2, 4, 6}}, memories.store_table, {{0, 2, 4, 6}}, log.Callback(0));
  ASSERT_TRUE(running.ok());
  entered.Wait();
  for (int i = 1; i <= 3; ++i) {
    absl::StatusOr<TransferHandle> handle = engine->Post(
        memories.pool_table, {{10 + i}}, memories.store_table, {{10 + i}}, log.Callback(i));
    ASSERT_TRUE(handle.ok());
    queued.push_back(*handle);
  }
  queued_posted.Open();
  engine.reset();

  // Every callback ran, once, before the destructor returned.
  for (int i = 0; i <= 3; ++i) {
    ASSERT_EQ(log.Calls(i).size(), 1u) << "transfer " << i;
    EXPECT_EQ(log.Calls(i)[0].state, TransferState::kCancelled) << "transfer " << i;
  }
  // Only the first transfer's first op was copied (block 0's first segment).
  std::vector<std::byte> expected = store_before;
  std::span<std::byte> first = memories.pool.Segment(memories.layout, 0, 0);
  std::copy(first.begin(), first.end(), expected.begin());
  EXPECT_EQ(memories.store.store, expected);
}

TEST(TransferEngineTest, ManyThreadsPostConcurrently) {
  constexpr int kPosters = 8;
  constexpr int kPerPoster = 100;
  TransferEngine engine({.num_threads = 4, .max_queued_transfers = kPosters * kPerPoster});
  const KvBlockLayout layout = SmallLayout();
  PoolMemory pool(layout, kBlocks, 1);
  // Each poster writes its own store, so the expected contents do not depend on order.
  std::vector<std::unique_ptr<InterleavedMemory>> stores;
  std::vector<BlockListHandle> store_tables;
  const BlockListHandle pool_table =
      *engine.PrepareBlockList(engine.RegisterRegion(*pool.region), Range(0, kBlocks));
  for (int p = 0; p < kPosters; ++p) {
    stores.push_back(std::make_unique<InterleavedMemory>(layout, kPerPoster, 100 + p));
    store_tables.push_back(*engine.PrepareBlockList(engine.RegisterRegion(*stores.back()->region),
                                                    Range(0, kPerPoster)));
  }
  CallbackLog log;
  std::atomic<int> refused{0};
  std::vector<std::thread> posters;
  for (int p = 0; p < kPosters; ++p) {
    posters.emplace_back([&, p] {
      for (int i = 0; i < kPerPoster; ++i) {
        const int32_t src = (p * 7 + i) % kBlocks;
        absl::StatusOr<TransferHandle> handle =
            engine.Post(pool_table, {{src}}, store_tables[static_cast<size_t>(p)], {{i}},
                        log.Callback(p * kPerPoster + i));
        if (!handle.ok()) {
          refused.fetch_add(1);
          continue;
        }
        engine.Poll(*handle);  // polled while transfer threads finish it
      }
    });
  }
  for (std::thread& poster : posters)
    poster.join();
  EXPECT_EQ(refused.load(), 0);
  log.WaitForCalls(kPosters * kPerPoster);

  for (int p = 0; p < kPosters; ++p) {
    for (int i = 0; i < kPerPoster; ++i) {
      const int32_t src = (p * 7 + i) % kBlocks;
      for (size_t s = 0; s < layout.num_segments(); ++s) {
        std::span<std::byte> a = stores[static_cast<size_t>(p)]->Segment(layout, i, s);
        std::span<std::byte> b = pool.Segment(layout, src, s);
        ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size()), 0) << p << " " << i << " " << s;
      }
    }
  }
  const TransferCounters counters = engine.counters();
  EXPECT_EQ(counters.transfers_done, static_cast<uint64_t>(kPosters * kPerPoster));
  EXPECT_EQ(counters.bytes_moved, kPosters * kPerPoster * layout.block_bytes());
  EXPECT_EQ(counters.copy_ops, kPosters * kPerPoster * layout.num_segments());
}

}  // namespace
}  // namespace switchyard::kvx
