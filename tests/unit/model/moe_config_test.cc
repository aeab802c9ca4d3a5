// Qwen3-MoE's config.json fields and the limits the loader enforces.
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "model/model_config.h"

namespace switchyard::model {
namespace {

using ::testing::HasSubstr;

// Qwen/Qwen3-30B-A3B's config.json, shape fields as released.
constexpr std::string_view kQwen3Moe = R"({
  "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe",
  "hidden_size": 2048, "intermediate_size": 6144, "num_hidden_layers": 48,
  "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128,
  "num_experts": 128, "num_experts_per_tok": 8, "moe_intermediate_size": 768,
  "norm_topk_prob": true, "decoder_sparse_step": 1, "mlp_only_layers": [],
  "vocab_size": 151936, "rope_theta": 1000000.0, "tie_word_embeddings": false})";

TEST(MoeConfigTest, ParsesQwen3Moe) {
  auto config = ParseModelConfigJson(kQwen3Moe, "qwen3moe.json");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->num_experts, 128);
  EXPECT_EQ(config->num_experts_per_tok, 8);
  EXPECT_EQ(config->moe_intermediate_size, 768);
  EXPECT_TRUE(config->norm_topk_prob);
  EXPECT_TRUE(config->qk_norm);
  EXPECT_FALSE(config->attention_bias);
}

TEST(MoeConfigTest, RejectsWhatItCannotRun) {
  auto replace = [](std::string_view from, std::string_view to) {
    std::string text(kQwen3Moe);
    text.replace(text.find(from), from.size(), to);
    return ParseModelConfigJson(text, "q.json");
  };
  EXPECT_THAT(replace("\"mlp_only_layers\": []", "\"mlp_only_layers\": [0]").status().message(),
              HasSubstr("mlp_only_layers"));
  EXPECT_THAT(
      replace("\"decoder_sparse_step\": 1", "\"decoder_sparse_step\": 2").status().message(),
      HasSubstr("decoder_sparse_step"));
  EXPECT_THAT(
      replace("\"num_experts_per_tok\": 8", "\"num_experts_per_tok\": 129").status().message(),
      HasSubstr("num_experts_per_tok"));
  EXPECT_THAT(replace("\"num_experts\": 128,", "").status().message(), HasSubstr("num_experts"));
}

}  // namespace
}  // namespace switchyard::model
