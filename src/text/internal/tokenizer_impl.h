// The parts of a Tokenizer, assembled by the tokenizer.json loader or FromVocab and used
// read-only afterwards (see text/tokenizer.h for the threading contract).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"

#include "text/internal/added_vocab.h"
#include "text/internal/bpe_model.h"
#include "text/internal/decoder.h"
#include "text/internal/normalizer.h"
#include "text/internal/post_processor.h"
#include "text/internal/pre_tokenizer.h"
#include "text/tokenizer.h"

namespace switchyard::text {

struct Tokenizer::Impl {
  std::unique_ptr<internal::Normalizer> normalizer;       // may be null
  std::unique_ptr<internal::PreTokenizer> pre_tokenizer;  // may be null
  std::unique_ptr<internal::BpeModel> model;
  std::unique_ptr<internal::PostProcessor> post_processor;  // may be null
  std::unique_ptr<internal::Decoder> decoder;               // may be null: join with " "
  // Added tokens matched before normalization, and those matched after it.
  std::unique_ptr<internal::AddedTokenMatcher> raw_added;
  std::unique_ptr<internal::AddedTokenMatcher> normalized_added;

  std::vector<std::string> id_to_token;  // model and added tokens; "" for holes
  std::vector<bool> special;             // per id
  absl::flat_hash_map<std::string, int32_t> added_token_to_id;
  std::optional<int32_t> bos_id, eos_id, unk_id, pad_id;

  // Builds the added-token matchers and id tables from the model vocab and `added`. Ids
  // must be dense up to a gap of kMaxIdGap (the table is indexed by id), else
  // InvalidArgument: a hostile file must not make us allocate gigabytes.
  absl::Status IndexTokens(const std::vector<internal::AddedToken>& added);
  static constexpr int64_t kMaxIdGap = 1 << 16;
};

}  // namespace switchyard::text
