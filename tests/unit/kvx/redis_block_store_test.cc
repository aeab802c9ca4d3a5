// RedisBlockStore against a real redis-server (redis_test_server.h): byte-exact round trips,
// the leading run a read returns, DataLoss for values that are not this key's entry, error
// replies, and a server that dies, hangs or comes back. A second client (hiredis, as another
// process would) plants bad values.
#include "kvx/redis_block_store.h"

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include <hiredis/hiredis.h>

#include "redis_test_server.h"
#include "store_test_support.h"
#include "transfer_test_memory.h"

namespace switchyard::kvx {
namespace {

using Op = RedisBlockStore::Op;
using absl::StatusCode;

constexpr int32_t kBlocks = 8;

std::array<uint8_t, 32> Filled(uint8_t value) {
  std::array<uint8_t, 32> bytes;
  bytes.fill(value);
  return bytes;
}

KvBlockKey K(uint8_t n) {
  KvBlockKey key = Filled(0xa5);
  key[31] = n;
  return key;
}

// A connection of the test's own to the server.
class RedisClient {
 public:
  explicit RedisClient(int port) : context_(redisConnect("127.0.0.1", port)) {
    EXPECT_TRUE(context_ != nullptr && context_->err == 0);
  }
  ~RedisClient() { redisFree(context_); }
  RedisClient(const RedisClient&) = delete;
  RedisClient& operator=(const RedisClient&) = delete;

  // The value under `key`, empty when there is none.
  std::string Get(const std::string& key) {
    auto* reply =
        static_cast<redisReply*>(redisCommand(context_, "GET %b", key.data(), key.size()));
    EXPECT_NE(reply, nullptr);
    std::string value;
    if (reply != nullptr && reply->type == REDIS_REPLY_STRING)
      value.assign(reply->str, reply->len);
    freeReplyObject(reply);
    return value;
  }

  void Set(const std::string& key, const std::string& value) {
    auto* reply = static_cast<redisReply*>(
        redisCommand(context_, "SET %b %b", key.data(), key.size(), value.data(), value.size()));
    EXPECT_TRUE(reply != nullptr && reply->type == REDIS_REPLY_STATUS);
    freeReplyObject(reply);
  }

  void ConfigSet(const char* name, const char* value) {
    auto* reply = static_cast<redisReply*>(redisCommand(context_, "CONFIG SET %s %s", name, value));
    EXPECT_TRUE(reply != nullptr && reply->type == REDIS_REPLY_STATUS);
    freeReplyObject(reply);
  }

 private:
  redisContext* context_;
};

class RedisBlockStoreTest : public ::testing::Test {
 protected:
  RedisBlockStoreTest()
      : layout_(*KvBlockLayout::ForKvCache(2, 4, 2, 4, 2)), pool_(layout_, kBlocks, /*seed=*/11) {}

  void SetUp() override {
    const absl::Status started = server_.Start();
    ASSERT_TRUE(started.ok()) << started;
  }

  std::unique_ptr<RedisBlockStore> Open(
      const std::array<uint8_t, 32>& compatibility = Filled(1),
      std::chrono::milliseconds timeout = std::chrono::seconds(1)) {
    absl::StatusOr<std::unique_ptr<RedisBlockStore>> store =
        RedisBlockStore::Open({.port = server_.port(),
                               .key_prefix = "test:kv:",
                               .compatibility = compatibility,
                               .timeout = timeout},
                              *pool_.region);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? std::move(*store) : nullptr;
  }

  std::vector<std::byte> Bytes(int32_t block) { return pool_.BlockBytes(layout_, block); }

