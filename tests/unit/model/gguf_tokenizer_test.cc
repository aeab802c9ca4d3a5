#include "model/gguf_tokenizer.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "model_test_util.h"
#include "text/tokenizer.h"

namespace switchyard::model {
namespace {

using ::testing::HasSubstr;

absl::StatusOr<std::unique_ptr<GgufFile>> ParseBytes(const std::string& bytes) {
  return GgufFile::Parse({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()},
                         "tok.gguf");
}

TEST(GgufTokenizerTest, ConvertsMetadata) {
  const std::string bytes = testing::GgufBuilder()
                                .Str("tokenizer.ggml.model", "gpt2")
                                .Str("tokenizer.ggml.pre", "qwen2")
                                .StrArray("tokenizer.ggml.tokens", {"a", "b", "ab", "<s>"})
                                .I32Array("tokenizer.ggml.token_type", {1, 1, 1, 3})
                                .StrArray("tokenizer.ggml.merges", {"a b"})
                                .U32("tokenizer.ggml.eos_token_id", 3)
                                .Bool("tokenizer.ggml.add_bos_token", false)
                                .Build();
  auto gguf = ParseBytes(bytes);
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  auto spec = VocabSpecFromGguf(**gguf);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->kind, text::VocabSpec::Kind::kByteLevelBpe);
  EXPECT_EQ(spec->pre_tokenizer, "qwen2");
  EXPECT_THAT(spec->tokens, ::testing::ElementsAre("a", "b", "ab", "<s>"));
  EXPECT_THAT(spec->merges, ::testing::ElementsAre("a b"));
  EXPECT_EQ(spec->eos_id, 3);
  EXPECT_FALSE(spec->bos_id.has_value());
  EXPECT_FALSE(spec->add_space_prefix);
}

TEST(GgufTokenizerTest, RejectsInconsistentMetadata) {
  auto check = [](const std::string& bytes, std::string_view field) {
    auto gguf = ParseBytes(bytes);
    ASSERT_TRUE(gguf.ok()) << gguf.status();
    auto spec = VocabSpecFromGguf(**gguf);
    ASSERT_FALSE(spec.ok());
    EXPECT_THAT(std::string(spec.status().message()), HasSubstr("tok.gguf"));
    EXPECT_THAT(std::string(spec.status().message()), HasSubstr(std::string(field)));
  };
  check(testing::GgufBuilder().Str("tokenizer.ggml.model", "bert").Build(), "tokenizer.ggml.model");
  check(testing::GgufBuilder().Str("tokenizer.ggml.model", "llama").Build(),
        "tokenizer.ggml.tokens");
  check(testing::GgufBuilder()
            .Str("tokenizer.ggml.model", "llama")
            .StrArray("tokenizer.ggml.tokens", {"a", "b"})
            .F32Array("tokenizer.ggml.scores", {0})
            .Build(),
        "tokenizer.ggml.scores");
  check(testing::GgufBuilder()
            .Str("tokenizer.ggml.model", "llama")
            .StrArray("tokenizer.ggml.tokens", {"a", "b"})
            .U32("tokenizer.ggml.bos_token_id", 2)
            .Build(),
        "tokenizer.ggml.bos_token_id");
}

// The bundled tiny models carry the same vocabulary in tokenizer.json and in their GGUF
// files; both tokenizers must agree.
TEST(GgufTokenizerTest, MatchesTokenizerJsonOnTinyModels) {
  const std::string samples[] = {
      "Hello world! The router's cache holds 12345 tokens.",
      "  leading spaces\tand\nnew lines",
      "Über Größe, café, 路由器 🚀",
  };
  for (const char* model : {"tiny-llama3", "tiny-qwen2", "tiny-mistral"}) {
    const std::string dir = std::string(SY_SOURCE_DIR) + "/models/" + model;
    // The tiny models are bundled in the repo, so a missing one is a failure.
    ASSERT_TRUE(std::filesystem::exists(dir + "/model.gguf")) << dir << " is missing";
    auto from_gguf = LoadTokenizerFromGgufFile(dir + "/model.gguf");
    ASSERT_TRUE(from_gguf.ok()) << from_gguf.status();
    auto from_json = text::Tokenizer::FromJsonFile(dir + "/tokenizer.json");
    ASSERT_TRUE(from_json.ok()) << from_json.status();
    for (const std::string& sample : samples) {
      for (bool special : {false, true}) {
        auto a = (*from_gguf)->Encode(sample, special);
        auto b = (*from_json)->Encode(sample, special);
        ASSERT_TRUE(a.ok() && b.ok()) << model;
        EXPECT_EQ(*a, *b) << model << ": " << sample << " special=" << special;
      }
    }
  }
}

}  // namespace
}  // namespace switchyard::model
