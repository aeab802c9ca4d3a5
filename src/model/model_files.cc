#include "model/model_files.h"

#include <filesystem>
#include <system_error>

#include "absl/status/status.h"
#include "fmt/format.h"

#include "base/status_macros.h"

namespace switchyard::model {
namespace {

std::string IfExists(const std::filesystem::path& path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec) ? path.string() : std::string();
}

// The embedding table must be [vocab_size, hidden_size] in the HF layout; a mismatch means
// config and weights come from different models.
absl::Status CheckEmbedding(const ModelConfig& config, const TensorView* embedding,
                            std::string_view source, std::string_view config_source) {
  if (embedding == nullptr) {
    return absl::OkStatus();
  }
  if (embedding->shape.size() != 2 || embedding->shape[0] != config.vocab_size ||
      embedding->shape[1] != config.hidden_size) {
    std::string shape;
    for (const int64_t d : embedding->shape) {
      shape += fmt::format("{}{}", shape.empty() ? "" : ", ", d);
    }
    return absl::InvalidArgumentError(fmt::format(
        "{}: tensor '{}': field 'shape': [{}] does not match vocab_size {} x "
        "hidden_size {} from {}",
        source, embedding->name, shape, config.vocab_size, config.hidden_size, config_source));
  }
  return absl::OkStatus();
}

}  // namespace

std::string_view WeightFormatName(WeightFormat format) {
  switch (format) {
    case WeightFormat::kSafetensors:
      return "safetensors";
    case WeightFormat::kShardedSafetensors:
      return "sharded safetensors";
    case WeightFormat::kGguf:
      return "gguf";
  }
  return "unknown";
}

absl::StatusOr<std::unique_ptr<ModelFiles>> ModelFiles::Open(const std::string& path) {
  std::unique_ptr<ModelFiles> files(new ModelFiles());
  files->path_ = path;
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    SY_RETURN_IF_ERROR(files->OpenDirectory());
  } else if (std::filesystem::is_regular_file(path, ec)) {
    SY_RETURN_IF_ERROR(files->OpenGguf());
  } else {
    return absl::NotFoundError(fmt::format("{}: no such model directory or .gguf file", path));
  }
  return files;
}

absl::Status ModelFiles::OpenDirectory() {
  const std::filesystem::path dir(path_);
  const std::string config_json = IfExists(dir / "config.json");
  if (config_json.empty()) {
    return absl::NotFoundError(fmt::format("{}: no config.json in the model directory", path_));
  }
  SY_ASSIGN_OR_RETURN(config_, LoadModelConfig(config_json));
  tokenizer_json_path_ = IfExists(dir / "tokenizer.json");
  generation_config_path_ = IfExists(dir / "generation_config.json");

  const std::string index = IfExists(dir / "model.safetensors.index.json");
  const std::string single = IfExists(dir / "model.safetensors");
  if (!index.empty()) {
    format_ = WeightFormat::kShardedSafetensors;
    SY_ASSIGN_OR_RETURN(checkpoint_, SafetensorsCheckpoint::Open(index));
  } else if (!single.empty()) {
    format_ = WeightFormat::kSafetensors;
    SY_ASSIGN_OR_RETURN(checkpoint_, SafetensorsCheckpoint::Open(single));
  } else {
    return absl::NotFoundError(fmt::format(
        "{}: neither model.safetensors nor model.safetensors.index.json is present", path_));
  }
  const TensorView* embedding = checkpoint_->Find("model.embed_tokens.weight");
  const std::string source = embedding == nullptr ? path_ : index.empty() ? single : index;
  return CheckEmbedding(config_, embedding, source, config_json);
}

absl::Status ModelFiles::OpenGguf() {
  format_ = WeightFormat::kGguf;
  SY_ASSIGN_OR_RETURN(gguf_, GgufFile::Open(path_));
  SY_ASSIGN_OR_RETURN(config_, ModelConfigFromGguf(*gguf_));
  return CheckEmbedding(config_, gguf_->FindTensor("token_embd.weight"), path_,
                        "the GGUF metadata");
}

const std::vector<TensorView>& ModelFiles::tensors() const {
  return gguf_ != nullptr ? gguf_->tensors() : checkpoint_->tensors();
}

const TensorView* ModelFiles::FindTensor(std::string_view name) const {
  return gguf_ != nullptr ? gguf_->FindTensor(name) : checkpoint_->Find(name);
}

int64_t ModelFiles::ParameterCount() const {
  int64_t total = 0;
  for (const TensorView& t : tensors()) {
    total += t.num_elements;
  }
  return total;
}

uint64_t ModelFiles::WeightFileBytes() const {
  if (gguf_ != nullptr) {
    return gguf_->file_size();
  }
  uint64_t total = 0;
  for (const auto& file : checkpoint_->files()) {
    total += file->file_size();
  }
  return total;
}

std::vector<std::string> ModelFiles::WeightFiles() const {
  if (gguf_ != nullptr) {
    return {gguf_->source()};
  }
  std::vector<std::string> out;
  for (const auto& file : checkpoint_->files()) {
    out.push_back(file->source());
  }
  return out;
}

}  // namespace switchyard::model
