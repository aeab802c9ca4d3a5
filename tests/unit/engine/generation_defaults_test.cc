#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "base/file.h"
#include "engine/serving_context.h"

namespace switchyard::engine {
namespace {

using ::testing::HasSubstr;

std::string WriteConfig(const std::string& name, const std::string& json) {
  const std::string path = ::testing::TempDir() + name;
  EXPECT_TRUE(base::WriteFile(path, json).ok());
  return path;
}

TEST(GenerationDefaultsTest, ReadsTheSamplingFieldsAndSkipsNulls) {
  auto d = LoadGenerationDefaults(
      WriteConfig("gen_ok.json", R"({"temperature": 0.6, "top_p": 0.9, "top_k": 20.0, "min_p": null,
                         "repetition_penalty": 1, "do_sample": true})"));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->temperature, 0.6);
  EXPECT_EQ(d->top_p, 0.9);
  EXPECT_EQ(d->top_k, 20);
  EXPECT_FALSE(d->min_p.has_value());
  EXPECT_EQ(d->repetition_penalty, 1.0);
  EXPECT_FALSE(LoadGenerationDefaults("")->temperature.has_value());
}

TEST(GenerationDefaultsTest, AFieldOfTheWrongTypeIsNamed) {
  const std::string path = WriteConfig("gen_bad.json", R"({"temperature": "0.6"})");
  auto d = LoadGenerationDefaults(path);
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(std::string(d.status().message()),
              HasSubstr(path + ": temperature: expected a number"));
}

}  // namespace
}  // namespace switchyard::engine
