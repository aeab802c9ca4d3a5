#include "model/model_config.h"

#include <map>
#include <string>

#include "fmt/format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "model/gguf.h"
#include "model_test_util.h"

namespace switchyard::model {
namespace {

using ::testing::HasSubstr;

constexpr std::string_view kLlama3 = R"({
  "architectures": ["LlamaForCausalLM"], "model_type": "llama",
  "hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 16,
  "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
  "max_position_embeddings": 131072, "rms_norm_eps": 1e-05, "rope_theta": 500000.0,
  "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "tie_word_embeddings": true, "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009],
  "torch_dtype": "bfloat16"})";

TEST(ModelConfigTest, ParsesLlama3) {
  auto config = ParseModelConfigJson(kLlama3, "config.json");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->architecture, "LlamaForCausalLM");
  EXPECT_EQ(config->head_dim, 64);
  EXPECT_EQ(config->num_key_value_heads, 8);
  EXPECT_EQ(config->rope_scaling.type, RopeScaling::Type::kLlama3);
  EXPECT_EQ(config->rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_DOUBLE_EQ(config->rope_theta, 500000.0);
  EXPECT_TRUE(config->tie_word_embeddings);
  EXPECT_EQ(config->bos_token_id, 128000);
  EXPECT_THAT(config->eos_token_ids, ::testing::ElementsAre(128001, 128008, 128009));
  EXPECT_EQ(config->torch_dtype, "bfloat16");
  EXPECT_FALSE(config->attention_bias);
  EXPECT_FALSE(config->sliding_window.has_value());
}

TEST(ModelConfigTest, ParsesQwen2Qwen3AndMistral) {
  auto qwen2 = ParseModelConfigJson(R"({"architectures": ["Qwen2ForCausalLM"],
      "hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24,
      "num_attention_heads": 14, "num_key_value_heads": 2, "vocab_size": 151936,
      "sliding_window": 32768, "use_sliding_window": false, "eos_token_id": 151645,
      "rope_scaling": null})",
                                    "qwen2.json");
  ASSERT_TRUE(qwen2.ok()) << qwen2.status();
  EXPECT_TRUE(qwen2->attention_bias);
  EXPECT_EQ(qwen2->head_dim, 64);
  EXPECT_FALSE(qwen2->sliding_window.has_value());
  EXPECT_EQ(qwen2->max_position_embeddings, 32768);

  auto qwen3 = ParseModelConfigJson(R"({"architectures": ["Qwen3ForCausalLM"],
      "hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 28,
      "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128,
      "vocab_size": 151936, "attention_bias": false})",
                                    "qwen3.json");
  ASSERT_TRUE(qwen3.ok()) << qwen3.status();
  EXPECT_EQ(qwen3->head_dim, 128);
  EXPECT_TRUE(qwen3->qk_norm);

  auto mistral = ParseModelConfigJson(R"({"architectures": ["MistralForCausalLM"],
      "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
      "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 32000,
      "sliding_window": 4096})",
                                      "mistral.json");
  ASSERT_TRUE(mistral.ok()) << mistral.status();
  EXPECT_EQ(mistral->sliding_window, 4096);
  auto mistral_null = ParseModelConfigJson(R"({"architectures": ["MistralForCausalLM"],
      "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 1,
      "num_attention_heads": 4, "vocab_size": 100, "sliding_window": null})",
                                           "m.json");
  ASSERT_TRUE(mistral_null.ok()) << mistral_null.status();
  EXPECT_FALSE(mistral_null->sliding_window.has_value());
}

void ExpectConfigError(std::string_view json, std::string_view field) {
  auto config = ParseModelConfigJson(json, "bad/config.json");
  ASSERT_FALSE(config.ok()) << json;
  EXPECT_THAT(std::string(config.status().message()), HasSubstr("bad/config.json"));
  EXPECT_THAT(std::string(config.status().message()), HasSubstr(std::string(field)));
}