  RedisTestServer server_;
  KvBlockLayout layout_;
  PoolMemory pool_;
};

TEST(RedisBlockStoreOpenTest, OpenWithoutAServerIsUnavailable) {
  const KvBlockLayout layout = *KvBlockLayout::ForKvCache(1, 4, 1, 4, 2);
  PoolMemory pool(layout, 2, /*seed=*/1);
  absl::StatusOr<std::unique_ptr<RedisBlockStore>> store = RedisBlockStore::Open(
      {.port = RedisTestServer::FreePort(), .timeout = std::chrono::milliseconds(500)},
      *pool.region);
  EXPECT_EQ(store.status().code(), StatusCode::kUnavailable) << store.status();
}

TEST_F(RedisBlockStoreTest, WrittenBlocksReadBackByteExactIntoOtherBlocks) {
  std::unique_ptr<RedisBlockStore> store = Open();
  ASSERT_NE(store, nullptr);
  const std::vector<std::byte> one = Bytes(1);
  const std::vector<std::byte> five = Bytes(5);
  EXPECT_EQ(Codes(Write(*store, {{K(1), 1}, {K(5), 5}})),
            (std::vector{StatusCode::kOk, StatusCode::kOk}));
  // One self-checking entry per key, under the prefix.
  EXPECT_EQ(store->KeyName(K(1)),
            "test:kv:a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a501");
  RedisClient client(server_.port());
  EXPECT_EQ(client.Get(store->KeyName(K(1))).size(),
            kKvBlockEntryHeaderBytes + layout_.block_bytes());
  ASSERT_NE(Bytes(2), five);
  ASSERT_NE(Bytes(7), one);

  EXPECT_EQ(Codes(Read(*store, {{K(5), 2}, {K(1), 7}})),
            (std::vector{StatusCode::kOk, StatusCode::kOk}));
  EXPECT_EQ(Bytes(2), five);
  EXPECT_EQ(Bytes(7), one);
}

TEST_F(RedisBlockStoreTest, AReadStopsAtTheFirstMiss) {
  std::unique_ptr<RedisBlockStore> store = Open();
  ASSERT_NE(store, nullptr);
  ASSERT_EQ(Codes(Write(*store, {{K(1), 1}, {K(3), 3}})),
            (std::vector{StatusCode::kOk, StatusCode::kOk}));
  const std::vector<std::byte> untouched = Bytes(6);
  EXPECT_EQ(Codes(Read(*store, {{K(1), 5}, {K(2), 4}, {K(3), 6}})),
            (std::vector{StatusCode::kOk, StatusCode::kNotFound, StatusCode::kNotFound}));
  EXPECT_EQ(Bytes(5), Bytes(1));
  EXPECT_EQ(Bytes(6), untouched);  // K(3) is there, but past the miss
  EXPECT_EQ(Codes(Read(*store, {{K(2), 4}, {K(1), 5}})),
            (std::vector{StatusCode::kNotFound, StatusCode::kNotFound}));
  // The connection stayed in step: the next batch reads what it asks for.
  EXPECT_EQ(Codes(Read(*store, {{K(3), 6}})), std::vector{StatusCode::kOk});
  EXPECT_EQ(Bytes(6), Bytes(3));
}

TEST_F(RedisBlockStoreTest, AValueThatIsNotTheKeysEntryIsDataLoss) {
  std::unique_ptr<RedisBlockStore> store = Open();
  ASSERT_NE(store, nullptr);
  ASSERT_EQ(Codes(Write(*store, {{K(1), 1}, {K(2), 2}, {K(3), 3}, {K(4), 4}})),
            std::vector<StatusCode>(4, StatusCode::kOk));
  RedisClient client(server_.port());
  client.Set(store->KeyName(K(2)), "garbage");
  std::string flipped = client.Get(store->KeyName(K(3)));
  flipped.back() ^= 0x01;
  client.Set(store->KeyName(K(3)), flipped);
  client.Set(store->KeyName(K(4)), client.Get(store->KeyName(K(1))));  // another key's entry

  EXPECT_EQ(Codes(Read(*store, {{K(1), 5}, {K(2), 6}, {K(1), 7}})),
            (std::vector{StatusCode::kOk, StatusCode::kDataLoss, StatusCode::kDataLoss}));
  for (uint8_t n : {2, 3, 4}) {
    const std::vector<absl::Status> results = Read(*store, {{K(n), 6}});
    ASSERT_EQ(results.size(), 1u);
    EXPECT_EQ(results[0].code(), StatusCode::kDataLoss) << int{n} << ": " << results[0];
    EXPECT_NE(results[0].message().find(store->KeyName(K(n))), std::string::npos) << results[0];
  }
}

TEST_F(RedisBlockStoreTest, AnEntryWrittenForOtherKvIsDataLoss) {
  std::unique_ptr<RedisBlockStore> writer = Open(Filled(1));
  std::unique_ptr<RedisBlockStore> other = Open(Filled(2));
  ASSERT_NE(writer, nullptr);
  ASSERT_NE(other, nullptr);
  ASSERT_EQ(Codes(Write(*writer, {{K(1), 1}})), std::vector{StatusCode::kOk});
  // The same prefix here, so that only the digest in the entry tells them apart.
  EXPECT_EQ(Codes(Read(*other, {{K(1), 6}})), std::vector{StatusCode::kDataLoss});
  EXPECT_EQ(Codes(Read(*writer, {{K(1), 6}})), std::vector{StatusCode::kOk});
}

TEST_F(RedisBlockStoreTest, AnErrorReplyIsInternalAndKeepsTheConnection) {
  std::unique_ptr<RedisBlockStore> store = Open();
  ASSERT_NE(store, nullptr);
  ASSERT_EQ(Codes(Write(*store, {{K(1), 1}})), std::vector{StatusCode::kOk});
  RedisClient client(server_.port());
  client.ConfigSet("maxmemory", "1");  // with the default noeviction, every SET fails
  EXPECT_EQ(Codes(Write(*store, {{K(2), 2}, {K(3), 3}})),
            (std::vector{StatusCode::kInternal, StatusCode::kInternal}));
  EXPECT_EQ(Codes(Read(*store, {{K(1), 6}})), std::vector{StatusCode::kOk});
  client.ConfigSet("maxmemory", "0");
  EXPECT_EQ(Codes(Write(*store, {{K(2), 2}})), std::vector{StatusCode::kOk});
}

TEST_F(RedisBlockStoreTest, AKilledServerIsUnavailableUntilItComesBack) {
  std::unique_ptr<RedisBlockStore> store = Open();
  ASSERT_NE(store, nullptr);
  ASSERT_EQ(Codes(Write(*store, {{K(1), 1}})), std::vector{StatusCode::kOk});
  const int port = server_.port();
  server_.Kill();
  // On the connection made before, then on new ones, refused.
  EXPECT_EQ(Codes(Read(*store, {{K(1), 6}, {K(2), 7}})),
            (std::vector{StatusCode::kUnavailable, StatusCode::kUnavailable}));
  EXPECT_EQ(Codes(Write(*store, {{K(2), 2}})), std::vector{StatusCode::kUnavailable});
  EXPECT_EQ(Codes(Read(*store, {{K(1), 6}})), std::vector{StatusCode::kUnavailable});

  const absl::Status restarted = server_.Start(port);
  ASSERT_TRUE(restarted.ok()) << restarted;
  // A new connection; the new server holds nothing of the old one's.
  EXPECT_EQ(Codes(Read(*store, {{K(1), 6}})), std::vector{StatusCode::kNotFound});
  EXPECT_EQ(Codes(Write(*store, {{K(2), 2}})), std::vector{StatusCode::kOk});
  EXPECT_EQ(Codes(Read(*store, {{K(2), 6}})), std::vector{StatusCode::kOk});
  EXPECT_EQ(Bytes(6), Bytes(2));
}

TEST_F(RedisBlockStoreTest, TheFirstBatchAfterARestartRetriesOnANewConnection) {
  std::unique_ptr<RedisBlockStore> store = Open();
  ASSERT_NE(store, nullptr);
  // A pooled connection, made before the restart.
  ASSERT_EQ(Codes(Write(*store, {{K(1), 1}})), std::vector{StatusCode::kOk});
  const int port = server_.port();
  server_.Kill();
  const absl::Status restarted = server_.Start(port);
  ASSERT_TRUE(restarted.ok()) << restarted;
  // The stale connection fails before any reply; the batch runs again on a new one.
  EXPECT_EQ(Codes(Read(*store, {{K(1), 6}})), std::vector{StatusCode::kNotFound});
  EXPECT_EQ(Codes(Write(*store, {{K(2), 2}})), std::vector{StatusCode::kOk});
  EXPECT_EQ(Codes(Read(*store, {{K(2), 6}})), std::vector{StatusCode::kOk});
  EXPECT_EQ(Bytes(6), Bytes(2));
}

TEST_F(RedisBlockStoreTest, ABatchToAServerThatDiedIsUnavailableNotSigpipe) {
  // Blocks of 2 MiB, so that a batch takes many writes: those after the dead server's reset
  // would raise SIGPIPE, which kills the process unless the store keeps it off.
  const KvBlockLayout big = *KvBlockLayout::FromSegments({size_t{1} << 20, size_t{1} << 20});
  PoolMemory pool(big, 4, /*seed=*/13);
  absl::StatusOr<std::unique_ptr<RedisBlockStore>> store =
      RedisBlockStore::Open({.port = server_.port()}, *pool.region);
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_EQ(Codes(Write(**store, {{K(1), 1}})), std::vector{StatusCode::kOk});
  server_.Kill();
  EXPECT_EQ(Codes(Write(**store, {{K(0), 0}, {K(1), 1}, {K(2), 2}, {K(3), 3}})),
            std::vector<StatusCode>(4, StatusCode::kUnavailable));
}

TEST_F(RedisBlockStoreTest, AHungServerIsUnavailableAfterTheTimeout) {
  std::unique_ptr<RedisBlockStore> store = Open(Filled(1), std::chrono::milliseconds(200));
  ASSERT_NE(store, nullptr);
  ASSERT_EQ(Codes(Write(*store, {{K(1), 1}})), std::vector{StatusCode::kOk});
  server_.Pause();
  const auto start = std::chrono::steady_clock::now();
  // On the connection made before, then on a new one (the kernel still accepts it).
  EXPECT_EQ(Codes(Read(*store, {{K(1), 6}, {K(2), 7}})),
            (std::vector{StatusCode::kUnavailable, StatusCode::kUnavailable}));
  EXPECT_EQ(Codes(Write(*store, {{K(2), 2}})), std::vector{StatusCode::kUnavailable});
  // Bounded by the timeout, not by the server: a loose bound, to catch a hang only.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  server_.Resume();
  EXPECT_EQ(Codes(Read(*store, {{K(1), 6}})), std::vector{StatusCode::kOk});
  EXPECT_EQ(Bytes(6), Bytes(1));
}

TEST_F(RedisBlockStoreTest, EveryCallbackRunsWhenTheStoreIsDestroyedRightAfterPosting) {
  std::unique_ptr<RedisBlockStore> store = Open();
  ASSERT_NE(store, nullptr);
  std::vector<std::shared_ptr<BatchResult>> writes, reads;
  for (int32_t i = 0; i < kBlocks; ++i) {
    auto [write, write_done] = BatchResult::Make();
    store->Write({{K(static_cast<uint8_t>(i)), i}}, std::move(write_done));
    writes.push_back(write);
    auto [read, read_done] = BatchResult::Make();
    store->Read({{K(static_cast<uint8_t>(100 + i)), i}}, std::move(read_done));
    reads.push_back(read);
  }
  store.reset();
  for (const std::shared_ptr<BatchResult>& write : writes) {
    ASSERT_TRUE(write->done());
    EXPECT_EQ(Codes(write->Wait()), std::vector{StatusCode::kOk});
  }
  for (const std::shared_ptr<BatchResult>& read : reads) {
    ASSERT_TRUE(read->done());
    EXPECT_EQ(Codes(read->Wait()), std::vector{StatusCode::kNotFound});
  }
}

}  // namespace
}  // namespace switchyard::kvx
