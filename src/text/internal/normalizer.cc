#include "text/internal/normalizer.h"

#include <utility>
#include <vector>

#include "fmt/format.h"

#include "base/status_macros.h"
#include "text/internal/regex.h"
#include "text/internal/unicode.h"

namespace switchyard::text::internal {
namespace {

class SequenceNormalizer final : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> items)
      : items_(std::move(items)) {}
  std::string Normalize(std::string_view s) const override {
    std::string text(s);
    for (const auto& item : items_)
      text = item->Normalize(text);
    return text;
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> items_;
};

class FunctionNormalizer final : public Normalizer {
 public:
  explicit FunctionNormalizer(std::string (*fn)(std::string_view)) : fn_(fn) {}
  std::string Normalize(std::string_view s) const override { return fn_(s); }

 private:
  std::string (*fn_)(std::string_view);
};

class StripNormalizer final : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  std::string Normalize(std::string_view s) const override {
    size_t begin = 0, end = s.size();
    if (left_) {
      while (begin < end) {
        size_t pos = begin;
        if (!IsWhitespace(NextCodePoint(s, &pos)))
          break;
        begin = pos;
      }
    }
    if (right_) {
      while (end > begin) {
        size_t start = end - 1;
        while (start > begin && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80)
          --start;
        size_t pos = start;
        if (!IsWhitespace(NextCodePoint(s, &pos)))
          break;
        end = start;
      }
    }
    return std::string(s.substr(begin, end - begin));
  }

 private:
  bool left_, right_;
};

class PrependNormalizer final : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prefix) : prefix_(std::move(prefix)) {}
  std::string Normalize(std::string_view s) const override {
    if (s.empty())
      return std::string();
    std::string out = prefix_;
    out.append(s);
    return out;
  }

 private:
  std::string prefix_;
};

class ReplaceNormalizer final : public Normalizer {
 public:
  ReplaceNormalizer(std::string literal, std::unique_ptr<Regex> regex, std::string content)
      : literal_(std::move(literal)), regex_(std::move(regex)), content_(std::move(content)) {}
  std::string Normalize(std::string_view s) const override {
    std::string out;
    out.reserve(s.size());
    if (regex_ == nullptr) {
      if (literal_.empty())
        return std::string(s);
      size_t pos = 0;
      while (true) {
        size_t hit = s.find(literal_, pos);
        if (hit == std::string_view::npos)
          break;
        out.append(s.substr(pos, hit - pos)).append(content_);
        pos = hit + literal_.size();
      }
      out.append(s.substr(pos));
      return out;
    }
    ByteRanges matches;
    // A failing regex (resource limits) leaves the text unchanged rather than dropping it.
    if (!regex_->FindAll(s, &matches).ok())
      return std::string(s);
    size_t pos = 0;
    for (auto [begin, end] : matches) {
      out.append(s.substr(pos, begin - pos)).append(content_);
      pos = end;
    }
    out.append(s.substr(pos));
    return out;
  }

 private:
  std::string literal_;
  std::unique_ptr<Regex> regex_;
  std::string content_;
};

}  // namespace

std::unique_ptr<Normalizer> MakePrependNormalizer(std::string prefix) {
  return std::make_unique<PrependNormalizer>(std::move(prefix));
}

std::unique_ptr<Normalizer> MakeReplaceNormalizer(std::string from, std::string to) {
  return std::make_unique<ReplaceNormalizer>(std::move(from), nullptr, std::move(to));
}

std::unique_ptr<Normalizer> MakeNfcNormalizer() {
  return std::make_unique<FunctionNormalizer>(&NormalizeNfc);
}

std::unique_ptr<Normalizer> MakeSequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> items) {
  return std::make_unique<SequenceNormalizer>(std::move(items));
}

absl::StatusOr<std::unique_ptr<Normalizer>> ParseNormalizer(simdjson::dom::element json,
                                                            const base::JsonPath& at) {
  SY_ASSIGN_OR_RETURN(std::string type, base::RequiredField<std::string>(json, "type", at));
  if (type == "Sequence") {
    SY_ASSIGN_OR_RETURN(auto items,
                        base::ParseEach<std::unique_ptr<Normalizer>>(
                            json, "normalizers", at,
                            [](simdjson::dom::element item, const base::JsonPath& item_at, bool) {
                              return ParseNormalizer(item, item_at);
                            }));
    return MakeSequenceNormalizer(std::move(items));
  }
  if (type == "NFC")
    return MakeNfcNormalizer();
  if (type == "NFD")
    return std::make_unique<FunctionNormalizer>(&NormalizeNfd);
  if (type == "NFKC")
    return std::make_unique<FunctionNormalizer>(&NormalizeNfkc);
  if (type == "NFKD")
    return std::make_unique<FunctionNormalizer>(&NormalizeNfkd);
  if (type == "Lowercase")
    return std::make_unique<FunctionNormalizer>(&ToLower);
  if (type == "Strip") {
    SY_ASSIGN_OR_RETURN(bool left, base::FieldOr<bool>(json, "strip_left", true, at));
    SY_ASSIGN_OR_RETURN(bool right, base::FieldOr<bool>(json, "strip_right", true, at));
    return std::make_unique<StripNormalizer>(left, right);
  }
  if (type == "Prepend") {
    SY_ASSIGN_OR_RETURN(std::string prefix, base::RequiredField<std::string>(json, "prepend", at));
    return MakePrependNormalizer(std::move(prefix));
  }
  if (type == "Replace") {
    SY_ASSIGN_OR_RETURN(std::string content, base::RequiredField<std::string>(json, "content", at));
    SY_ASSIGN_OR_RETURN(simdjson::dom::element pattern, base::RequiredField(json, "pattern", at));
    base::JsonPath pattern_at = at.Child("pattern");
    SY_ASSIGN_OR_RETURN(std::optional<std::string> literal,
                        base::OptionalField<std::string>(pattern, "String", pattern_at));
    if (literal) {
      return std::make_unique<ReplaceNormalizer>(std::move(*literal), nullptr, std::move(content));
    }
    SY_ASSIGN_OR_RETURN(std::string regex_text,
                        base::RequiredField<std::string>(pattern, "Regex", pattern_at));
    auto regex = Regex::Compile(regex_text);
    if (!regex.ok())
      return pattern_at.Child("Regex").Error(std::string(regex.status().message()));
    return std::make_unique<ReplaceNormalizer>(std::string(), std::move(*regex),
                                               std::move(content));
  }
  return at.Child("type").Error(fmt::format("unsupported normalizer type \"{}\"", type));
}

}  // namespace switchyard::text::internal