// A small valid Llama config; `overrides` replaces or adds top-level fields (raw JSON).
std::string Llama(std::map<std::string, std::string> overrides = {}) {
  std::map<std::string, std::string> fields = {{"architectures", R"(["LlamaForCausalLM"])"},
                                               {"hidden_size", "64"},
                                               {"intermediate_size", "128"},
                                               {"num_hidden_layers", "2"},
                                               {"num_attention_heads", "4"},
                                               {"vocab_size", "100"}};
  for (auto& [key, value] : overrides) {
    fields[key] = value;
  }
  std::string json = "{";
  for (const auto& [key, value] : fields) {
    json += fmt::format("{}\"{}\": {}", json.size() > 1 ? ", " : "", key, value);
  }
  return json + "}";
}

TEST(ModelConfigTest, RejectsInvalidConfigs) {
  ASSERT_TRUE(ParseModelConfigJson(Llama(), "ok.json").ok());
  ExpectConfigError(R"({"architectures": ["GPT2LMHeadModel"]})", "architectures");
  ExpectConfigError(R"({"hidden_size": 1})", "architectures");
  ExpectConfigError("{", "invalid JSON");
  ExpectConfigError(R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64})",
                    "intermediate_size");
  ExpectConfigError(Llama({{"num_key_value_heads", R"(3)"}}), "num_key_value_heads");
  ExpectConfigError(Llama({{"num_hidden_layers", R"(0)"}}), "num_hidden_layers");
  ExpectConfigError(Llama({{"hidden_size", R"("64")"}}), "hidden_size");
  ExpectConfigError(Llama({{"hidden_size", R"(66)"}}), "num_attention_heads");
  ExpectConfigError(Llama({{"rms_norm_eps", R"(-1)"}}), "rms_norm_eps");
  ExpectConfigError(Llama({{"eos_token_id", R"(100)"}}), "eos_token_id");
  ExpectConfigError(Llama({{"eos_token_id", R"("x")"}}), "eos_token_id");
  ExpectConfigError(Llama({{"rope_scaling", R"({"rope_type": "yarn", "factor": 2})"}}),
                    "rope_scaling.rope_type");
  ExpectConfigError(Llama({{"rope_scaling", R"({"rope_type": "llama3", "factor": 2})"}}),
                    "rope_scaling.low_freq_factor");
  ExpectConfigError(Llama({{"head_dim", R"(15)"}}), "head_dim");
}

TEST(ModelConfigTest, FromGgufMetadata) {
  const std::string bytes = testing::GgufBuilder()
                                .Str("general.architecture", "qwen2")
                                .U32("qwen2.embedding_length", 64)
                                .U32("qwen2.block_count", 2)
                                .U32("qwen2.feed_forward_length", 128)
                                .U32("qwen2.attention.head_count", 4)
                                .U32("qwen2.attention.head_count_kv", 2)
                                .U32("qwen2.context_length", 4096)
                                .F32("qwen2.attention.layer_norm_rms_epsilon", 1e-6f)
                                .F32("qwen2.rope.freq_base", 1e6f)
                                .StrArray("tokenizer.ggml.tokens", {"a", "b", "c", "d"})
                                .U32("tokenizer.ggml.eos_token_id", 3)
                                .Tensor("blk.0.attn_q.bias", {64}, 0, 0)
                                .Build(std::string(256, '\0'));
  auto gguf =
      GgufFile::Parse({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}, "q.gguf");
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  auto config = ModelConfigFromGguf(**gguf);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->architecture, "Qwen2ForCausalLM");
  EXPECT_EQ(config->num_key_value_heads, 2);
  EXPECT_EQ(config->head_dim, 16);
  EXPECT_EQ(config->vocab_size, 4);
  EXPECT_EQ(config->max_position_embeddings, 4096);
  EXPECT_TRUE(config->attention_bias);
  EXPECT_TRUE(config->tie_word_embeddings);
  EXPECT_THAT(config->eos_token_ids, ::testing::ElementsAre(3));

  const std::string missing = testing::GgufBuilder().Str("general.architecture", "llama").Build();
  auto bad =
      GgufFile::Parse({reinterpret_cast<const uint8_t*>(missing.data()), missing.size()}, "m.gguf");
  ASSERT_TRUE(bad.ok());
  auto error = ModelConfigFromGguf(**bad);
  ASSERT_FALSE(error.ok());
  EXPECT_THAT(std::string(error.status().message()), HasSubstr("m.gguf"));
  EXPECT_THAT(std::string(error.status().message()), HasSubstr("llama.embedding_length"));
}

}  // namespace
}  // namespace switchyard::model
