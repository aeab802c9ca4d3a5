// Gemma 3's config.json fields (the real gemma-3-1b-it layout, and transformers' newer
// layer_types list) and the per-layer windows they give.
#include <cmath>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "model/model_config.h"

namespace switchyard::model {
namespace {

using ::testing::HasSubstr;

// google/gemma-3-1b-it's config.json, shape fields shortened.
constexpr std::string_view kGemma3 = R"({
  "architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text",
  "hidden_size": 1152, "intermediate_size": 6912, "num_hidden_layers": 8,
  "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 256,
  "hidden_activation": "gelu_pytorch_tanh", "query_pre_attn_scalar": 256,
  "rope_theta": 1000000, "rope_local_base_freq": 10000, "rope_scaling": null,
  "sliding_window": 512, "sliding_window_pattern": 6, "final_logit_softcapping": null,
  "attn_logit_softcapping": null, "vocab_size": 262144, "eos_token_id": [1, 106]})";

TEST(Gemma3ConfigTest, ParsesGemma3Layout) {
  auto config = ParseModelConfigJson(kGemma3, "gemma3.json");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->model_type, "gemma3_text");
  EXPECT_EQ(config->hidden_act, MlpActivation::kGeluTanh);
  EXPECT_DOUBLE_EQ(config->embed_scale, std::sqrt(1152.0));
  EXPECT_EQ(config->norm_weight_offset, 1.0f);
  EXPECT_TRUE(config->sandwich_norms);
  EXPECT_TRUE(config->qk_norm);
  EXPECT_DOUBLE_EQ(config->query_pre_attn_scalar, 256);
  EXPECT_DOUBLE_EQ(config->rope_theta, 1e6);
  EXPECT_EQ(config->rope_local_theta, 10000);
  EXPECT_FALSE(config->final_logit_softcapping.has_value());
  // Layers 0-4 slide, 5 is global, 6-7 slide again.
  for (int64_t layer = 0; layer < 8; ++layer)
    EXPECT_EQ(LayerWindow(*config, layer), layer == 5 ? 0 : 512) << layer;
  EXPECT_EQ(CommonSlidingWindow(*config), 0);
}

TEST(Gemma3ConfigTest, LayerTypesDefaultsAndSoftCap) {
  auto config = ParseModelConfigJson(R"({"architectures": ["Gemma3ForCausalLM"],
      "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 3,
      "num_attention_heads": 4, "head_dim": 32, "vocab_size": 100,
      "layer_types": ["full_attention", "sliding_attention", "full_attention"],
      "final_logit_softcapping": 30.0})",
                                     "g.json");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(LayerWindow(*config, 0), 0);
  EXPECT_EQ(LayerWindow(*config, 1), 4096);  // transformers' default window
  EXPECT_DOUBLE_EQ(config->query_pre_attn_scalar, 256);
  EXPECT_DOUBLE_EQ(config->rope_theta, 1e6);
  EXPECT_EQ(config->final_logit_softcapping, 30.0);

  auto bad_types = ParseModelConfigJson(R"({"architectures": ["Gemma3ForCausalLM"],
      "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 3,
      "num_attention_heads": 4, "vocab_size": 100, "layer_types": ["full_attention"]})",
                                        "g.json");
  EXPECT_THAT(bad_types.status().message(), HasSubstr("layer_types"));
  auto bidirectional = ParseModelConfigJson(R"({"architectures": ["Gemma3ForCausalLM"],
      "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 1,
      "num_attention_heads": 4, "vocab_size": 100, "use_bidirectional_attention": true})",
                                            "g.json");
  EXPECT_THAT(bidirectional.status().message(), HasSubstr("use_bidirectional_attention"));
}

TEST(Gemma3ConfigTest, LlamaFamilyKeepsSiluAndUniformWindow) {
  auto mistral = ParseModelConfigJson(R"({"architectures": ["MistralForCausalLM"],
      "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
      "num_attention_heads": 4, "vocab_size": 100, "sliding_window": 24,
      "hidden_act": "silu"})",
                                      "m.json");
  ASSERT_TRUE(mistral.ok()) << mistral.status();
  EXPECT_EQ(mistral->hidden_act, MlpActivation::kSilu);
  EXPECT_EQ(LayerWindow(*mistral, 1), 24);
  EXPECT_EQ(CommonSlidingWindow(*mistral), 24);
  auto relu = ParseModelConfigJson(R"({"architectures": ["LlamaForCausalLM"],
      "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
      "num_attention_heads": 4, "vocab_size": 100, "hidden_act": "relu"})",
                                   "l.json");
  EXPECT_THAT(relu.status().message(), HasSubstr("unsupported 'relu'"));
}

}  // namespace
}  // namespace switchyard::model
