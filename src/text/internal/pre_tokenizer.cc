#include "text/internal/pre_tokenizer.h"

#include <algorithm>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "fmt/format.h"

#include "base/status_macros.h"
#include "text/internal/byte_level.h"
#include "text/internal/metaspace_options.h"
#include "text/internal/regex.h"
#include "text/internal/unicode.h"

namespace switchyard::text::internal {
namespace {

// Words (or pieces) of a short prompt: the lists start with room for this many.
constexpr size_t kTypicalWords = 16;

// Makes room for `more` pieces in `out`, at least doubling the capacity when it grows.
void ReserveMore(std::vector<Piece>* out, size_t more) {
  const size_t needed = out->size() + more;
  if (needed > out->capacity())
    out->reserve(std::max(needed, 2 * out->capacity()));
}

// Applies `split` to every piece, replacing the list.
template <typename Fn>
absl::Status ForEachPiece(std::vector<Piece>* pieces, Fn split) {
  std::vector<Piece> out;
  out.reserve(std::max(pieces->size(), kTypicalWords));
  for (const Piece& piece : *pieces)
    SY_RETURN_IF_ERROR(split(piece, &out));
  *pieces = std::move(out);
  return absl::OkStatus();
}

// Appends the ranges of the code points of `s` that satisfy `pred`.
template <typename Pred>
void CharMatches(std::string_view s, Pred pred, ByteRanges* matches) {
  size_t pos = 0;
  while (pos < s.size()) {
    size_t start = pos;
    if (pred(NextCodePoint(s, &pos)))
      matches->emplace_back(start, pos);
  }
}

// Cuts the range [offset, offset + size) of a text at `matches` (sorted, non-overlapping,
// relative to `offset`) with `behavior`; appends the non-empty resulting ranges to `out`.
void CutByMatches(size_t offset, size_t size, const ByteRanges& matches, bool invert,
                  SplitBehavior behavior, ByteRanges* out) {
  struct Part {
    size_t begin, end;
    bool is_match;
  };
  const auto emit = [&](size_t begin, size_t end) {
    if (end > begin)
      out->emplace_back(offset + begin, offset + end);
  };
  if (behavior == SplitBehavior::kIsolated) {
    // Every match and every gap between them is a piece: no merging, so no part list.
    size_t prev = 0;
    for (auto [begin, end] : matches) {
      emit(prev, begin);
      emit(begin, end);
      prev = end;
    }
    emit(prev, size);
    return;
  }
  using Parts = absl::InlinedVector<Part, kTypicalWords>;
  Parts parts;
  parts.reserve(matches.size() * 2 + 1);
  size_t prev = 0;
  for (auto [begin, end] : matches) {
    if (prev != begin)
      parts.push_back({prev, begin, invert});
    parts.push_back({begin, end, !invert});
    prev = end;
  }
  if (prev != size || parts.empty())
    parts.push_back({prev, size, invert});

  Parts merged;
  merged.reserve(parts.size());
  switch (behavior) {
    case SplitBehavior::kIsolated:  // handled above
      break;
    case SplitBehavior::kRemoved:
      for (const Part& p : parts) {
        if (!p.is_match)
          merged.push_back(p);
      }
      break;
    case SplitBehavior::kMergedWithPrevious: {
      bool previous_match = false;
      for (const Part& p : parts) {
        if (p.is_match && !previous_match && !merged.empty()) {
          merged.back().end = p.end;
        } else {
          merged.push_back(p);
        }
        previous_match = p.is_match;
      }
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      bool previous_match = false;
      for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
        if (it->is_match && !previous_match && !merged.empty()) {
          merged.back().begin = it->begin;
        } else {
          merged.push_back(*it);
        }
        previous_match = it->is_match;
      }
      std::reverse(merged.begin(), merged.end());
      break;
    }
    case SplitBehavior::kContiguous: {
      bool previous_match = false;
      for (const Part& p : parts) {
        if (p.is_match == previous_match && !merged.empty()) {
          merged.back().end = p.end;
        } else {
          merged.push_back(p);
        }
        previous_match = p.is_match;
      }
      break;
    }
  }
  for (const Part& p : merged)
    emit(p.begin, p.end);
}

// Cuts each of `ranges` of `text` at the matches that `find` appends for the range's text.
template <typename Find>
absl::Status CutEach(std::string_view text, ByteRanges* ranges, bool invert, SplitBehavior behavior,
                     Find find) {
  ByteRanges out, matches;
  for (auto [begin, end] : *ranges) {
    matches.clear();
    SY_RETURN_IF_ERROR(find(text.substr(begin, end - begin), &matches));
    CutByMatches(begin, end - begin, matches, invert, behavior, &out);
  }
  *ranges = std::move(out);
  return absl::OkStatus();
}

// Appends the pieces of `piece` at `cuts` (ranges of its text) to `out`.
void AppendCuts(const Piece& piece, const ByteRanges& cuts, std::vector<Piece>* out) {
  ReserveMore(out, cuts.size());
  for (auto [begin, end] : cuts)
    out->push_back(Piece{piece.text.substr(begin, end - begin), piece.at_origin && begin == 0});
}

// Apply of a pre-tokenizer that only cuts: Cut on each piece.
absl::Status ApplyByCutting(const PreTokenizer& pre, std::vector<Piece>* pieces) {
  ByteRanges cuts;
  return ForEachPiece(pieces, [&](const Piece& piece, std::vector<Piece>* out) {
    if (piece.text.empty())
      return absl::OkStatus();
    cuts.assign(1, {0, piece.text.size()});
    SY_RETURN_IF_ERROR(pre.Cut(piece.text, &cuts));
    AppendCuts(piece, cuts, out);
    return absl::OkStatus();
  });
}

// Base of the pre-tokenizers that only cut: they define Cut alone.
class CuttingPreTokenizer : public PreTokenizer {
 public:
  absl::Status Apply(std::vector<Piece>* pieces) const final {
    return ApplyByCutting(*this, pieces);
  }
  bool OnlyCuts() const final { return true; }
};

absl::StatusOr<SplitBehavior> ParseBehavior(std::string_view name, const base::JsonPath& at) {
  if (name == "Removed")
    return SplitBehavior::kRemoved;
  if (name == "Isolated")
    return SplitBehavior::kIsolated;
  if (name == "MergedWithPrevious")
    return SplitBehavior::kMergedWithPrevious;
  if (name == "MergedWithNext")
    return SplitBehavior::kMergedWithNext;
  if (name == "Contiguous")
    return SplitBehavior::kContiguous;
  return at.Error(fmt::format("unknown split behavior \"{}\"", name));
}

class SequencePreTokenizer final : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> items)
      : items_(std::move(items)),
        only_cuts_(std::all_of(items_.begin(), items_.end(),
                               [](const auto& item) { return item->OnlyCuts(); })) {}
  absl::Status Apply(std::vector<Piece>* pieces) const override {
    // Cutting all the way through copies each word once, not once per step.
    if (only_cuts_)
      return ApplyByCutting(*this, pieces);
    for (const auto& item : items_)
      SY_RETURN_IF_ERROR(item->Apply(pieces));
    return absl::OkStatus();
  }
  bool OnlyCuts() const override { return only_cuts_; }
  absl::Status Cut(std::string_view text, ByteRanges* ranges) const override {
    for (const auto& item : items_)
      SY_RETURN_IF_ERROR(item->Cut(text, ranges));
    return absl::OkStatus();
  }
  bool DefersByteMapping() const override {
    return !items_.empty() && items_.back()->DefersByteMapping();
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> items_;
  bool only_cuts_;
};

