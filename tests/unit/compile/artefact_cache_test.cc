// ArtefactCache, the front door, on real directories and a real redis-server
// (../kvx/redis_test_server.h): the levels in order with their counters, bad host and Redis
// entries as misses that are recompiled and replaced, level 3 off with one warning when
// Redis is down or hangs (in bounded time, levels 1 and 2 still serving), no level 3
// without a signing key, and threads of one process compiling each key once.
#include "compile/artefact_cache.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "spdlog/sinks/ostream_sink.h"
#include "spdlog/spdlog.h"

#include "../kvx/redis_test_server.h"
#include "base/file.h"
#include "compile_test_support.h"
#include "kvx/redis_connection.h"

namespace switchyard::compile {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

// Collects what the default logger writes while it lives.
class CapturedLog {
 public:
  CapturedLog() : previous_(spdlog::default_logger()) {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out_);
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("captured", sink));
  }
  ~CapturedLog() { spdlog::set_default_logger(previous_); }
  CapturedLog(const CapturedLog&) = delete;
  CapturedLog& operator=(const CapturedLog&) = delete;

  std::string text() const { return out_.str(); }
  int Count(std::string_view needle) const {
    const std::string all = text();
    int n = 0;
    for (size_t at = all.find(needle); at != std::string::npos; at = all.find(needle, at + 1))
      ++n;
    return n;
  }

 private:
  std::ostringstream out_;
  std::shared_ptr<spdlog::logger> previous_;
};

class ArtefactCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    key_file_ = (scratch_.path() / "signing.key").string();
    ASSERT_TRUE(base::WriteFile(key_file_, "test-signing-key-0123456789\n").ok());
  }

  ArtefactCacheOptions Options(const std::string& dir, int redis_port = 0) {
    ArtefactCacheOptions options;
    options.host.root = (scratch_.path() / dir).string();
    options.host.requirements = TestRequirements();
    if (redis_port != 0) {
      RedisCacheOptions redis;
      redis.port = redis_port;
      redis.key_file = key_file_;
      redis.timeout = milliseconds(300);
      options.redis = redis;
    }
    return options;
  }

  std::unique_ptr<ArtefactCache> Open(const std::string& dir, int redis_port = 0) {
    absl::StatusOr<std::unique_ptr<ArtefactCache>> cache =
        ArtefactCache::Open(Options(dir, redis_port));
    EXPECT_TRUE(cache.ok()) << cache.status();
    return *std::move(cache);
  }

  // Looks `key` up, compiling ArtefactBytes(seed) when asked (counted in compiles_).
  ArtefactLookup Get(ArtefactCache& cache, const CacheKey& key, int seed = 1,
                     std::vector<std::string> isa = {"avx2"}) {
    absl::StatusOr<ArtefactLookup> lookup =
        cache.GetOrCompile(key, [&]() -> absl::StatusOr<CompiledArtefact> {
          ++compiles_;
          return CompiledArtefact{ArtefactBytes(seed), isa};
        });
    EXPECT_TRUE(lookup.ok()) << lookup.status();
    if (!lookup.ok())
      return {};
    EXPECT_EQ(*base::ReadFile(lookup->entry->artefact_path()), ArtefactBytes(seed));
    return *std::move(lookup);
  }

  // Sets a Redis value straight, as another (possibly hostile) writer would.
  void PlantInRedis(const std::string& name, std::string_view value) {
    absl::StatusOr<kvx::RedisConnection> connection =
        kvx::RedisConnection::Connect("127.0.0.1", redis_.port(), milliseconds(1000), "test");
    ASSERT_TRUE(connection.ok());
    const std::string_view argv[] = {"SET", name, value};
    ASSERT_TRUE(connection->Command(argv).ok());
  }

  std::string ReadFromRedis(const std::string& name) {
    absl::StatusOr<kvx::RedisConnection> connection =
        kvx::RedisConnection::Connect("127.0.0.1", redis_.port(), milliseconds(1000), "test");
    if (!connection.ok())
      return "";
    const std::string_view argv[] = {"GET", name};
    absl::StatusOr<kvx::RedisReply> reply = connection->Command(argv);
    return reply.ok() ? std::string(kvx::ReplyText(**reply)) : "";
  }

  ScratchDirectory scratch_;
  kvx::RedisTestServer redis_;
  std::string key_file_;
  int compiles_ = 0;
};

