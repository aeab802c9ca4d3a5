// The startup report's JSON and metrics numbers, from a runner's start-up facts.
#include "engine/startup_report.h"

#include "gtest/gtest.h"

#include "base/json.h"

namespace switchyard::engine {
namespace {

RunnerStartup Example() {
  RunnerStartup s;
  s.weights = model::WeightsLoad{"/models/a \"quoted\" dir", 1000, 24, 0, 512, 0.5};
  s.compiled.push_back({{1, 1}, std::string(64, 'a'), "compiled", 0.25, {}});
  s.compiled.push_back({{4, 4}, std::string(64, 'b'), "host", 0.125, {}});
  s.kv_dtype = "F16";
  s.kv_pool_bytes = 4096;
  return s;
}

TEST(StartupReportTest, JsonNamesEachCache) {
  RunnerLimits limits;
  limits.num_kv_blocks = 8;
  limits.block_size = 16;
  EngineSnapshot snapshot;
  KvTierStats tier;
  tier.medium = "CPU";
  tier.capacity_blocks = 32;
  tier.block_bytes = 512;
  snapshot.kv_tiers.push_back(tier);
  const std::string json = StartupReportJson(Example(), limits, snapshot);
  auto doc = base::JsonDocument::Parse(json, "report");
  ASSERT_TRUE(doc.ok()) << doc.status() << json;
  const auto root = (*doc)->root();
  EXPECT_EQ(std::string_view(root["weights"]["source"]), "/models/a \"quoted\" dir");
  EXPECT_EQ(int64_t(root["weights"]["bytes"]), 1024);
  EXPECT_EQ(int64_t(root["weights"]["mapped_bytes"]), 1000);
  EXPECT_EQ(int64_t(root["weights"]["packed_bytes"]), 512);  // on top of "bytes"
  EXPECT_EQ(std::string_view(root["compiled"]["mode"]), "compiled");
  EXPECT_DOUBLE_EQ(double(root["compiled"]["seconds"]), 0.375);
  EXPECT_EQ(std::string_view(root["compiled"]["buckets"].at(1)["source"]), "host");
  EXPECT_EQ(int64_t(root["compiled"]["buckets"].at(1)["tokens"]), 4);
  EXPECT_EQ(int64_t(root["kv_cache"]["pool_bytes"]), 4096);
  EXPECT_EQ(std::string_view(root["kv_cache"]["tiers"].at(0)["medium"]), "GPU");
  EXPECT_EQ(int64_t(root["kv_cache"]["tiers"].at(0)["capacity_blocks"]), 8);
  EXPECT_EQ(int64_t(root["kv_cache"]["tiers"].at(1)["block_bytes"]), 512);
}

TEST(StartupReportTest, ARunnerWithoutWeightsOrCompiledSteps) {
  const std::string json = StartupReportJson(RunnerStartup{}, RunnerLimits{}, EngineSnapshot{});
  auto doc = base::JsonDocument::Parse(json, "report");
  ASSERT_TRUE(doc.ok()) << doc.status() << json;
  EXPECT_TRUE((*doc)->root()["weights"].is_null());
  EXPECT_EQ(std::string_view((*doc)->root()["compiled"]["mode"]), "eager");
}

TEST(StartupReportTest, NumbersCountBucketsBySource) {
  const StartupNumbers n = StartupNumbersOf(Example());
  EXPECT_EQ(n.weights_mapped_bytes, 1000);
  EXPECT_EQ(n.weights_copied_bytes, 24);
  EXPECT_EQ(n.weights_packed_bytes, 512);
  EXPECT_DOUBLE_EQ(n.compile_seconds, 0.375);
  EXPECT_EQ(n.compiled_buckets.at("compiled"), 1);
  EXPECT_EQ(n.compiled_buckets.at("host"), 1);
}

}  // namespace
}  // namespace switchyard::engine
