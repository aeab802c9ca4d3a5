// vLLM's --compilation-config and --enforce-eager, read as this engine reads them.
#include "compile/compilation_config.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace switchyard::compile {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::vector<int64_t> Sizes(std::string_view json, bool eager = false, int64_t seqs = 32,
                           int64_t tokens = 2048) {
  auto config = ParseCompilationConfig(json, eager, seqs, tokens);
  EXPECT_TRUE(config.ok()) << config.status();
  return config.ok() ? config->compile_sizes : std::vector<int64_t>{-1};
}

TEST(CompilationConfigTest, EagerUnlessAConfigIsGiven) {
  EXPECT_THAT(Sizes(""), IsEmpty());
  EXPECT_THAT(Sizes("", true), IsEmpty());
}

TEST(CompilationConfigTest, DefaultBucketsAreTheDecodeBatches) {
  EXPECT_THAT(Sizes("{}"), ElementsAre(1, 2, 4, 8, 16, 32));
  EXPECT_THAT(Sizes("{}", false, 24), ElementsAre(1, 2, 4, 8, 16, 24));
  EXPECT_THAT(Sizes("{}", false, 1), ElementsAre(1));
  // Never more tokens than a step holds.
  EXPECT_THAT(Sizes("{}", false, 64, 20), ElementsAre(1, 2, 4, 8, 16, 20));
  EXPECT_THAT(Sizes("{\"compile_sizes\": null}"), ElementsAre(1, 2, 4, 8, 16, 32));
}

TEST(CompilationConfigTest, CompileSizesAreSortedAndUnique) {
  EXPECT_THAT(Sizes("{\"compile_sizes\": [16, 1, 4, 4]}"), ElementsAre(1, 4, 16));
  EXPECT_THAT(Sizes("{\"compile_sizes\": []}"), IsEmpty());
}

TEST(CompilationConfigTest, EnforceEagerWinsButTheConfigIsStillChecked) {
  EXPECT_THAT(Sizes("{\"compile_sizes\": [1, 2]}", true), IsEmpty());
  EXPECT_FALSE(ParseCompilationConfig("{\"compile_sizes\": [0]}", true, 32, 2048).ok());
}

TEST(CompilationConfigTest, BadConfigsNameTheFlagAndTheProblem) {
  for (const auto& [json, says] :
       {std::pair{"[1, 2]", "expected an object"},
        {"{\"compile_sizes\": [0]}", "compile_sizes[0]: 0 tokens"},
        {"{\"compile_sizes\": [1, 4096]}", "compile_sizes[1]: 4096 tokens"},
        {"{\"compile_sizes\": [1.5]}", "expected an integer"},
        {"{\"compile_sizes\": 4}", "expected an array"},
        {"{\"level\": 3}", "level: unknown key"},
        {"{\"compile_sizes\": [1]", "--compilation-config"}}) {
    auto config = ParseCompilationConfig(json, false, 32, 2048);
    ASSERT_FALSE(config.ok()) << json;
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument) << json;
    EXPECT_THAT(config.status().message(), HasSubstr(says)) << json;
    EXPECT_THAT(config.status().message(), HasSubstr("--compilation-config")) << json;
  }
}

}  // namespace
}  // namespace switchyard::compile