class SplitPreTokenizer final : public CuttingPreTokenizer {
 public:
  SplitPreTokenizer(std::string literal, std::unique_ptr<Regex> regex, SplitBehavior behavior,
                    bool invert)
      : literal_(std::move(literal)),
        regex_(std::move(regex)),
        behavior_(behavior),
        invert_(invert) {}
  absl::Status Cut(std::string_view text, ByteRanges* ranges) const override {
    return CutEach(text, ranges, invert_, behavior_, [&](std::string_view s, ByteRanges* matches) {
      if (regex_ != nullptr)
        return regex_->FindAll(s, matches);
      if (!literal_.empty()) {
        size_t pos = 0;
        while ((pos = s.find(literal_, pos)) != std::string_view::npos) {
          matches->emplace_back(pos, pos + literal_.size());
          pos += literal_.size();
        }
      }
      return absl::OkStatus();
    });
  }

 private:
  std::string literal_;
  std::unique_ptr<Regex> regex_;
  SplitBehavior behavior_;
  bool invert_;
};

class ByteLevelPreTokenizer final : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, std::unique_ptr<Regex> regex, bool defer)
      : add_prefix_space_(add_prefix_space), regex_(std::move(regex)), defer_(defer) {}
  absl::Status Apply(std::vector<Piece>* pieces) const override {
    if (OnlyCuts()) {
      if (regex_ != nullptr)
        return ApplyByCutting(*this, pieces);
      // Nothing to add, split or map: only the empty pieces go.
      std::erase_if(*pieces, [](const Piece& piece) { return piece.text.empty(); });
      return absl::OkStatus();
    }
    ByteRanges matches, cuts;
    SY_RETURN_IF_ERROR(ForEachPiece(pieces, [&](const Piece& in, std::vector<Piece>* out) {
      Piece piece = in;
      if (add_prefix_space_ && (piece.text.empty() || piece.text[0] != ' ')) {
        piece.text.insert(0, 1, ' ');
      }
      if (regex_ == nullptr) {
        if (!piece.text.empty())
          out->push_back(std::move(piece));
        return absl::OkStatus();
      }
      matches.clear();
      cuts.clear();
      SY_RETURN_IF_ERROR(regex_->FindAll(piece.text, &matches));
      CutByMatches(0, piece.text.size(), matches, false, SplitBehavior::kIsolated, &cuts);
      AppendCuts(piece, cuts, out);
      return absl::OkStatus();
    }));
    if (!defer_) {
      for (Piece& piece : *pieces) {
        std::string mapped;
        AppendByteLevel(piece.text, &mapped);
        piece.text = std::move(mapped);
      }
    }
    return absl::OkStatus();
  }
  bool OnlyCuts() const override { return defer_ && !add_prefix_space_; }
  absl::Status Cut(std::string_view text, ByteRanges* ranges) const override {
    if (regex_ == nullptr)
      return absl::OkStatus();
    return CutEach(
        text, ranges, false, SplitBehavior::kIsolated,
        [&](std::string_view s, ByteRanges* matches) { return regex_->FindAll(s, matches); });
  }
  bool DefersByteMapping() const override { return defer_; }

 private:
  bool add_prefix_space_;
  std::unique_ptr<Regex> regex_;
  bool defer_;
};

