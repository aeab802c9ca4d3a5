// The BPE model: encodes one pre-tokenized word into token ids by applying ranked merges,
// with HF's byte fallback, unknown-token fusing, subword prefix/suffix and ignore_merges.
// Immutable after Create except for a bounded, lock-free word cache (WordCache), so
// EncodeWord may be called from any thread.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"

#include "text/internal/word_cache.h"

namespace switchyard::text::internal {

struct BpeOptions {
  std::optional<int32_t> unk_id;
  std::string continuing_subword_prefix;
  std::string end_of_word_suffix;
  bool fuse_unk = false;
  bool byte_fallback = false;
  bool ignore_merges = false;
  // Words arrive as raw bytes and are mapped to GPT-2's byte-level alphabet here.
  bool byte_level_input = false;
  // Words with more bytes than this are not cached.
  size_t max_cached_word_bytes = 256;
  size_t cache_capacity = 1 << 16;
};

class BpeModel {
 public:
  // `vocab`: token text -> id. `merges`: pairs of token texts, in rank order. Errors name
  // `source` and the merge index.
  static absl::StatusOr<std::unique_ptr<BpeModel>> Create(
      absl::flat_hash_map<std::string, int32_t> vocab,
      const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions options,
      std::string_view source);

  // Appends the ids of `word` (REQUIRES: valid UTF-8 unless byte_level_input).
  void EncodeWord(std::string_view word, std::vector<int32_t>* ids) const;

  std::optional<int32_t> TokenToId(std::string_view token) const;
  const absl::flat_hash_map<std::string, int32_t>& vocab() const { return vocab_; }

 private:
  struct MergeTarget {
    int32_t rank;
    int32_t new_id;
  };
  static uint64_t PairKey(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }

  explicit BpeModel(BpeOptions options);
  // Decides whether words may be cut before "▁" (see split_at_marker_).
  void PlanMarkerSplits();
  void EncodeCached(std::string_view word, std::vector<int32_t>* ids) const;
  // The cache miss path of EncodeCached.
  void EncodeAndCache(std::string_view word, size_t hash, std::vector<int32_t>* ids) const;
  void EncodeUncached(std::string_view word, std::vector<int32_t>* ids) const;
  void InitialSymbols(std::string_view word, std::vector<int32_t>* symbols) const;
  void MergeAll(std::vector<int32_t>* symbols) const;

  BpeOptions options_;
  absl::flat_hash_map<std::string, int32_t> vocab_;
  absl::flat_hash_map<uint64_t, MergeTarget> merges_;
  std::array<int32_t, 256> byte_fallback_ids_{};  // -1 where <0xNN> is missing
  std::array<int32_t, 256> byte_level_ids_{};     // byte-level char of each byte, or -1
  bool simple_byte_level_ = false;                // byte_level_input without prefix/suffix
  // SentencePiece-style models see whole texts as one word. No merge can cross a point
  // between a character c and a following "▁" unless some token holds "c▁" with c != "▁",
  // so cutting words there gives the same ids while keeping pieces short and cacheable.
  // `marker_joiners_` holds those characters c.
  bool split_at_marker_ = false;
  absl::flat_hash_set<uint32_t> marker_joiners_;

  mutable WordCache cache_;
};

}  // namespace switchyard::text::internal
