#include "model/gguf_tokenizer.h"

#include <optional>
#include <string_view>

#include "absl/status/status.h"
#include "fmt/format.h"

#include "base/status_macros.h"

namespace switchyard::model {
namespace {

absl::Status KeyError(const GgufFile& gguf, std::string_view key, std::string_view what) {
  return absl::InvalidArgumentError(fmt::format("{}: field '{}': {}", gguf.source(), key, what));
}

absl::Status OptionalId(const GgufFile& gguf, std::string_view key, size_t vocab_size,
                        std::optional<int32_t>* out) {
  if (gguf.Find(key) == nullptr) {
    return absl::OkStatus();
  }
  SY_ASSIGN_OR_RETURN(const int64_t id, gguf.GetInt(key));
  if (id < 0 || static_cast<uint64_t>(id) >= vocab_size) {
    return KeyError(gguf, key, fmt::format("{} is outside the vocabulary of {}", id, vocab_size));
  }
  *out = static_cast<int32_t>(id);
  return absl::OkStatus();
}

absl::Status OptionalBool(const GgufFile& gguf, std::string_view key, bool* out) {
  if (gguf.Find(key) == nullptr) {
    return absl::OkStatus();
  }
  SY_ASSIGN_OR_RETURN(*out, gguf.GetBool(key));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<text::VocabSpec> VocabSpecFromGguf(const GgufFile& gguf) {
  text::VocabSpec spec;
  SY_ASSIGN_OR_RETURN(const std::string_view model, gguf.GetString("tokenizer.ggml.model"));
  if (model == "gpt2") {
    spec.kind = text::VocabSpec::Kind::kByteLevelBpe;
    // llama.cpp's defaults when the flags are absent.
    spec.add_bos = false;
    spec.add_space_prefix = false;
  } else if (model == "llama") {
    spec.kind = text::VocabSpec::Kind::kSentencePieceBpe;
    spec.add_bos = true;
    spec.add_space_prefix = true;
  } else {
    return KeyError(
        gguf, "tokenizer.ggml.model",
        fmt::format("unsupported tokenizer '{}' (supported: gpt2, llama)", std::string(model)));
  }
  SY_ASSIGN_OR_RETURN(const std::vector<std::string_view> tokens,
                      gguf.GetStringArray("tokenizer.ggml.tokens"));
  if (tokens.empty()) {
    return KeyError(gguf, "tokenizer.ggml.tokens", "is empty");
  }
  if (tokens.size() > static_cast<size_t>(INT32_MAX)) {
    return KeyError(gguf, "tokenizer.ggml.tokens", "has more than 2^31 entries");
  }
  spec.tokens.assign(tokens.begin(), tokens.end());

  if (gguf.Find("tokenizer.ggml.scores") != nullptr) {
    SY_ASSIGN_OR_RETURN(const std::vector<double> scores,
                        gguf.GetFloatArray("tokenizer.ggml.scores"));
    if (scores.size() != tokens.size()) {
      return KeyError(gguf, "tokenizer.ggml.scores",
                      fmt::format("has {} entries for {} tokens", scores.size(), tokens.size()));
    }
    spec.scores.assign(scores.begin(), scores.end());
  }
  if (gguf.Find("tokenizer.ggml.token_type") != nullptr) {
    SY_ASSIGN_OR_RETURN(const std::vector<int64_t> types,
                        gguf.GetIntArray("tokenizer.ggml.token_type"));
    if (types.size() != tokens.size()) {
      return KeyError(gguf, "tokenizer.ggml.token_type",
                      fmt::format("has {} entries for {} tokens", types.size(), tokens.size()));
    }
    spec.token_types.reserve(types.size());
    for (const int64_t t : types) {
      if (t < 0 || t > 6) {
        return KeyError(gguf, "tokenizer.ggml.token_type", fmt::format("unknown type {}", t));
      }
      spec.token_types.push_back(static_cast<int32_t>(t));
    }
  }
  if (gguf.Find("tokenizer.ggml.merges") != nullptr) {
    SY_ASSIGN_OR_RETURN(const std::vector<std::string_view> merges,
                        gguf.GetStringArray("tokenizer.ggml.merges"));
    spec.merges.assign(merges.begin(), merges.end());
  }
  if (gguf.Find("tokenizer.ggml.pre") != nullptr) {
    SY_ASSIGN_OR_RETURN(const std::string_view pre, gguf.GetString("tokenizer.ggml.pre"));
    spec.pre_tokenizer = std::string(pre);
  }
  SY_RETURN_IF_ERROR(OptionalId(gguf, "tokenizer.ggml.bos_token_id", tokens.size(), &spec.bos_id));
  SY_RETURN_IF_ERROR(OptionalId(gguf, "tokenizer.ggml.eos_token_id", tokens.size(), &spec.eos_id));
  SY_RETURN_IF_ERROR(
      OptionalId(gguf, "tokenizer.ggml.unknown_token_id", tokens.size(), &spec.unk_id));
  SY_RETURN_IF_ERROR(
      OptionalId(gguf, "tokenizer.ggml.padding_token_id", tokens.size(), &spec.pad_id));
  SY_RETURN_IF_ERROR(OptionalBool(gguf, "tokenizer.ggml.add_bos_token", &spec.add_bos));
  SY_RETURN_IF_ERROR(OptionalBool(gguf, "tokenizer.ggml.add_eos_token", &spec.add_eos));
  SY_RETURN_IF_ERROR(OptionalBool(gguf, "tokenizer.ggml.add_space_prefix", &spec.add_space_prefix));
  return spec;
}

absl::StatusOr<std::unique_ptr<text::Tokenizer>> LoadTokenizerFromGguf(const GgufFile& gguf) {
  SY_ASSIGN_OR_RETURN(const text::VocabSpec spec, VocabSpecFromGguf(gguf));
  absl::StatusOr<std::unique_ptr<text::Tokenizer>> tokenizer = text::Tokenizer::FromVocab(spec);
  if (!tokenizer.ok()) {
    return absl::Status(tokenizer.status().code(),
                        fmt::format("{}: tokenizer.ggml.*: {}", gguf.source(),
                                    std::string(tokenizer.status().message())));
  }
  return tokenizer;
}

absl::StatusOr<std::unique_ptr<text::Tokenizer>> LoadTokenizerFromGgufFile(
    const std::string& path) {
  SY_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> gguf, GgufFile::Open(path));
  return LoadTokenizerFromGguf(*gguf);
}

}  // namespace switchyard::model
