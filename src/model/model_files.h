// ModelFiles: everything found at a model PATH, which is either a Hugging Face directory
// (config.json; model.safetensors or model.safetensors.index.json with shards;
// tokenizer.json, tokenizer_config.json, generation_config.json) or a single .gguf file.
// Opening validates the config and every tensor's bytes, then checks that the tensors the
// config implies for the embedding have the expected shape. Immutable after Open; safe to
// read from any thread. Tensor views point into memory maps owned by this object.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

#include "model/gguf.h"
#include "model/model_config.h"
#include "model/safetensors.h"
#include "model/tensor_view.h"

namespace switchyard::model {

enum class WeightFormat { kSafetensors, kShardedSafetensors, kGguf };
std::string_view WeightFormatName(WeightFormat format);

class ModelFiles {
 public:
  static absl::StatusOr<std::unique_ptr<ModelFiles>> Open(const std::string& path);

  const std::string& path() const { return path_; }
  WeightFormat format() const { return format_; }
  const ModelConfig& config() const { return config_; }
  const std::vector<TensorView>& tensors() const;
  const TensorView* FindTensor(std::string_view name) const;
  // Sum of the element counts of all tensors.
  int64_t ParameterCount() const;
  // Bytes of all weight files together.
  uint64_t WeightFileBytes() const;
  // Weight file paths (one, or the shards in index order).
  std::vector<std::string> WeightFiles() const;

  // Null unless format() is kGguf.
  const GgufFile* gguf() const { return gguf_.get(); }
  // Paths of the HF side files; empty when absent (always empty for GGUF).
  const std::string& tokenizer_json_path() const { return tokenizer_json_path_; }
  const std::string& generation_config_path() const { return generation_config_path_; }

 private:
  ModelFiles() = default;
  absl::Status OpenDirectory();
  absl::Status OpenGguf();

  std::string path_;
  WeightFormat format_ = WeightFormat::kSafetensors;
  ModelConfig config_;
  std::unique_ptr<SafetensorsCheckpoint> checkpoint_;
  std::unique_ptr<GgufFile> gguf_;
  std::string tokenizer_json_path_;
  std::string generation_config_path_;
};

}  // namespace switchyard::model