TEST_F(ArtefactCacheTest, LevelsInOrder) {
  ASSERT_TRUE(redis_.Start().ok());
  const CacheKey key = SampleKey();
  auto first = Open("a", redis_.port());
  ASSERT_TRUE(first->redis_enabled());
  ArtefactLookup lookup = Get(*first, key);
  EXPECT_EQ(lookup.found_in, CacheLevel::kCompiled);
  EXPECT_EQ(lookup.entry->metadata().key, key.hex);
  EXPECT_EQ(lookup.entry->directory(), first->host().EntryDirectory(key.hex));
  EXPECT_EQ(Get(*first, key).found_in, CacheLevel::kMemory);

  // Another process on this host: the host directory.
  auto second = Open("a", redis_.port());
  EXPECT_EQ(Get(*second, key).found_in, CacheLevel::kHost);
  // Another host: Redis, written into its own host directory.
  auto third = Open("b", redis_.port());
  lookup = Get(*third, key);
  EXPECT_EQ(lookup.found_in, CacheLevel::kRedis);
  EXPECT_EQ(lookup.entry->directory(), third->host().EntryDirectory(key.hex));
  EXPECT_EQ(*base::ReadFile(lookup.entry->directory() + "/cache_key_factors.json"),
            key.FactorsJson() + "\n");
  EXPECT_EQ(compiles_, 1);

  const CacheCounters a = first->counters();
  EXPECT_EQ(a.compiles, 1);
  EXPECT_EQ(a.misses, 1);
  EXPECT_EQ(a.memory_hits, 1);
  EXPECT_EQ(second->counters().host_hits, 1);
  EXPECT_EQ(third->counters().redis_hits, 1);
  EXPECT_EQ(third->counters().compiles, 0);
  EXPECT_EQ(CacheLevelName(CacheLevel::kRedis), "redis");
}

TEST_F(ArtefactCacheTest, BadHostEntriesAreRecompiledAndReplaced) {
  const CacheKey key = SampleKey();
  auto cache = Open("a");
  Get(*cache, key, 1);
  const std::string directory = cache->host().EntryDirectory(key.hex);
  const std::vector<std::function<void()>> damages = {
      [&] { ASSERT_EQ(::truncate((directory + "/artefact.so").c_str(), 10), 0); },
      [&] {
        std::string bytes = *base::ReadFile(directory + "/artefact.so");
        bytes[7] ^= 1;
        ASSERT_TRUE(base::WriteFile(directory + "/artefact.so", bytes).ok());
      },
      [&] { ASSERT_EQ(::unlink((directory + "/metadata.json").c_str()), 0); },
      [&] {
        std::string text = *base::ReadFile(directory + "/metadata.json");
        text.replace(text.find(kTestProjectVersion), kTestProjectVersion.size(), "0.0.0-old");
        ASSERT_TRUE(base::WriteFile(directory + "/metadata.json", text).ok());
      },
  };
  int replaced = 0;
  for (const auto& damage : damages) {
    damage();
    // A fresh process (nothing in memory) finds the bad entry.
    auto next = Open("a");
    const int compiles_before = compiles_;
    EXPECT_EQ(Get(*next, key, 1).found_in, CacheLevel::kCompiled);
    EXPECT_EQ(compiles_, compiles_before + 1);
    EXPECT_EQ(next->counters().corrupt_replaced, 1);
    ++replaced;
    // The replacement is whole.
    auto after = Open("a");
    EXPECT_EQ(Get(*after, key, 1).found_in, CacheLevel::kHost);
  }
  EXPECT_EQ(replaced, 4);
}

