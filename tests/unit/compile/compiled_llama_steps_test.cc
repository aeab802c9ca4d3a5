// Compiled steps through the compile cache: the first start measures each bucket's MatMul
// tuning and builds the generated kernels the buckets share, and stores both on the host; a
// later process's start loads them from there, the same process's from memory, and every
// start runs the same paths. Without a compiler the steps run unfused.
#include "compile/compiled_llama_steps.h"

#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "compile/artefact_cache.h"
#include "tiny_model_support.h"

namespace switchyard::compile {
namespace {

std::unique_ptr<ArtefactCache> OpenCache(const std::string& root) {
  ArtefactCacheOptions options;
  options.host.root = root;
  auto cache = ArtefactCache::Open(options);
  EXPECT_TRUE(cache.ok()) << cache.status();
  return std::move(*cache);
}

std::vector<BucketBuild> Builds(TinyModel& l, ArtefactCache* cache) {
  const std::vector<int64_t> sizes = {1, 4, 16};
  auto steps = CompiledLlamaSteps::Create(l.model.get(), l.backend.get(), l.kv[0].get(), sizes,
                                          cache, {"portable"});
  EXPECT_TRUE(steps.ok()) << steps.status();
  return steps.ok() ? (*steps)->builds() : std::vector<BucketBuild>{};
}

TEST(CompiledLlamaStepsTest, TuningIsMeasuredOnceAndLoadedAfter) {
  const std::string root = ::testing::TempDir() + "/sy_compiled_steps_cache";
  std::filesystem::remove_all(root);
  TinyModel l = LoadTinyModel({.max_num_batched_tokens = 16});

  auto first_cache = OpenCache(root);
  const std::vector<BucketBuild> first = Builds(l, first_cache.get());
  ASSERT_EQ(first.size(), 3u);
  for (const BucketBuild& b : first) {
    EXPECT_EQ(b.source, "compiled");
    EXPECT_EQ(b.matmuls.size(), 5u);  // tiny-llama3's five MatMul shapes
    EXPECT_GT(b.fused_nodes, 0);
  }
  // The kernels are built for the first bucket, and the others share them.
  EXPECT_EQ(first[0].kernels, "compiled");
  EXPECT_EQ(first[1].kernels, "memory");
  EXPECT_EQ(first[2].kernels, "memory");
  EXPECT_EQ(first_cache->counters().compiles, 4);
  // The same process again: from memory. Another process (a fresh cache): from the host.
  const std::vector<BucketBuild> again = Builds(l, first_cache.get());
  auto second_cache = OpenCache(root);
  const std::vector<BucketBuild> later = Builds(l, second_cache.get());
  for (size_t i = 0; i < first.size(); ++i) {
    EXPECT_EQ(again[i].source, "memory");
    EXPECT_EQ(later[i].source, "host");
    EXPECT_EQ(later[i].digest, first[i].digest);
    EXPECT_EQ(later[i].matmuls, first[i].matmuls);
    EXPECT_EQ(later[i].fused_nodes, first[i].fused_nodes);
  }
  EXPECT_EQ(again[0].kernels, "memory");
  EXPECT_EQ(later[0].kernels, "host");
  EXPECT_EQ(second_cache->counters().host_hits, 4);
  EXPECT_EQ(second_cache->counters().compiles, 0);
}

// A compiler that does not run: a warning, and the same steps with their ops unfused.
TEST(CompiledLlamaStepsTest, WithoutACompilerTheStepsRunUnfused) {
  TinyModel l = LoadTinyModel({.max_num_batched_tokens = 16});
  ASSERT_EQ(::setenv("SWITCHYARD_CXX", "/nonexistent/c++", 1), 0);
  const std::vector<BucketBuild> builds = Builds(l, nullptr);
  ::unsetenv("SWITCHYARD_CXX");
  ASSERT_EQ(builds.size(), 3u);
  for (const BucketBuild& b : builds) {
    EXPECT_EQ(b.kernels, "unavailable");
    EXPECT_EQ(b.fused_nodes, 0);
    EXPECT_EQ(b.matmuls.size(), 5u);
  }
}

TEST(CompiledLlamaStepsTest, WithoutACacheEveryStartMeasures) {
  TinyModel l = LoadTinyModel({.max_num_batched_tokens = 16});
  for (const BucketBuild& b : Builds(l, nullptr)) {
    EXPECT_EQ(b.source, "compiled");
    EXPECT_EQ(b.matmuls.size(), 5u);
  }
}

}  // namespace
}  // namespace switchyard::compile
