#include "text/incremental_detokenizer.h"

#include <algorithm>

namespace switchyard::text {
namespace {

// Prompt tokens decoded with the first generated ones, so that the first piece starts
// with the right spacing.
constexpr size_t kPromptContext = 5;
// Ids before the window are dropped once this many have accumulated.
constexpr size_t kCompactThreshold = 4096;

// "<0xNN>": a byte-fallback token.
bool IsByteToken(std::string_view token) {
  return token.size() == 6 && token.compare(0, 3, "<0x") == 0 && token[5] == '>';
}

bool EndsWithReplacement(const std::string& s) {
  return s.size() >= 3 && s.compare(s.size() - 3, 3, "\xEF\xBF\xBD") == 0;
}

}  // namespace

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer* tokenizer, bool skip_special_tokens,
                                               std::span<const int32_t> prompt_ids,
                                               bool spaces_between_special_tokens)
    : tokenizer_(tokenizer),
      skip_special_tokens_(skip_special_tokens),
      spaces_between_special_tokens_(spaces_between_special_tokens),
      ids_(prompt_ids.begin(), prompt_ids.end()),
      prefix_offset_(prompt_ids.size() - std::min(prompt_ids.size(), kPromptContext)),
      read_offset_(prompt_ids.size()) {}

std::string IncrementalDetokenizer::DecodeRange(size_t begin, size_t end) const {
  return tokenizer_->Decode(std::span<const int32_t>(ids_).subspan(begin, end - begin),
                            skip_special_tokens_);
}

std::string IncrementalDetokenizer::Push(int32_t id) {
  ids_.push_back(id);
  if (!spaces_between_special_tokens_) {
    const bool added = tokenizer_->IsAddedToken(id);
    const bool after_added = last_added_;
    last_added_ = added;
    // Only when nothing held back has text (a skipped special token has none), so the bare
    // content is all this id completes.
    if (added && after_added && !(skip_special_tokens_ && tokenizer_->IsSpecial(id)) &&
        (read_offset_ + 1 == ids_.size() || DecodeRange(prefix_offset_, ids_.size() - 1) ==
                                                DecodeRange(prefix_offset_, read_offset_))) {
      prefix_offset_ = read_offset_;
      read_offset_ = ids_.size();
      return std::string(tokenizer_->IdToToken(id));
    }
  }
  // A run of byte-fallback tokens decodes as a whole: one invalid byte turns the entire run
  // into U+FFFDs, so no part of a run is final until a non-byte token ends it.
  if (IsByteToken(tokenizer_->IdToToken(id)))
    return std::string();
  std::string prefix_text = DecodeRange(prefix_offset_, read_offset_);
  std::string new_text = DecodeRange(prefix_offset_, ids_.size());
  if (new_text.size() <= prefix_text.size() || EndsWithReplacement(new_text) ||
      new_text.compare(0, prefix_text.size(), prefix_text) != 0) {
    return std::string();
  }
  prefix_offset_ = read_offset_;
  read_offset_ = ids_.size();
  if (prefix_offset_ >= kCompactThreshold) {
    ids_.erase(ids_.begin(), ids_.begin() + static_cast<std::ptrdiff_t>(prefix_offset_));
    read_offset_ -= prefix_offset_;
    prefix_offset_ = 0;
  }
  return new_text.substr(prefix_text.size());
}

std::string IncrementalDetokenizer::Flush() {
  std::string prefix_text = DecodeRange(prefix_offset_, read_offset_);
  std::string new_text = DecodeRange(prefix_offset_, ids_.size());
  prefix_offset_ = read_offset_ = ids_.size();
  if (new_text.size() <= prefix_text.size() ||
      new_text.compare(0, prefix_text.size(), prefix_text) != 0) {
    return std::string();
  }
  return new_text.substr(prefix_text.size());
}

}  // namespace switchyard::text
