// TokenVocabulary and TokenMasker: which tokens a GrammarMatcher allows next.
//
// TokenVocabulary holds every token's bytes (Tokenizer::TokenBytes; special tokens and ids
// without text have none and are never allowed) and a byte trie of them laid out in preorder,
// each node knowing where its subtree ends, so that a walk can skip a rejected prefix's whole
// subtree. Built once per tokenizer; immutable, shared by any thread.
//
// TokenMasker::Fill walks the trie with the matcher's trial steps, one byte per trie node, and
// sets the bit of every token whose bytes the grammar accepts from the matcher's state. The
// end-of-sequence ids are allowed exactly when the output so far is complete. The last few
// masks are kept by matcher state (GrammarMatcher::AppendStateKey), so a state that repeats
// (inside a string, a number, the same step of n sequences) costs a copy. One masker per
// thread (the engine loop); it reuses its buffers, so Fill allocates nothing in steady state.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "structured/grammar_matcher.h"
#include "text/tokenizer.h"

namespace switchyard::structured {

// A bitset over token ids: bit (id % 32) of word (id / 32).
inline size_t MaskWords(int64_t vocab_size) {
  return static_cast<size_t>((vocab_size + 31) / 32);
}
inline bool MaskTest(std::span<const uint32_t> mask, int32_t id) {
  return ((mask[static_cast<size_t>(id) / 32] >> (static_cast<uint32_t>(id) % 32)) & 1u) != 0;
}

class TokenVocabulary {
 public:
  // `vocab_size` is the model's (its logit rows); ids past the tokenizer's have no bytes.
  // `eos_ids` are the ids that end a sequence.
  TokenVocabulary(const text::Tokenizer& tokenizer, int64_t vocab_size,
                  std::vector<int32_t> eos_ids);

  int64_t vocab_size() const { return vocab_size_; }
  // Empty for special and unknown ids.
  std::string_view bytes(int32_t id) const {
    if (id < 0 || id >= vocab_size_)
      return {};
    const auto i = static_cast<size_t>(id);
    return std::string_view(bytes_).substr(offsets_[i], offsets_[i + 1] - offsets_[i]);
  }
  bool is_eos(int32_t id) const;
  const std::vector<int32_t>& eos_ids() const { return eos_ids_; }
  size_t num_trie_nodes() const { return nodes_.size(); }

 private:
  friend class TokenMasker;
  struct TrieNode {
    uint8_t byte = 0;
    uint32_t depth = 0;        // 1 for a first byte
    uint32_t subtree_end = 0;  // first node index past this node's subtree
    uint32_t tokens_begin = 0;
    uint32_t tokens_end = 0;  // ids ending here: token_ids_[tokens_begin, tokens_end)
  };

  int64_t vocab_size_;
  std::vector<int32_t> eos_ids_;
  std::string bytes_;
  std::vector<uint32_t> offsets_;  // vocab_size + 1
  std::vector<TrieNode> nodes_;
  std::vector<int32_t> token_ids_;
  uint32_t max_depth_ = 0;
};

class TokenMasker {
 public:
  // Borrows `vocab`, which must outlive the masker.
  explicit TokenMasker(const TokenVocabulary* vocab);

  // Overwrites `mask` (MaskWords(vocab_size) words) with the tokens allowed next. Leaves the
  // matcher's committed state unchanged.
  void Fill(GrammarMatcher* matcher, std::span<uint32_t> mask);

  const TokenVocabulary& vocab() const { return *vocab_; }

 private:
  static constexpr size_t kCacheEntries = 16;
  struct CacheEntry {
    // Held so that its address cannot be reused by another grammar while cached.
    std::shared_ptr<const Grammar> grammar;  // null: unused
    std::vector<int32_t> key;
    std::vector<uint32_t> mask;
    uint64_t last_use = 0;
  };

  // The walk itself.
  void Compute(GrammarMatcher* matcher, std::span<uint32_t> mask);

  const TokenVocabulary* vocab_;
  std::vector<GrammarMatcher::Level> levels_;  // by trie depth
  std::vector<CacheEntry> cache_;
  std::vector<int32_t> key_;
  uint64_t uses_ = 0;
};

}  // namespace switchyard::structured
