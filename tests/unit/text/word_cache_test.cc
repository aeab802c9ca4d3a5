// The BPE word cache: hits append the cached ids, the capacity bounds it, and concurrent
// inserts and lookups of the same words agree.
#include "text/internal/word_cache.h"

#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace switchyard::text::internal {
namespace {

using ::testing::ElementsAre;

bool Lookup(const WordCache& cache, std::string_view word, std::vector<int32_t>* ids) {
  return cache.Lookup(word, WordCache::Hash(word), ids);
}

void Insert(WordCache* cache, std::string_view word, std::vector<int32_t> ids) {
  cache->Insert(word, WordCache::Hash(word), ids);
}

TEST(WordCacheTest, HitsAppendTheCachedIds) {
  WordCache cache(16);
  std::vector<int32_t> ids = {7};
  EXPECT_FALSE(Lookup(cache, "hello", &ids));
  Insert(&cache, "hello", {1});
  Insert(&cache, "world", {2, 3, 4});
  Insert(&cache, "", {5});
  EXPECT_TRUE(Lookup(cache, "hello", &ids));
  EXPECT_TRUE(Lookup(cache, "world", &ids));
  EXPECT_TRUE(Lookup(cache, "", &ids));
  EXPECT_FALSE(Lookup(cache, "hell", &ids));
  EXPECT_THAT(ids, ElementsAre(7, 1, 2, 3, 4, 5));
}

TEST(WordCacheTest, FirstInsertOfAWordStays) {
  WordCache cache(16);
  Insert(&cache, "a", {1});
  Insert(&cache, "a", {2});
  std::vector<int32_t> ids;
  EXPECT_TRUE(Lookup(cache, "a", &ids));
  EXPECT_THAT(ids, ElementsAre(1));
}

TEST(WordCacheTest, StopsCachingAtCapacity) {
  WordCache cache(4);
  for (int i = 0; i < 100; ++i)
    Insert(&cache, "w" + std::to_string(i), {i});
  int hits = 0;
  for (int i = 0; i < 100; ++i) {
    std::vector<int32_t> ids;
    if (Lookup(cache, "w" + std::to_string(i), &ids)) {
      ++hits;
      EXPECT_THAT(ids, ElementsAre(i));
    }
  }
  EXPECT_EQ(hits, 4);
}

TEST(WordCacheTest, ZeroCapacityCachesNothing) {
  WordCache cache(0);
  Insert(&cache, "a", {1});
  std::vector<int32_t> ids;
  EXPECT_FALSE(Lookup(cache, "a", &ids));
  EXPECT_TRUE(ids.empty());
}

TEST(WordCacheTest, ConcurrentInsertsAndLookupsAgree) {
  // Each word's ids are a function of the word, so every hit can be checked.
  constexpr int kWords = 500;
  auto ids_of = [](int i) { return std::vector<int32_t>{i, i * 3 + 1}; };
  WordCache cache(1 << 10);
  std::vector<int> failures(4, 0);
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&, k] {
      for (int n = 0; n < kWords; ++n) {
        const int i = (n * (k + 1) * 7) % kWords;
        const std::string word = "word" + std::to_string(i);
        std::vector<int32_t> ids;
        if (Lookup(cache, word, &ids)) {
          failures[k] += ids != ids_of(i);
        } else {
          Insert(&cache, word, ids_of(i));
        }
      }
    });
  }
  for (auto& thread : threads)
    thread.join();
  EXPECT_THAT(failures, ElementsAre(0, 0, 0, 0));
  for (int i = 0; i < kWords; ++i) {
    std::vector<int32_t> ids;
    EXPECT_TRUE(Lookup(cache, "word" + std::to_string(i), &ids)) << i;
    EXPECT_EQ(ids, ids_of(i));
  }
}

}  // namespace
}  // namespace switchyard::text::internal