class MetaspacePreTokenizer final : public PreTokenizer {
 public:
  MetaspacePreTokenizer(std::string replacement, PrependScheme scheme, bool split)
      : replacement_(std::move(replacement)), scheme_(scheme), split_(split) {}
  absl::Status Apply(std::vector<Piece>* pieces) const override {
    ByteRanges matches, cuts;
    return ForEachPiece(pieces, [&](const Piece& in, std::vector<Piece>* out) {
      Piece piece{std::string(), in.at_origin};
      for (char c : in.text) {
        if (c == ' ') {
          piece.text.append(replacement_);
        } else {
          piece.text.push_back(c);
        }
      }
      bool starts_with = piece.text.compare(0, replacement_.size(), replacement_) == 0;
      if (!starts_with && (scheme_ == PrependScheme::kAlways ||
                           (scheme_ == PrependScheme::kFirst && piece.at_origin))) {
        piece.text.insert(0, replacement_);
      }
      if (!split_) {
        if (!piece.text.empty())
          out->push_back(std::move(piece));
        return absl::OkStatus();
      }
      matches.clear();
      cuts.clear();
      size_t pos = 0;
      while ((pos = piece.text.find(replacement_, pos)) != std::string::npos) {
        matches.emplace_back(pos, pos + replacement_.size());
        pos += replacement_.size();
      }
      CutByMatches(0, piece.text.size(), matches, false, SplitBehavior::kMergedWithNext, &cuts);
      AppendCuts(piece, cuts, out);
      return absl::OkStatus();
    });
  }

