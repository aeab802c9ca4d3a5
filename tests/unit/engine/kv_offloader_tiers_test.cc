// KvOffloader's disk and Redis tiers: blocks the one-block host tier evicts load from disk
// byte-exact, a corrupt disk entry fails its load and leaves the index, the "DISK" events and
// stats; two engines on two pools share blocks through one redis-server when their KV
// compatibility agrees and only then, and a load whose Redis part fails keeps its local part.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "gtest/gtest.h"

#include "../kvx/redis_test_server.h"
#include "../kvx/store_test_support.h"
#include "engine/kv_offloader.h"
#include "kv_offloader_test_support.h"

namespace switchyard::engine {
namespace {

namespace fs = std::filesystem;
using ReleasedBlock = KvCacheManager::ReleasedBlock;

constexpr int32_t kBlockSize = 4;
constexpr int32_t kPoolBlocks = 8;

kvx::KvCompatibility Compatibility(const std::string& model_fingerprint) {
  return {.model_fingerprint = model_fingerprint,
          .dtype = "f16",
          .num_layers = 2,
          .kv_heads = 2,
          .head_dim = 8,
          .block_size = kBlockSize};
}

// The events as "<stored|removed> <medium> <n>" for blocks H(n), sorted: tiers finish in
// any order.
std::multiset<std::string> Describe(const std::vector<kvx::KvCacheEvent>& events) {
  const auto name = [](const kvx::EventHash& hash) {
    for (int n = 0; n < 256; ++n) {
      if (H(static_cast<uint8_t>(n)).event_hash() == hash)
        return std::to_string(n);
    }
    return std::string("?");
  };
  std::multiset<std::string> described;
  for (const kvx::KvCacheEvent& event : events) {
    if (const auto* stored = std::get_if<kvx::BlockStored>(&event)) {
      for (const kvx::EventHash& hash : stored->block_hashes)
        described.insert("stored " + stored->medium.value_or("") + " " + name(hash));
    } else if (const auto* removed = std::get_if<kvx::BlockRemoved>(&event)) {
      for (const kvx::EventHash& hash : removed->block_hashes)
        described.insert("removed " + removed->medium.value_or("") + " " + name(hash));
    }
  }
  return described;
}

// One engine's pool and its offloader.
class Engine {
 public:
  Engine(const kvx::KvBlockLayout& layout, uint32_t seed)
      : layout_(layout), pool_(layout, kPoolBlocks, seed) {}

  absl::Status Start(const KvOffloadOptions& options,
                     const kvx::KvCompatibility& compatibility = Compatibility("m")) {
    absl::StatusOr<std::unique_ptr<KvOffloader>> offloader =
        KvOffloader::Start(options, *pool_.region, kBlockSize, compatibility, wakes_.Callback());
    if (!offloader.ok())
      return offloader.status();
    offloader_ = std::move(*offloader);
    return absl::OkStatus();
  }

  KvOffloader* operator->() { return offloader_.get(); }

  // Waits for `jobs` more started jobs (one per tier a StartStores posts to, one per part
  // of a load) and collects what has finished.
  KvOffloader::Finished Finish(int64_t jobs) {
    num_jobs_ += jobs;
    EXPECT_TRUE(wakes_.WaitFor(num_jobs_));
    return offloader_->TakeFinished();
  }

  // Looks each block up once and stores them in the `tiers` tiers, which all take them.
  void Store(const std::vector<ReleasedBlock>& released, int64_t tiers) {
    std::vector<BlockHash> hashes;
    std::vector<BlockId> blocks;
    for (const ReleasedBlock& r : released) {
      hashes.push_back(r.hash);
      blocks.push_back(r.block);
    }
    offloader_->Lookup(hashes, static_cast<int32_t>(hashes.size()));
    std::vector<BlockId> reading;
    for (int64_t t = 0; t < tiers; ++t)
      reading.insert(reading.end(), blocks.begin(), blocks.end());
    EXPECT_EQ(offloader_->StartStores(released), reading);
    std::vector<BlockId> unpinned = Finish(tiers).unpin;
    std::sort(unpinned.begin(), unpinned.end());
    std::sort(reading.begin(), reading.end());
    EXPECT_EQ(unpinned, reading);
  }

