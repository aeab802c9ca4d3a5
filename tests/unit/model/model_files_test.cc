#include "model/model_files.h"

#include <filesystem>
#include <string>

#include "fmt/format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "model_test_util.h"

namespace switchyard::model {
namespace {

using ::testing::HasSubstr;
using testing::MakeSafetensors;

constexpr std::string_view kConfig = R"({"architectures": ["LlamaForCausalLM"],
    "hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 1,
    "num_attention_heads": 2, "vocab_size": 4, "tie_word_embeddings": true})";

std::string MakeModelDir(std::string_view name, std::string_view config, int64_t vocab) {
  const std::string dir = testing::TempPath(name);
  std::filesystem::create_directories(dir);
  EXPECT_TRUE(base::WriteFile(dir + "/config.json", config).ok());
  const std::string header = fmt::format(
      R"({{"model.embed_tokens.weight": {{"dtype": "F32", "shape": [{}, 8],
          "data_offsets": [0, {}]}}, "model.norm.weight": {{"dtype": "BF16", "shape": [8],
          "data_offsets": [{}, {}]}}}})",
      vocab, vocab * 32, vocab * 32, vocab * 32 + 16);
  EXPECT_TRUE(base::WriteFile(dir + "/model.safetensors",
                              MakeSafetensors(header, std::string(vocab * 32 + 16, '\0')))
                  .ok());
  return dir;
}

TEST(ModelFilesTest, OpensHfDirectory) {
  const std::string dir = MakeModelDir("hf_ok", kConfig, 4);
  auto files = ModelFiles::Open(dir);
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_EQ((*files)->format(), WeightFormat::kSafetensors);
  EXPECT_EQ((*files)->config().hidden_size, 8);
  EXPECT_EQ((*files)->ParameterCount(), 4 * 8 + 8);
  EXPECT_EQ((*files)->tensors().size(), 2u);
  EXPECT_TRUE((*files)->tokenizer_json_path().empty());
  EXPECT_NE((*files)->FindTensor("model.norm.weight"), nullptr);
}

TEST(ModelFilesTest, RejectsEmbeddingThatDoesNotMatchConfig) {
  const std::string dir = MakeModelDir("hf_mismatch", kConfig, 5);
  auto files = ModelFiles::Open(dir);
  ASSERT_FALSE(files.ok());
  const std::string message(files.status().message());
  EXPECT_THAT(message, HasSubstr(dir + "/model.safetensors"));
  EXPECT_THAT(message, HasSubstr("model.embed_tokens.weight"));
  EXPECT_THAT(message, HasSubstr("vocab_size 4"));
}

TEST(ModelFilesTest, ReportsMissingPieces) {
  EXPECT_EQ(ModelFiles::Open(testing::TempPath("does_not_exist")).status().code(),
            absl::StatusCode::kNotFound);
  const std::string dir = testing::TempPath("hf_empty");
  std::filesystem::create_directories(dir);
  std::filesystem::remove(dir + "/config.json");
  auto no_config = ModelFiles::Open(dir);
  EXPECT_THAT(std::string(no_config.status().message()), HasSubstr("config.json"));
  ASSERT_TRUE(base::WriteFile(dir + "/config.json", kConfig).ok());
  auto no_weights = ModelFiles::Open(dir);
  EXPECT_THAT(std::string(no_weights.status().message()), HasSubstr("model.safetensors"));
}

TEST(ModelFilesTest, OpensGguf) {
  const std::string bytes = testing::GgufBuilder()
                                .Str("general.architecture", "llama")
                                .U32("llama.embedding_length", 8)
                                .U32("llama.block_count", 1)
                                .U32("llama.feed_forward_length", 16)
                                .U32("llama.attention.head_count", 2)
                                .U32("llama.vocab_size", 4)
                                .Tensor("token_embd.weight", {8, 4}, 0, 0)
                                .Build(std::string(128, '\0'));
  const std::string path = testing::WriteTemp("model.gguf", bytes);
  auto files = ModelFiles::Open(path);
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_EQ((*files)->format(), WeightFormat::kGguf);
  EXPECT_NE((*files)->gguf(), nullptr);
  EXPECT_EQ((*files)->ParameterCount(), 32);
  EXPECT_TRUE((*files)->config().tie_word_embeddings);
}

}  // namespace
}  // namespace switchyard::model
