// HostCache on real directories: entries stored whole and found checked, dot-named and
// foreign names never read, a lost rename race keeping the winner, every kind of bad entry
// a DataLoss that Remove clears, and LRU eviction under the size cap that skips entries a
// reader holds.
#include "compile/host_cache.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "base/file.h"
#include "compile_test_support.h"

namespace switchyard::compile {
namespace {

namespace fs = std::filesystem;

class HostCacheTest : public ::testing::Test {
 protected:
  std::unique_ptr<HostCache> OpenCache(uint64_t max_bytes = uint64_t{1} << 30) {
    HostCacheOptions options;
    options.root = (scratch_.path() / "cache").string();
    options.max_bytes = max_bytes;
    options.requirements = TestRequirements();
    absl::StatusOr<std::unique_ptr<HostCache>> cache = HostCache::Open(options);
    EXPECT_TRUE(cache.ok()) << cache.status();
    return *std::move(cache);
  }

  // Stores a sample entry for bucket `tokens` and returns its key.
  CacheKey StoreSample(const HostCache& cache, int64_t tokens, size_t artefact_bytes = 4096,
                       std::vector<std::string> isa = {"avx2"}) {
    const CacheKey key = SampleKey(tokens);
    const std::string artefact = ArtefactBytes(static_cast<int>(tokens), artefact_bytes);
    EXPECT_TRUE(
        cache.Store(MetadataFor(key, artefact, std::move(isa)), key.FactorsJson(), artefact).ok());
    return key;
  }