  // Starts a load and returns its outcome, once its `parts` have finished.
  int32_t Load(SeqId seq, const std::vector<BlockHash>& hashes, const std::vector<BlockId>& blocks,
               int32_t num_remote, int64_t parts) {
    if (!offloader_->StartLoad(seq, hashes, blocks, num_remote)) {
      ADD_FAILURE() << "StartLoad refused";
      return -1;
    }
    const KvOffloader::Finished finished = Finish(parts);
    EXPECT_TRUE(finished.unpin.empty());
    if (finished.loads.size() != 1 || finished.loads[0].seq != seq) {
      ADD_FAILURE() << "not one load of seq " << seq;
      return -1;
    }
    return finished.loads[0].num_loaded;
  }

  std::vector<std::byte> Bytes(BlockId block) { return pool_.BlockBytes(layout_, block); }
  void Overwrite(BlockId block, uint32_t seed) { OverwriteBlock(pool_, layout_, block, seed); }

 private:
  const kvx::KvBlockLayout layout_;
  kvx::PoolMemory pool_;
  WakeCounter wakes_;
  int64_t num_jobs_ = 0;
  // Last: destroyed first, while the pool and the wake counter still exist.
  std::unique_ptr<KvOffloader> offloader_;
};

class KvOffloaderTiersTest : public ::testing::Test {
 protected:
  KvOffloaderTiersTest() : layout_(*kvx::KvBlockLayout::ForKvCache(2, kBlockSize, 2, 8, 2)) {}

  int64_t block_bytes() const { return static_cast<int64_t>(layout_.block_bytes()); }

  // A host tier of one block, so that the blocks it evicts live on in the other tiers.
  KvOffloadOptions WithDisk(int64_t disk_blocks = 4) const {
    return {.capacity_bytes = block_bytes(),
            .disk_path = scratch_.path().string(),
            .disk_capacity_bytes = disk_blocks * block_bytes()};
  }

  KvOffloadOptions WithRedis(int64_t host_blocks) const {
    return {.capacity_bytes = host_blocks * block_bytes(),
            .redis_host = "127.0.0.1",
            .redis_port = redis_.port()};
  }

  void StartRedis() {
    const absl::Status started = redis_.Start();
    ASSERT_TRUE(started.ok()) << started;
  }

  // Every entry file of the disk tiers under the scratch directory (one per test).
  std::vector<fs::path> DiskEntries() const {
    std::vector<fs::path> entries;
    for (const fs::directory_entry& entry : fs::recursive_directory_iterator(scratch_.path())) {
      if (entry.path().extension() == ".kv")
        entries.push_back(entry.path());
    }
    return entries;
  }