TEST_F(ArtefactCacheTest, AnEntryForAFeatureThisCpuLacksIsRecompiled) {
  const CacheKey key = SampleKey();
  {
    auto other_cpu = Options("a");
    other_cpu.host.requirements.has_isa_feature = [](std::string_view) { return true; };
    auto cache = ArtefactCache::Open(other_cpu);
    ASSERT_TRUE(cache.ok());
    Get(**cache, key, 1, {"avx512"});
  }
  auto cache = Open("a");
  const ArtefactLookup lookup = Get(*cache, key, 1, {"avx2"});
  EXPECT_EQ(lookup.found_in, CacheLevel::kCompiled);
  EXPECT_EQ(lookup.entry->metadata().isa_features, std::vector<std::string>{"avx2"});
  EXPECT_EQ(cache->counters().corrupt_replaced, 1);
}

TEST_F(ArtefactCacheTest, BadRedisEntriesAreMissesAndReplaced) {
  ASSERT_TRUE(redis_.Start().ok());
  const CacheKey key = SampleKey();
  const std::string name = "switchyard:compile:" + key.hex;
  {
    auto writer = Open("writer", redis_.port());
    Get(*writer, key, 1);
  }
  const std::string good = ReadFromRedis(name);
  ASSERT_FALSE(good.empty());
  const std::string artefact = ArtefactBytes(1);
  EntryMetadata stale = MetadataFor(key, artefact);
  stale.project_version = "0.0.0-old";
  const std::string signing_key = "test-signing-key-0123456789";
  std::string flipped = good;
  flipped[flipped.size() - 100] ^= 1;
  const std::vector<std::string> bad_values = {
      good.substr(0, good.size() / 2),                          // truncated
      flipped,                                                  // altered
      good.substr(0, good.size() - kRedisEntrySignatureBytes),  // unsigned
      EncodeRedisEntry(MetadataFor(key, artefact), key.FactorsJson(), artefact,
                       "someone-else's-signing-key"),                     // wrong key
      EncodeRedisEntry(stale, key.FactorsJson(), artefact, signing_key),  // stale
      EncodeRedisEntry(MetadataFor(key, artefact, {"avx512"}), key.FactorsJson(), artefact,
                       signing_key),  // wrong ISA
  };
  CapturedLog log;
  int n = 0;
  for (const std::string& bad : bad_values) {
    PlantInRedis(name, bad);
    auto reader = Open("reader" + std::to_string(n++), redis_.port());
    const int compiles_before = compiles_;
    EXPECT_EQ(Get(*reader, key, 1).found_in, CacheLevel::kCompiled);
    EXPECT_EQ(compiles_, compiles_before + 1);
    EXPECT_EQ(reader->counters().corrupt_replaced, 1);
    EXPECT_TRUE(reader->redis_enabled());
    // Replaced by a good entry, which the next host finds.
    auto next = Open("next" + std::to_string(n), redis_.port());
    EXPECT_EQ(Get(*next, key, 1).found_in, CacheLevel::kRedis);
  }
  EXPECT_EQ(log.Count("redis entry"), static_cast<int>(bad_values.size()));
}

TEST_F(ArtefactCacheTest, RedisDownTurnsLevelThreeOffWithOneWarning) {
  const int port = kvx::RedisTestServer::FreePort();
  CapturedLog log;
  const auto start = std::chrono::steady_clock::now();
  auto cache = Open("a", port);
  EXPECT_FALSE(cache->redis_enabled());
  const CacheKey key = SampleKey();
  EXPECT_EQ(Get(*cache, key).found_in, CacheLevel::kCompiled);
  EXPECT_EQ(Get(*cache, key).found_in, CacheLevel::kMemory);
  EXPECT_EQ(Get(*Open("a", port), key).found_in, CacheLevel::kHost);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(cache->counters().redis_errors, 1);
  EXPECT_EQ(log.Count("Redis level is off"), 2);  // once per cache opened
}

