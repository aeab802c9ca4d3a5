#include "text/internal/added_vocab.h"

#include <algorithm>

#include "text/internal/unicode.h"

namespace switchyard::text::internal {
namespace {

bool IsWordChar(uint32_t cp) {
  return cp == '_' || IsAlphanumeric(cp);
}

uint32_t LastCodePoint(std::string_view s) {
  size_t start = s.size() - 1;
  while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80)
    --start;
  return NextCodePoint(s, &start);
}

// Byte offset where the trailing whitespace of `s` begins.
size_t TrailingSpaceStart(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    size_t start = end - 1;
    while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80)
      --start;
    size_t pos = start;
    if (!IsWhitespace(NextCodePoint(s, &pos)))
      break;
    end = start;
  }
  return end;
}

// Byte length of the leading whitespace of `s`.
size_t LeadingSpaceLength(std::string_view s) {
  size_t pos = 0;
  while (pos < s.size()) {
    size_t next = pos;
    if (!IsWhitespace(NextCodePoint(s, &next)))
      break;
    pos = next;
  }
  return pos;
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens,
                                     const std::vector<std::string>& patterns)
    : tokens_(std::move(tokens)) {
  nodes_.emplace_back();
  for (size_t t = 0; t < tokens_.size(); ++t) {
    const std::string& p = patterns[t];
    if (p.empty())
      continue;
    first_byte_[static_cast<uint8_t>(p[0])] = true;
    int32_t node = 0;
    for (char c : p) {
      auto it = nodes_[node].children.find(static_cast<uint8_t>(c));
      if (it == nodes_[node].children.end()) {
        int32_t child = static_cast<int32_t>(nodes_.size());
        nodes_[node].children.emplace(static_cast<uint8_t>(c), child);
        nodes_.emplace_back();
        node = child;
      } else {
        node = it->second;
      }
    }
    // The first token with a given text wins.
    if (nodes_[node].token < 0)
      nodes_[node].token = static_cast<int32_t>(t);
  }
  int num_first_bytes = 0;
  for (int b = 0; b < 256; ++b) {
    if (first_byte_[b]) {
      ++num_first_bytes;
      single_first_byte_ = b;
    }
  }
  if (num_first_bytes != 1)
    single_first_byte_ = -1;
}

size_t AddedTokenMatcher::NextCandidate(std::string_view text, size_t pos) const {
  if (single_first_byte_ >= 0) {
    // memchr: many bytes at a time.
    return std::min(text.find(static_cast<char>(single_first_byte_), pos), text.size());
  }
  while (pos < text.size() && !first_byte_[static_cast<uint8_t>(text[pos])])
    ++pos;
  return pos;
}

std::pair<size_t, int32_t> AddedTokenMatcher::LongestAt(std::string_view text, size_t pos) const {
  std::pair<size_t, int32_t> best{0, -1};
  int32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    auto it = nodes_[node].children.find(static_cast<uint8_t>(text[i]));
    if (it == nodes_[node].children.end())
      break;
    node = it->second;
    if (nodes_[node].token >= 0)
      best = {i + 1 - pos, nodes_[node].token};
  }
  return best;
}

void AddedTokenMatcher::Split(std::string_view text, bool at_origin, Segments* out) const {
  if (tokens_.empty()) {  // nothing to look for
    if (!text.empty())
      out->push_back(Segment{text, -1, at_origin});
    return;
  }
  size_t emitted = 0;  // end of the last segment pushed
  size_t pos = 0;
  while ((pos = NextCandidate(text, pos)) < text.size()) {
    auto [length, index] = LongestAt(text, pos);
    if (index < 0) {
      ++pos;
      continue;
    }
    const AddedToken& token = tokens_[index];
    size_t start = pos, stop = pos + length;
    // Matching resumes after the match, and after the spaces rstrip takes.
    pos = stop;
    if (token.single_word) {
      bool word_before = start > 0 && IsWordChar(LastCodePoint(text.substr(0, start)));
      size_t after = stop;
      bool word_after = stop < text.size() && IsWordChar(NextCodePoint(text, &after));
      if (word_before || word_after)
        continue;
    }
    if (token.lstrip)
      start = std::max(TrailingSpaceStart(text.substr(0, start)), emitted);
    if (token.rstrip) {
      stop += LeadingSpaceLength(text.substr(stop));
      pos = stop;
    }
    if (emitted < start) {
      out->push_back(Segment{text.substr(emitted, start - emitted), -1, at_origin && emitted == 0});
    }
    out->push_back(Segment{text.substr(start, stop - start), token.id, false});
    emitted = stop;
  }
  if (emitted < text.size()) {
    out->push_back(Segment{text.substr(emitted), -1, at_origin && emitted == 0});
  }
}

}  // namespace switchyard::text::internal