  ScratchDirectory scratch_;
};

// Sets `path`'s mtime to `seconds` ago.
void SetAge(const std::string& path, int seconds) {
  timespec times[2];
  ::clock_gettime(CLOCK_REALTIME, &times[0]);
  times[0].tv_sec -= seconds;
  times[1] = times[0];
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0) << path;
}

TEST_F(HostCacheTest, StoredEntryIsFoundWhole) {
  auto cache = OpenCache();
  const CacheKey key = SampleKey();
  const std::string artefact = ArtefactBytes(1);
  ASSERT_TRUE(cache->Store(MetadataFor(key, artefact), key.FactorsJson(), artefact).ok());

  const std::string directory = cache->EntryDirectory(key.hex);
  EXPECT_EQ(directory, cache->root() + "/" + key.hex.substr(0, 2) + "/" + key.hex);
  absl::StatusOr<std::unique_ptr<HostEntry>> entry = cache->Find(key.hex);
  ASSERT_TRUE(entry.ok()) << entry.status();
  EXPECT_EQ((*entry)->directory(), directory);
  EXPECT_EQ(*base::ReadFile((*entry)->artefact_path()), artefact);
  EXPECT_EQ(*base::ReadFile(directory + "/cache_key_factors.json"), key.FactorsJson());
  EXPECT_EQ((*entry)->metadata().artefact_bytes, static_cast<int64_t>(artefact.size()));
  EXPECT_EQ((*entry)->metadata().artefact_sha256, Sha256Hex(artefact));
  EXPECT_EQ((*entry)->metadata().project_version, kTestProjectVersion);
  EXPECT_EQ((*entry)->metadata().isa_features, std::vector<std::string>{"avx2"});
  // No temporary directory is left behind.
  std::vector<std::string> names;
  for (const auto& file : fs::directory_iterator(fs::path(directory).parent_path()))
    names.push_back(file.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, std::vector<std::string>{key.hex});

  EXPECT_TRUE(absl::IsNotFound(cache->Find(SampleKey(99).hex).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(cache->Find("../etc").status()));
}

TEST_F(HostCacheTest, DotNamesAndForeignNamesAreNeverEntries) {
  auto cache = OpenCache();
  const CacheKey key = StoreSample(*cache, 16);
  const std::string shard = cache->root() + "/" + key.hex.substr(0, 2);
  // A whole entry under a dot name, and one whose name is not a key: copies of a real one.
  fs::copy(cache->EntryDirectory(key.hex), shard + "/.tmp-" + key.hex + "-1-0");
  fs::copy(cache->EntryDirectory(key.hex), shard + "/not-a-key");
  fs::create_directories(cache->root() + "/.hidden/" + key.hex);
  absl::StatusOr<std::vector<HostEntryInfo>> entries = cache->List();
  ASSERT_TRUE(entries.ok());
  ASSERT_EQ(entries->size(), 1u);
  EXPECT_EQ((*entries)[0].key, key.hex);
  EXPECT_GT((*entries)[0].bytes, 4096u);
}

TEST_F(HostCacheTest, LosingTheRenameRaceKeepsTheWinner) {
  auto cache = OpenCache();
  const CacheKey key = SampleKey();
  const std::string first = ArtefactBytes(1);
  const std::string second = ArtefactBytes(2);
  ASSERT_TRUE(cache->Store(MetadataFor(key, first), key.FactorsJson(), first).ok());
  ASSERT_TRUE(cache->Store(MetadataFor(key, second), key.FactorsJson(), second).ok());
  absl::StatusOr<std::unique_ptr<HostEntry>> entry = cache->Find(key.hex);
  ASSERT_TRUE(entry.ok());
  EXPECT_EQ(*base::ReadFile((*entry)->artefact_path()), first);
}

enum class Damage {
  kTruncate,
  kFlipByte,
  kDeleteMetadata,
  kGarbleMetadata,
  kWrongVersion,
  kLackingIsa,
  kDeleteArtefact
};

struct DamageCase {
  Damage damage;
  std::string expected_message;
};

class HostCacheDamageTest : public HostCacheTest,
                            public ::testing::WithParamInterface<DamageCase> {};

TEST_P(HostCacheDamageTest, BadEntryIsDataLossAndRemovable) {
  auto cache = OpenCache();
  const CacheKey key = SampleKey();
  const std::string artefact = ArtefactBytes(3);
  EntryMetadata metadata = MetadataFor(key, artefact);
  if (GetParam().damage == Damage::kWrongVersion)
    metadata.project_version = "0.0.1";
  if (GetParam().damage == Damage::kLackingIsa)
    metadata.isa_features = {"avx2", "avx512"};
  ASSERT_TRUE(cache->Store(metadata, key.FactorsJson(), artefact).ok());
  const std::string directory = cache->EntryDirectory(key.hex);
  const std::string artefact_path = directory + "/artefact.so";
  const std::string metadata_path = directory + "/metadata.json";
  switch (GetParam().damage) {
    case Damage::kTruncate:
      ASSERT_EQ(::truncate(artefact_path.c_str(), 1000), 0);
      break;
    case Damage::kFlipByte: {
      std::string bytes = *base::ReadFile(artefact_path);
      bytes[bytes.size() / 2] ^= 0x20;
      ASSERT_TRUE(base::WriteFile(artefact_path, bytes).ok());
      break;
    }
    case Damage::kDeleteMetadata:
      ASSERT_EQ(::unlink(metadata_path.c_str()), 0);
      break;
    case Damage::kGarbleMetadata:
      ASSERT_TRUE(base::WriteFile(metadata_path, "{\"format_version\":1,\"key\":").ok());
      break;
    case Damage::kDeleteArtefact:
      ASSERT_EQ(::unlink(artefact_path.c_str()), 0);
      break;
    case Damage::kWrongVersion:
    case Damage::kLackingIsa:
      break;
  }
  const absl::Status found = cache->Find(key.hex).status();
  EXPECT_TRUE(absl::IsDataLoss(found)) << found;
  EXPECT_NE(found.message().find(GetParam().expected_message), absl::string_view::npos) << found;

  ASSERT_TRUE(cache->Remove(key.hex).ok());
  EXPECT_FALSE(fs::exists(directory));
  EXPECT_TRUE(absl::IsNotFound(cache->Find(key.hex).status()));
}

INSTANTIATE_TEST_SUITE_P(
    Damages, HostCacheDamageTest,
    ::testing::Values(DamageCase{Damage::kTruncate, "artefact is 1000 bytes"},
                      DamageCase{Damage::kFlipByte, "SHA-256"},
                      DamageCase{Damage::kDeleteMetadata, "no readable metadata"},
                      DamageCase{Damage::kGarbleMetadata, "metadata.json"},
                      DamageCase{Damage::kWrongVersion, "built by version 0.0.1"},
                      DamageCase{Damage::kLackingIsa, "avx512"},
                      DamageCase{Damage::kDeleteArtefact, "no readable artefact"}));

TEST_F(HostCacheTest, EvictsLeastRecentlyUsedDownToTheCap) {
  auto cache = OpenCache();
  const CacheKey a = StoreSample(*cache, 1, 10000);
  const CacheKey b = StoreSample(*cache, 2, 10000);
  const CacheKey c = StoreSample(*cache, 3, 10000);
  SetAge(cache->EntryDirectory(a.hex) + "/metadata.json", 300);
  SetAge(cache->EntryDirectory(b.hex) + "/metadata.json", 200);
  SetAge(cache->EntryDirectory(c.hex) + "/metadata.json", 100);
  // A use makes `a` the most recent.
  ASSERT_TRUE(cache->Find(a.hex).ok());

  absl::StatusOr<std::vector<HostEntryInfo>> entries = cache->List();
  ASSERT_TRUE(entries.ok());
  const uint64_t entry_bytes = (*entries)[0].bytes;
  // Room for two entries and a half: one must go, the least recently used (b).
  absl::StatusOr<EvictionResult> evicted = cache->EvictTo(entry_bytes * 5 / 2);
  ASSERT_TRUE(evicted.ok());
  EXPECT_EQ(evicted->removed_entries, 1);
  EXPECT_TRUE(absl::IsNotFound(cache->Find(b.hex).status()));
  EXPECT_TRUE(cache->Find(a.hex).ok());
  EXPECT_TRUE(cache->Find(c.hex).ok());

  // Store applies the cap and never evicts what it just stored.
  auto capped = OpenCache(entry_bytes * 3 / 2);
  const CacheKey d = StoreSample(*capped, 4, 10000);
  ASSERT_TRUE(capped->Find(d.hex).ok());
  entries = capped->List();
  ASSERT_TRUE(entries.ok());
  ASSERT_EQ(entries->size(), 1u);
  EXPECT_EQ((*entries)[0].key, d.hex);
}

TEST_F(HostCacheTest, EvictionSkipsAnEntryAReaderHolds) {
  auto cache = OpenCache();
  const CacheKey a = StoreSample(*cache, 1);
  const CacheKey b = StoreSample(*cache, 2);
  absl::StatusOr<std::unique_ptr<HostEntry>> held = cache->Find(a.hex);
  ASSERT_TRUE(held.ok());
  absl::StatusOr<EvictionResult> evicted = cache->EvictTo(0);
  ASSERT_TRUE(evicted.ok());
  EXPECT_EQ(evicted->removed_entries, 1);
  EXPECT_EQ(evicted->skipped_in_use, 1);
  EXPECT_TRUE(fs::exists((*held)->artefact_path()));
  EXPECT_TRUE(absl::IsNotFound(cache->Find(b.hex).status()));
  EXPECT_TRUE(absl::IsUnavailable(cache->Remove(a.hex)));
  held->reset();
  EXPECT_TRUE(cache->Remove(a.hex).ok());
  EXPECT_TRUE(absl::IsNotFound(cache->Find(a.hex).status()));
}

TEST_F(HostCacheTest, StaleTemporariesOfDeadWritersAreRemoved) {
  auto cache = OpenCache();
  const CacheKey key = StoreSample(*cache, 1);
  const std::string shard = cache->root() + "/" + key.hex.substr(0, 2);
  const std::string stale = shard + "/.tmp-" + key.hex + "-1-1";
  const std::string fresh = shard + "/.tmp-" + key.hex + "-1-2";
  fs::create_directories(stale);
  fs::create_directories(fresh);
  SetAge(stale, 3600);
  ASSERT_TRUE(cache->EvictTo(uint64_t{1} << 30).ok());
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(fresh));
  EXPECT_TRUE(cache->Find(key.hex).ok());
}

TEST(HostCacheRootTest, DefaultRootFollowsXdgThenHome) {
  const std::string xdg = ::getenv("XDG_CACHE_HOME") != nullptr ? ::getenv("XDG_CACHE_HOME") : "";
  const std::string home = ::getenv("HOME") != nullptr ? ::getenv("HOME") : "";
  ::setenv("HOME", "/home/bob", 1);
  ::setenv("XDG_CACHE_HOME", "/xdg", 1);
  EXPECT_EQ(DefaultHostCacheRoot(), "/xdg/switchyard/compile");
  ::unsetenv("XDG_CACHE_HOME");
  EXPECT_EQ(DefaultHostCacheRoot(), "/home/bob/.cache/switchyard/compile");
  ::setenv("HOME", home.c_str(), 1);
  if (!xdg.empty())
    ::setenv("XDG_CACHE_HOME", xdg.c_str(), 1);
}

}  // namespace
}  // namespace switchyard::compile