TEST_F(ArtefactCacheTest, RedisThatHangsIsTurnedOffInBoundedTime) {
  ASSERT_TRUE(redis_.Start().ok());
  auto cache = Open("a", redis_.port());
  ASSERT_TRUE(cache->redis_enabled());
  redis_.Pause();
  CapturedLog log;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(Get(*cache, SampleKey(1)).found_in, CacheLevel::kCompiled);
  EXPECT_EQ(Get(*cache, SampleKey(2)).found_in, CacheLevel::kCompiled);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  redis_.Resume();
  EXPECT_FALSE(cache->redis_enabled());
  EXPECT_EQ(cache->counters().redis_errors, 1);
  EXPECT_EQ(log.Count("Redis level is off"), 1);
}

TEST_F(ArtefactCacheTest, NoRedisLevelWithoutASigningKey) {
  ArtefactCacheOptions options = Options("a", 6379);
  options.redis->key_file = (scratch_.path() / "missing.key").string();
  EXPECT_TRUE(absl::IsInvalidArgument(ArtefactCache::Open(options).status()));
  ASSERT_TRUE(base::WriteFile(options.redis->key_file, "short\n").ok());
  EXPECT_TRUE(absl::IsInvalidArgument(ArtefactCache::Open(options).status()));
  options.redis->key_file.clear();
  EXPECT_TRUE(absl::IsInvalidArgument(ArtefactCache::Open(options).status()));
}

TEST_F(ArtefactCacheTest, AFailedCompileStoresNothing) {
  auto cache = Open("a");
  const CacheKey key = SampleKey();
  absl::StatusOr<ArtefactLookup> lookup = cache->GetOrCompile(
      key, []() -> absl::StatusOr<CompiledArtefact> { return absl::InternalError("cc died"); });
  EXPECT_EQ(lookup.status(), absl::InternalError("cc died"));
  EXPECT_TRUE(absl::IsNotFound(cache->host().Find(key.hex).status()));
  EXPECT_EQ(Get(*cache, key).found_in, CacheLevel::kCompiled);
}

TEST_F(ArtefactCacheTest, ThreadsOfOneProcessCompileEachKeyOnce) {
  auto cache = Open("a");
  std::atomic<int> compiles{0};
  std::vector<std::thread> threads;
  for (int n = 0; n < 4; ++n) {
    threads.emplace_back([&, n] {
      for (int round = 0; round < 3; ++round) {
        const int tokens = (n + round) % 2;
        absl::StatusOr<ArtefactLookup> lookup =
            cache->GetOrCompile(SampleKey(tokens), [&]() -> absl::StatusOr<CompiledArtefact> {
              compiles.fetch_add(1);
              return CompiledArtefact{ArtefactBytes(tokens), {"avx2"}};
            });
        EXPECT_TRUE(lookup.ok()) << lookup.status();
        if (lookup.ok())
          EXPECT_EQ(*base::ReadFile(lookup->entry->artefact_path()), ArtefactBytes(tokens));
      }
    });
  }
  for (std::thread& thread : threads)
    thread.join();
  EXPECT_EQ(compiles.load(), 2);
  const CacheCounters counters = cache->counters();
  EXPECT_EQ(counters.compiles, 2);
  EXPECT_EQ(counters.memory_hits + counters.host_hits + counters.compiles, 12);
}

TEST_F(ArtefactCacheTest, MemoryLevelIsBoundedAndHoldsItsEntries) {
  ArtefactCacheOptions options = Options("a");
  options.memory_entries = 2;
  auto cache = *ArtefactCache::Open(options);
  for (int tokens = 1; tokens <= 3; ++tokens)
    Get(*cache, SampleKey(tokens));
  // The oldest fell out of memory and is no longer held: eviction may take it, not the others.
  absl::StatusOr<EvictionResult> evicted = cache->host().EvictTo(0);
  ASSERT_TRUE(evicted.ok());
  EXPECT_EQ(evicted->removed_entries, 1);
  EXPECT_EQ(evicted->skipped_in_use, 2);
  EXPECT_EQ(Get(*cache, SampleKey(3)).found_in, CacheLevel::kMemory);
  EXPECT_EQ(Get(*cache, SampleKey(1)).found_in, CacheLevel::kCompiled);
}

}  // namespace
}  // namespace switchyard::compile