  kvx::ScratchDirectory scratch_;
  kvx::RedisTestServer redis_;
  kvx::KvBlockLayout layout_;
};

TEST_F(KvOffloaderTiersTest, BlocksTheHostTierEvictsLoadFromDisk) {
  Engine engine(layout_, /*seed=*/7);
  ASSERT_TRUE(engine.Start(WithDisk()).ok());
  const std::vector<std::byte> first = engine.Bytes(0);
  const std::vector<std::byte> second = engine.Bytes(1);
  engine.Store({{0, H(1)}}, /*tiers=*/2);
  EXPECT_EQ(Describe(engine->TakeEvents()),
            (std::multiset<std::string>{"stored CPU 1", "stored DISK 1"}));
  engine.Store({{1, H(2)}}, /*tiers=*/2);  // the host tier makes room: H(1) is on disk only
  EXPECT_EQ(Describe(engine->TakeEvents()),
            (std::multiset<std::string>{"removed CPU 1", "stored CPU 2", "stored DISK 2"}));
  EXPECT_EQ(DiskEntries().size(), 2u);

  engine.Overwrite(0, 100);
  engine.Overwrite(1, 200);
  const KvOffloader::LookupResult found = engine->Lookup(std::vector{H(1), H(2), H(3)}, 0);
  EXPECT_EQ(found.local, 2);
  EXPECT_EQ(found.remote, 0);
  // H(1) from disk, H(2) from the host tier.
  EXPECT_EQ(engine.Load(7, {H(1), H(2)}, {5, 6}, 0, /*parts=*/2), 2);
  EXPECT_EQ(engine.Bytes(5), first);
  EXPECT_EQ(engine.Bytes(6), second);
  EXPECT_TRUE(engine->TakeEvents().empty());

  const std::vector<KvTierStats> stats = engine->stats();
  ASSERT_EQ(stats.size(), 2u);
  const KvTierStats& disk = stats[1];
  EXPECT_EQ(std::string(disk.medium), kvx::kMediumDisk);
  EXPECT_EQ(disk.capacity_blocks, 4);
  EXPECT_EQ(disk.used_blocks, 2);
  EXPECT_EQ(disk.block_bytes, block_bytes());
  EXPECT_EQ(disk.stored_blocks, 2);
  EXPECT_EQ(disk.store_bytes, 2 * block_bytes());
  EXPECT_EQ(disk.evicted_blocks, 0);
  EXPECT_EQ(disk.query_tokens, 3 * kBlockSize);
  EXPECT_EQ(disk.hit_tokens, kBlockSize);
  EXPECT_EQ(disk.load_bytes, block_bytes());
  EXPECT_EQ(disk.loads_done, 1);
  EXPECT_EQ(disk.loads_failed, 0);
  EXPECT_EQ(stats[0].hit_tokens, kBlockSize);
  EXPECT_EQ(stats[0].loads_done, 1);
  EXPECT_EQ(stats[0].evicted_blocks, 1);
}

TEST_F(KvOffloaderTiersTest, AFullDiskTierEvictsItsLeastRecentlyUsedBlock) {
  Engine engine(layout_, /*seed=*/7);
  ASSERT_TRUE(engine.Start(WithDisk(/*disk_blocks=*/2)).ok());
  engine.Store({{0, H(1)}}, 2);
  engine.Store({{1, H(2)}}, 2);
  engine->TakeEvents();
  engine.Store({{2, H(3)}}, 2);
  EXPECT_EQ(Describe(engine->TakeEvents()),
            (std::multiset<std::string>{"removed CPU 2", "removed DISK 1", "stored CPU 3",
                                        "stored DISK 3"}));
  EXPECT_EQ(engine->Lookup(std::vector{H(1)}, 0).local, 0);
  EXPECT_EQ(engine->Lookup(std::vector{H(2)}, 0).local, 1);
  EXPECT_EQ(engine->stats()[1].evicted_blocks, 1);
  EXPECT_EQ(engine->stats()[1].used_blocks, 2);
}

TEST_F(KvOffloaderTiersTest, ACorruptDiskEntryFailsItsLoadAndIsDropped) {
  Engine engine(layout_, /*seed=*/7);
  ASSERT_TRUE(engine.Start(WithDisk()).ok());
  engine.Store({{0, H(1)}}, 2);
  engine.Store({{1, H(2)}}, 2);
  engine->TakeEvents();
  for (const fs::path& entry : DiskEntries()) {
    std::fstream file(entry, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(-1, std::ios::end);
    file.put('\x7f');
  }

  ASSERT_EQ(engine->Lookup(std::vector{H(1)}, 0).local, 1);
  EXPECT_EQ(engine.Load(7, {H(1)}, {5}, 0, /*parts=*/1), 0);
  EXPECT_EQ(Describe(engine->TakeEvents()), std::multiset<std::string>{"removed DISK 1"});
  EXPECT_EQ(engine->Lookup(std::vector{H(1)}, 0).local, 0);
  KvTierStats disk = engine->stats()[1];
  EXPECT_EQ(disk.loads_failed, 1);
  EXPECT_EQ(disk.loads_done, 0);
  EXPECT_EQ(disk.hit_tokens, 0);
  EXPECT_EQ(disk.used_blocks, 1);

  // H(2) still loads from the host tier, which holds it intact.
  EXPECT_EQ(engine.Load(8, {H(2)}, {6}, 0, /*parts=*/1), 1);
  // The freed slot takes H(1) again.
  engine.Store({{0, H(1)}}, 2);
  disk = engine->stats()[1];
  EXPECT_EQ(disk.used_blocks, 2);
  EXPECT_EQ(disk.evicted_blocks, 0);
}

TEST_F(KvOffloaderTiersTest, ALoadWithACorruptDiskPartLoadsNothing) {
  Engine engine(layout_, /*seed=*/7);
  ASSERT_TRUE(engine.Start(WithDisk()).ok());
  engine.Store({{0, H(1)}}, 2);
  engine.Store({{1, H(2)}}, 2);
  for (const fs::path& entry : DiskEntries())
    fs::resize_file(entry, 10);

  // H(1) from disk fails; H(2) from the host tier copies, but the prompt is computed.
  EXPECT_EQ(engine.Load(7, {H(1), H(2)}, {5, 6}, 0, /*parts=*/2), 0);
  const std::vector<KvTierStats> stats = engine->stats();
  EXPECT_EQ(stats[0].loads_failed, 1);
  EXPECT_EQ(stats[1].loads_failed, 1);
  EXPECT_EQ(stats[0].loads_done + stats[1].loads_done, 0);
  EXPECT_EQ(stats[0].hit_tokens + stats[1].hit_tokens, 0);
}

TEST_F(KvOffloaderTiersTest, StartRefusesADiskTierItCannotUse) {
  Engine engine(layout_, /*seed=*/7);
  KvOffloadOptions options = WithDisk();
  options.disk_capacity_bytes = block_bytes() - 1;
  EXPECT_EQ(engine.Start(options).code(), absl::StatusCode::kInvalidArgument);
  std::ofstream(scratch_.path() / "file") << "not a directory";
  options = WithDisk();
  options.disk_path = (scratch_.path() / "file").string();
  EXPECT_FALSE(engine.Start(options).ok());
}

TEST_F(KvOffloaderTiersTest, ABlockOneEngineStoresInRedisLoadsIntoAnother) {
  StartRedis();
  Engine writer(layout_, /*seed=*/7), reader(layout_, /*seed=*/8);
  ASSERT_TRUE(writer.Start(WithRedis(2)).ok());
  ASSERT_TRUE(reader.Start(WithRedis(2)).ok());
  writer.Store({{0, H(1)}, {1, H(2)}}, /*tiers=*/2);
  // Redis, shared and evicting on its own, publishes no events.
  EXPECT_EQ(Describe(writer->TakeEvents()),
            (std::multiset<std::string>{"stored CPU 1", "stored CPU 2"}));
  const KvTierStats written = writer->stats()[1];
  EXPECT_EQ(std::string(written.medium), kvx::kMediumRedis);
  EXPECT_EQ(written.stored_blocks, 2);
  EXPECT_EQ(written.store_bytes, 2 * block_bytes());
  EXPECT_EQ(written.capacity_blocks, 0);
  EXPECT_EQ(written.used_blocks, 0);

  const std::vector<BlockHash> prompt = {H(1), H(2), H(3)};
  const KvOffloader::LookupResult found = reader->Lookup(prompt, 0);
  EXPECT_EQ(found.local, 0);
  EXPECT_EQ(found.remote, 3);
  ASSERT_NE(reader.Bytes(5), writer.Bytes(0));
  // Redis holds the leading two.
  EXPECT_EQ(reader.Load(9, prompt, {5, 6, 7}, 3, /*parts=*/1), 2);
  EXPECT_EQ(reader.Bytes(5), writer.Bytes(0));
  EXPECT_EQ(reader.Bytes(6), writer.Bytes(1));
  EXPECT_TRUE(reader->TakeEvents().empty());
  const KvTierStats redis = reader->stats()[1];
  EXPECT_EQ(redis.query_tokens, 3 * kBlockSize);
  EXPECT_EQ(redis.hit_tokens, 2 * kBlockSize);
  EXPECT_EQ(redis.load_bytes, 2 * block_bytes());
  EXPECT_EQ(redis.loads_done, 1);
  EXPECT_EQ(redis.loads_failed, 0);  // H(3)'s miss ends the run; it is no failure
}

TEST_F(KvOffloaderTiersTest, AnEngineOfAnotherModelFindsNothingInRedis) {
  StartRedis();
  Engine writer(layout_, /*seed=*/7), reader(layout_, /*seed=*/8);
  ASSERT_TRUE(writer.Start(WithRedis(2), Compatibility("model-a")).ok());
  ASSERT_TRUE(reader.Start(WithRedis(2), Compatibility("model-b")).ok());
  writer.Store({{0, H(1)}}, 2);
  const std::vector<std::byte> before = reader.Bytes(5);
  EXPECT_EQ(reader.Load(9, {H(1)}, {5}, 1, /*parts=*/1), 0);
  EXPECT_EQ(reader.Bytes(5), before);
  const KvTierStats redis = reader->stats()[1];
  EXPECT_EQ(redis.loads_done + redis.loads_failed, 0);  // a miss: another key
  EXPECT_EQ(redis.hit_tokens, 0);
}

TEST_F(KvOffloaderTiersTest, ALoadWhoseRedisPartFailsKeepsItsLocalPart) {
  StartRedis();
  Engine engine(layout_, /*seed=*/7);
  ASSERT_TRUE(engine.Start(WithRedis(1)).ok());
  const std::vector<std::byte> first = engine.Bytes(0);
  const std::vector<std::byte> second = engine.Bytes(1);
  engine.Store({{0, H(1)}}, 2);
  engine.Store({{1, H(2)}}, 2);  // the host tier keeps H(2) only
  const std::vector<BlockHash> prompt = {H(2), H(1)};
  const KvOffloader::LookupResult found = engine->Lookup(prompt, 0);
  EXPECT_EQ(found.local, 1);
  EXPECT_EQ(found.remote, 1);

  EXPECT_EQ(engine.Load(7, prompt, {5, 6}, 1, /*parts=*/2), 2);
  EXPECT_EQ(engine.Bytes(5), second);
  EXPECT_EQ(engine.Bytes(6), first);

  redis_.Kill();
  engine.Overwrite(5, 300);
  EXPECT_EQ(engine.Load(8, prompt, {5, 6}, 1, /*parts=*/2), 1);
  EXPECT_EQ(engine.Bytes(5), second);
  const std::vector<KvTierStats> stats = engine->stats();
  EXPECT_EQ(stats[1].loads_done, 1);
  EXPECT_EQ(stats[1].loads_failed, 1);
  EXPECT_EQ(stats[1].hit_tokens, kBlockSize);
  EXPECT_EQ(stats[0].loads_done, 2);
  EXPECT_EQ(stats[0].loads_failed, 0);

  // A store while Redis is away still unpins its blocks and stores in the host tier.
  engine.Store({{2, H(3)}}, 2);
  EXPECT_EQ(engine->stats()[1].stored_blocks, 2);
  EXPECT_EQ(engine->Lookup(std::vector{H(3)}, 0).local, 1);
}

TEST_F(KvOffloaderTiersTest, StartWithoutRedisIsUnavailable) {
  Engine engine(layout_, /*seed=*/7);
  KvOffloadOptions options = {.capacity_bytes = block_bytes(),
                              .redis_host = "127.0.0.1",
                              .redis_port = kvx::RedisTestServer::FreePort()};
  EXPECT_EQ(engine.Start(options).code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace switchyard::engine
