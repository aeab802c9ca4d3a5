// Added tokens (tokenizer.json "added_tokens"): strings matched in the input before
// normalization and pre-tokenization, as HF's AddedVocabulary does, with lstrip, rstrip
// and single_word. Immutable after construction; Split may be called from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"

namespace switchyard::text::internal {

struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
  bool normalized = false;
};

// One segment of the input: either an added token's id or plain text.
struct Segment {
  std::string_view text;
  int32_t id = -1;  // -1: plain text
  bool at_origin = false;
};
// Room for a few added tokens and the text between them inline.
using Segments = absl::InlinedVector<Segment, 8>;

// Leftmost-longest matching of a set of literal patterns (a byte trie).
class AddedTokenMatcher {
 public:
  // `patterns[i]` is the text to find for `tokens[i]` (the content, normalized when the
  // token is). Empty patterns are ignored.
  AddedTokenMatcher(std::vector<AddedToken> tokens, const std::vector<std::string>& patterns);

  // Splits `text` around matches, applying each token's rules; appends to `out`.
  // Segments alias `text`. `at_origin` says whether `text` starts the input.
  void Split(std::string_view text, bool at_origin, Segments* out) const;

  bool empty() const { return nodes_.size() <= 1; }

 private:
  struct Node {
    absl::flat_hash_map<uint8_t, int32_t> children;
    int32_t token = -1;  // index into tokens_ when a pattern ends here
  };
  // Longest match starting at `pos`: (length, token index), or (0, -1).
  std::pair<size_t, int32_t> LongestAt(std::string_view text, size_t pos) const;
  // The first position at or after `pos` whose byte starts a pattern, or text.size().
  size_t NextCandidate(std::string_view text, size_t pos) const;

  std::vector<AddedToken> tokens_;
  std::vector<Node> nodes_;
  bool first_byte_[256] = {};
  // The one byte every pattern starts with, or -1 (usual: "<" of "<|...|>", "<s>").
  int single_first_byte_ = -1;
};

}  // namespace switchyard::text::internal