 private:
  std::string replacement_;
  PrependScheme scheme_;
  bool split_;
};

// Splits by a code point predicate with a fixed behavior.
class CharSplitPreTokenizer final : public CuttingPreTokenizer {
 public:
  CharSplitPreTokenizer(bool (*pred)(uint32_t), SplitBehavior behavior)
      : pred_(pred), behavior_(behavior) {}
  absl::Status Cut(std::string_view text, ByteRanges* ranges) const override {
    return CutEach(text, ranges, false, behavior_, [&](std::string_view s, ByteRanges* matches) {
      CharMatches(s, pred_, matches);
      return absl::OkStatus();
    });
  }

 private:
  bool (*pred_)(uint32_t);
  SplitBehavior behavior_;
};

class CharDelimiterPreTokenizer final : public CuttingPreTokenizer {
 public:
  explicit CharDelimiterPreTokenizer(uint32_t delimiter) : delimiter_(delimiter) {}
  absl::Status Cut(std::string_view text, ByteRanges* ranges) const override {
    return CutEach(text, ranges, false, SplitBehavior::kRemoved,
                   [&](std::string_view s, ByteRanges* matches) {
                     CharMatches(
                         s, [this](uint32_t cp) { return cp == delimiter_; }, matches);
                     return absl::OkStatus();
                   });
  }

 private:
  uint32_t delimiter_;
};

bool IsNumberCp(uint32_t cp) {
  return IsNumber(cp);
}

absl::StatusOr<std::unique_ptr<Regex>> CompileAt(std::string_view pattern,
                                                 const base::JsonPath& at) {
  auto regex = Regex::Compile(pattern);
  if (!regex.ok())
    return at.Error(std::string(regex.status().message()));
  return std::move(*regex);
}

}  // namespace

absl::Status PreTokenizer::Cut(std::string_view, ByteRanges*) const {
  return absl::InternalError("Cut on a pre-tokenizer that changes text (OnlyCuts() is false)");
}

absl::StatusOr<std::unique_ptr<PreTokenizer>> MakeByteLevelSplit(std::string_view pattern) {
  SY_ASSIGN_OR_RETURN(std::unique_ptr<Regex> regex, Regex::Compile(pattern));
  return std::make_unique<ByteLevelPreTokenizer>(false, std::move(regex), true);
}

