// Tokenizer: text <-> token ids with the behaviour of Hugging Face `tokenizers` for the
// BPE families that Llama-style models use: byte-level BPE (GPT-2, Llama-3, Qwen2/3) and
// SentencePiece-style BPE (Llama-2, Mistral: "▁", byte fallback, fuse_unk).
//
// Built from a tokenizer.json (FromJson/FromJsonFile) or from bare vocabulary data such as
// GGUF metadata (FromVocab). A Tokenizer is immutable after construction: every const
// method may be called from any number of threads at once. Internal caches are bounded and
// synchronised. The Tokenizer owns all of its data; returned string_views point into it and
// live as long as the Tokenizer.
//
// Invalid UTF-8 policy: Encode first replaces each maximal invalid subsequence of the input
// with U+FFFD (base::SanitizeUtf8), which is what Python's
// `bytes.decode("utf-8", errors="replace")` does; an HF user must decode bytes that way
// before calling `tokenizers`, so ids match HF on the replaced text.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace switchyard::text {

// Everything needed to build a tokenizer without tokenizer.json (GGUF metadata gives this).
struct VocabSpec {
  enum class Kind {
    kByteLevelBpe,      // GGUF tokenizer.ggml.model "gpt2"
    kSentencePieceBpe,  // GGUF tokenizer.ggml.model "llama"
  };
  Kind kind = Kind::kByteLevelBpe;
  std::vector<std::string> tokens;   // id -> token text (byte-level or "▁" form as stored)
  std::vector<float> scores;         // may be empty; SPM uses scores as merge priority
  std::vector<int32_t> token_types;  // GGUF: 1 normal, 2 unknown, 3 control,
                                     // 4 user-defined, 5 unused, 6 byte; may be empty
  std::vector<std::string> merges;   // "a b" strings; may be empty for SPM
  std::string pre_tokenizer;         // GGUF tokenizer.ggml.pre: "llama-bpe", "qwen2", ...
  std::optional<int32_t> bos_id, eos_id, unk_id, pad_id;
  bool add_bos = false;
  bool add_eos = false;
  bool add_space_prefix = true;  // SPM: prepend "▁" to the text
};

class Tokenizer {
 public:
  // Loads a Hugging Face tokenizer.json. Errors name the file and the offending field.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromJsonFile(const std::string& path);
  // `source` names the origin (a path) in error messages.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromJson(std::string_view json,
                                                             std::string_view source);
  // Builds from bare vocabulary data. Byte-level: `pre_tokenizer` picks the split regex
  // ("llama-bpe"/"llama3" -> Llama-3, "qwen2" -> Qwen2, otherwise GPT-2). SentencePiece:
  // merges come from `scores` when `merges` is empty; control and user-defined tokens
  // (token_types 3 and 4) are matched in the text as added tokens.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromVocab(const VocabSpec& spec);

  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Same ids as HF `tokenizer.encode(text, add_special_tokens=...).ids`. `text` is bytes;
  // invalid UTF-8 is replaced first (see the policy above). Fails only when a piece of text
  // cannot be represented (no byte fallback and no unk token).
  absl::StatusOr<std::vector<int32_t>> Encode(std::string_view text, bool add_special_tokens) const;

  // Same text as HF `tokenizer.decode(ids, skip_special_tokens=...)`. Ids outside the
  // vocabulary are skipped, as HF does. The result may hold U+FFFD where byte tokens do not
  // form valid UTF-8.
  std::string Decode(std::span<const int32_t> ids, bool skip_special_tokens) const;

  size_t vocab_size() const;
  std::optional<int32_t> TokenToId(std::string_view token) const;
  // Empty for an id outside the vocabulary.
  std::string_view IdToToken(int32_t id) const;
  // True for added tokens marked special (HF "special": true; GGUF control tokens).
  bool IsSpecial(int32_t id) const;
  // True for any added token, special or not (HF's added_tokens_decoder).
  bool IsAddedToken(int32_t id) const;
  // The bytes token `id` adds to a decoded text when it is not the first token (byte-level
  // characters mapped back to bytes, "▁" as a space, <0xNN> as its byte; no UTF-8 repair).
  // Empty for an id outside the vocabulary.
  std::string TokenBytes(int32_t id) const;

  std::optional<int32_t> bos_id() const;
  std::optional<int32_t> eos_id() const;
  std::optional<int32_t> unk_id() const;
  std::optional<int32_t> pad_id() const;

  struct Impl;

 private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace switchyard::text