absl::StatusOr<std::unique_ptr<PreTokenizer>> ParsePreTokenizer(simdjson::dom::element json,
                                                                const base::JsonPath& at,
                                                                bool defer_byte_mapping) {
  SY_ASSIGN_OR_RETURN(std::string type, base::RequiredField<std::string>(json, "type", at));
  if (type == "Sequence") {
    // Only the last step may defer the byte mapping to the model.
    SY_ASSIGN_OR_RETURN(
        auto items, base::ParseEach<std::unique_ptr<PreTokenizer>>(
                        json, "pretokenizers", at,
                        [defer_byte_mapping](simdjson::dom::element item,
                                             const base::JsonPath& item_at, bool is_last) {
                          return ParsePreTokenizer(item, item_at, defer_byte_mapping && is_last);
                        }));
    return std::make_unique<SequencePreTokenizer>(std::move(items));
  }
  if (type == "Split") {
    SY_ASSIGN_OR_RETURN(std::string behavior_name,
                        base::RequiredField<std::string>(json, "behavior", at));
    SY_ASSIGN_OR_RETURN(SplitBehavior behavior, ParseBehavior(behavior_name, at.Child("behavior")));
    SY_ASSIGN_OR_RETURN(bool invert, base::FieldOr<bool>(json, "invert", false, at));
    SY_ASSIGN_OR_RETURN(simdjson::dom::element pattern, base::RequiredField(json, "pattern", at));
    base::JsonPath pattern_at = at.Child("pattern");
    SY_ASSIGN_OR_RETURN(std::optional<std::string> literal,
                        base::OptionalField<std::string>(pattern, "String", pattern_at));
    if (literal) {
      return std::make_unique<SplitPreTokenizer>(std::move(*literal), nullptr, behavior, invert);
    }
    SY_ASSIGN_OR_RETURN(std::string regex_text,
                        base::RequiredField<std::string>(pattern, "Regex", pattern_at));
    SY_ASSIGN_OR_RETURN(std::unique_ptr<Regex> regex,
                        CompileAt(regex_text, pattern_at.Child("Regex")));
    return std::make_unique<SplitPreTokenizer>(std::string(), std::move(regex), behavior, invert);
  }
  if (type == "ByteLevel") {
    SY_ASSIGN_OR_RETURN(bool add_prefix_space,
                        base::FieldOr<bool>(json, "add_prefix_space", true, at));
    SY_ASSIGN_OR_RETURN(bool use_regex, base::FieldOr<bool>(json, "use_regex", true, at));
    std::unique_ptr<Regex> regex;
    if (use_regex) {
      SY_ASSIGN_OR_RETURN(regex, CompileAt(kGpt2Pattern, at));
    }
    return std::make_unique<ByteLevelPreTokenizer>(add_prefix_space, std::move(regex),
                                                   defer_byte_mapping);
  }
  if (type == "Metaspace") {
    SY_ASSIGN_OR_RETURN(MetaspaceOptions options, ParseMetaspaceOptions(json, at));
    SY_ASSIGN_OR_RETURN(bool split, base::FieldOr<bool>(json, "split", true, at));
    return std::make_unique<MetaspacePreTokenizer>(std::move(options.replacement), options.scheme,
                                                   split);
  }
  if (type == "Digits") {
    SY_ASSIGN_OR_RETURN(bool individual, base::FieldOr<bool>(json, "individual_digits", false, at));
    return std::make_unique<CharSplitPreTokenizer>(
        &IsNumberCp, individual ? SplitBehavior::kIsolated : SplitBehavior::kContiguous);
  }
  if (type == "Punctuation") {
    SY_ASSIGN_OR_RETURN(std::optional<std::string> behavior_name,
                        base::OptionalField<std::string>(json, "behavior", at));
    SplitBehavior behavior = SplitBehavior::kIsolated;
    if (behavior_name) {
      SY_ASSIGN_OR_RETURN(behavior, ParseBehavior(*behavior_name, at.Child("behavior")));
    }
    return std::make_unique<CharSplitPreTokenizer>(&IsPunctuation, behavior);
  }
  if (type == "Whitespace") {
    SY_ASSIGN_OR_RETURN(std::unique_ptr<Regex> regex, CompileAt("\\w+|[^\\w\\s]+", at));
    return std::make_unique<SplitPreTokenizer>(std::string(), std::move(regex),
                                               SplitBehavior::kRemoved, true);
  }
  if (type == "WhitespaceSplit") {
    return std::make_unique<CharSplitPreTokenizer>(&IsWhitespace, SplitBehavior::kRemoved);
  }
  if (type == "BertPreTokenizer") {
    std::vector<std::unique_ptr<PreTokenizer>> items;
    items.push_back(
        std::make_unique<CharSplitPreTokenizer>(&IsWhitespace, SplitBehavior::kRemoved));
    items.push_back(
        std::make_unique<CharSplitPreTokenizer>(&IsPunctuation, SplitBehavior::kIsolated));
    return std::make_unique<SequencePreTokenizer>(std::move(items));
  }
  if (type == "CharDelimiterSplit") {
    SY_ASSIGN_OR_RETURN(std::string delimiter,
                        base::RequiredField<std::string>(json, "delimiter", at));
    size_t pos = 0;
    if (delimiter.empty() || (NextCodePoint(delimiter, &pos), pos != delimiter.size())) {
      return at.Child("delimiter").Error("expected a single character");
    }
    pos = 0;
    return std::make_unique<CharDelimiterPreTokenizer>(NextCodePoint(delimiter, &pos));
  }
  return at.Child("type").Error(fmt::format("unsupported pre-tokenizer type \"{}\"", type));
}

}  // namespace switchyard::text::internal
