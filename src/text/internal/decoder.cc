#include "text/internal/decoder.h"

#include <utility>

#include "fmt/format.h"

#include "base/status_macros.h"
#include "base/utf8.h"
#include "text/internal/byte_level.h"
#include "text/internal/metaspace_options.h"
#include "text/internal/unicode.h"

namespace switchyard::text::internal {
namespace {

constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";

class SequenceDecoder final : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> items)
      : items_(std::move(items)) {}
  void DecodeChain(std::vector<std::string>* tokens) const override {
    for (const auto& item : items_)
      item->DecodeChain(tokens);
  }

  void TokenBytes(std::string* token) const override {
    for (const auto& item : items_)
      item->TokenBytes(token);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> items_;
};

// Maps byte-level characters back to bytes over the whole sequence, then repairs UTF-8.
// A token with a character outside the alphabet contributes its own bytes.
class ByteLevelDecoder final : public Decoder {
 public:
  void DecodeChain(std::vector<std::string>* tokens) const override {
    std::string bytes;
    for (const std::string& token : *tokens) {
      size_t mark = bytes.size();
      size_t pos = 0;
      bool ok = true;
      while (pos < token.size()) {
        int b = CharToByte(NextCodePoint(token, &pos));
        if (b < 0) {
          ok = false;
          break;
        }
        bytes.push_back(static_cast<char>(b));
      }
      if (!ok) {
        bytes.resize(mark);
        bytes.append(token);
      }
    }
    tokens->assign(1, base::SanitizeUtf8(bytes));
  }
  void TokenBytes(std::string* token) const override {
    std::string bytes;
    size_t pos = 0;
    while (pos < token->size()) {
      int b = CharToByte(NextCodePoint(*token, &pos));
      if (b < 0)
        return;  // not in the alphabet: the token stands for its own bytes
      bytes.push_back(static_cast<char>(b));
    }
    *token = std::move(bytes);
  }
};

class ReplaceDecoder final : public Decoder {
 public:
  ReplaceDecoder(std::string from, std::string to) : from_(std::move(from)), to_(std::move(to)) {}
  void DecodeChain(std::vector<std::string>* tokens) const override {
    if (from_.empty())
      return;
    for (std::string& token : *tokens) {
      if (token.find(from_) == std::string::npos)
        continue;
      std::string out;
      size_t pos = 0, hit;
      while ((hit = token.find(from_, pos)) != std::string::npos) {
        out.append(token, pos, hit - pos).append(to_);
        pos = hit + from_.size();
      }
      out.append(token, pos);
      token = std::move(out);
    }
  }

  void TokenBytes(std::string* token) const override {
    std::vector<std::string> one{std::move(*token)};
    DecodeChain(&one);
    *token = std::move(one[0]);
  }

 private:
  std::string from_, to_;
};

int ByteTokenValue(const std::string& token) {
  if (token.size() != 6 || token.compare(0, 3, "<0x") != 0 || token[5] != '>')
    return -1;
  int value = 0;
  for (int i = 3; i < 5; ++i) {
    char c = token[i];
    int digit = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                       : -1;
    if (digit < 0)
      return -1;
    value = value * 16 + digit;
  }
  return value;
}

// Runs of <0xNN> tokens become their UTF-8 text, or one U+FFFD per byte when invalid.
class ByteFallbackDecoder final : public Decoder {
 public:
  void DecodeChain(std::vector<std::string>* tokens) const override {
    std::vector<std::string> out;
    out.reserve(tokens->size());
    std::string bytes;
    size_t run = 0;
    auto flush = [&] {
      if (run == 0)
        return;
      if (base::IsValidUtf8(bytes)) {
        out.push_back(bytes);
      } else {
        for (size_t i = 0; i < run; ++i)
          out.emplace_back(kReplacementChar);
      }
      bytes.clear();
      run = 0;
    };
    for (std::string& token : *tokens) {
      int value = ByteTokenValue(token);
      if (value >= 0) {
        bytes.push_back(static_cast<char>(value));
        ++run;
        continue;
      }
      flush();
      out.push_back(std::move(token));
    }
    flush();
    *tokens = std::move(out);
  }
  void TokenBytes(std::string* token) const override {
    int value = ByteTokenValue(*token);
    if (value >= 0)
      token->assign(1, static_cast<char>(value));
  }
};

class FuseDecoder final : public Decoder {
 public:
  void DecodeChain(std::vector<std::string>* tokens) const override {
    std::string all;
    for (const std::string& token : *tokens)
      all.append(token);
    tokens->clear();
    tokens->push_back(std::move(all));
  }
  void TokenBytes(std::string*) const override {}
};

// Removes up to `start` leading and `stop` trailing copies of a character from each token.
class StripDecoder final : public Decoder {
 public:
  StripDecoder(std::string content, size_t start, size_t stop)
      : content_(std::move(content)), start_(start), stop_(stop) {}
  void DecodeChain(std::vector<std::string>* tokens) const override {
    for (std::string& token : *tokens) {
      size_t begin = 0;
      for (size_t i = 0; i < start_ && token.compare(begin, content_.size(), content_) == 0 &&
                         begin < token.size();
           ++i) {
        begin += content_.size();
      }
      size_t end = token.size();
      for (size_t i = 0; i < stop_ && end >= begin + content_.size() &&
                         token.compare(end - content_.size(), content_.size(), content_) == 0;
           ++i) {
        end -= content_.size();
      }
      token = token.substr(begin, end - begin);
    }
  }

  // Strip only trims the decoded text's ends, never a token inside it.
  void TokenBytes(std::string*) const override {}

 private:
  std::string content_;
  size_t start_, stop_;
};

// Replacement characters become spaces, except in the first token where (when a prefix
// is prepended on encode) they are dropped.
class MetaspaceDecoder final : public Decoder {
 public:
  MetaspaceDecoder(std::string replacement, bool prepends)
      : replacement_(std::move(replacement)), prepends_(prepends) {}
  void DecodeChain(std::vector<std::string>* tokens) const override {
    for (size_t i = 0; i < tokens->size(); ++i) {
      std::string& token = (*tokens)[i];
      std::string out;
      size_t pos = 0, hit;
      while ((hit = token.find(replacement_, pos)) != std::string::npos) {
        out.append(token, pos, hit - pos);
        if (!(i == 0 && prepends_))
          out.push_back(' ');
        pos = hit + replacement_.size();
      }
      out.append(token, pos);
      token = std::move(out);
    }
  }

  void TokenBytes(std::string* token) const override {
    std::vector<std::string> pair{std::string(), std::move(*token)};
    DecodeChain(&pair);  // as the second token: the replacement is a space
    *token = std::move(pair[1]);
  }

 private:
  std::string replacement_;
  bool prepends_;
};

class WordPieceDecoder final : public Decoder {
 public:
  explicit WordPieceDecoder(std::string prefix) : prefix_(std::move(prefix)) {}
  void DecodeChain(std::vector<std::string>* tokens) const override {
    for (size_t i = 0; i < tokens->size(); ++i) {
      std::string& token = (*tokens)[i];
      if (i != 0) {
        if (token.compare(0, prefix_.size(), prefix_) == 0) {
          token.erase(0, prefix_.size());
        } else {
          token.insert(0, " ");
        }
      }
    }
  }

  void TokenBytes(std::string* token) const override {
    std::vector<std::string> pair{std::string(), std::move(*token)};
    DecodeChain(&pair);
    *token = std::move(pair[1]);
  }

 private:
  std::string prefix_;
};

class SuffixDecoder final : public Decoder {
 public:
  explicit SuffixDecoder(std::string suffix) : suffix_(std::move(suffix)) {}
  void DecodeChain(std::vector<std::string>* tokens) const override {
    for (size_t i = 0; i < tokens->size(); ++i) {
      std::string& token = (*tokens)[i];
      std::string out;
      size_t pos = 0, hit;
      while (!suffix_.empty() && (hit = token.find(suffix_, pos)) != std::string::npos) {
        out.append(token, pos, hit - pos);
        if (i + 1 != tokens->size())
          out.push_back(' ');
        pos = hit + suffix_.size();
      }
      out.append(token, pos);
      token = std::move(out);
    }
  }

  void TokenBytes(std::string* token) const override {
    std::vector<std::string> pair{std::move(*token), std::string()};
    DecodeChain(&pair);  // as a token followed by another: the suffix is a space
    *token = std::move(pair[0]);
  }

 private:
  std::string suffix_;
};

}  // namespace

std::unique_ptr<Decoder> MakeByteLevelDecoder() {
  return std::make_unique<ByteLevelDecoder>();
}

std::unique_ptr<Decoder> MakeSentencePieceDecoder(bool strip_leading_space) {
  std::vector<std::unique_ptr<Decoder>> items;
  items.push_back(std::make_unique<ReplaceDecoder>("\xE2\x96\x81", " "));
  items.push_back(std::make_unique<ByteFallbackDecoder>());
  items.push_back(std::make_unique<FuseDecoder>());
  if (strip_leading_space)
    items.push_back(std::make_unique<StripDecoder>(" ", 1, 0));
  return std::make_unique<SequenceDecoder>(std::move(items));
}

absl::StatusOr<std::unique_ptr<Decoder>> ParseDecoder(simdjson::dom::element json,
                                                      const base::JsonPath& at) {
  SY_ASSIGN_OR_RETURN(std::string type, base::RequiredField<std::string>(json, "type", at));
  if (type == "Sequence") {
    SY_ASSIGN_OR_RETURN(auto items,
                        base::ParseEach<std::unique_ptr<Decoder>>(
                            json, "decoders", at,
                            [](simdjson::dom::element item, const base::JsonPath& item_at, bool) {
                              return ParseDecoder(item, item_at);
                            }));
    return std::make_unique<SequenceDecoder>(std::move(items));
  }
  if (type == "ByteLevel")
    return MakeByteLevelDecoder();
  if (type == "ByteFallback")
    return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse")
    return std::make_unique<FuseDecoder>();
  if (type == "Replace") {
    SY_ASSIGN_OR_RETURN(std::string content, base::RequiredField<std::string>(json, "content", at));
    SY_ASSIGN_OR_RETURN(simdjson::dom::element pattern, base::RequiredField(json, "pattern", at));
    base::JsonPath pattern_at = at.Child("pattern");
    SY_ASSIGN_OR_RETURN(std::optional<std::string> literal,
                        base::OptionalField<std::string>(pattern, "String", pattern_at));
    if (!literal)
      return pattern_at.Error("only String patterns are supported in decoders");
    return std::make_unique<ReplaceDecoder>(std::move(*literal), std::move(content));
  }
  if (type == "Strip") {
    SY_ASSIGN_OR_RETURN(std::string content, base::RequiredField<std::string>(json, "content", at));
    SY_ASSIGN_OR_RETURN(int64_t start, base::FieldOr<int64_t>(json, "start", 0, at));
    SY_ASSIGN_OR_RETURN(int64_t stop, base::FieldOr<int64_t>(json, "stop", 0, at));
    if (content.empty() || start < 0 || stop < 0) {
      return at.Error("Strip needs a non-empty content and non-negative start/stop");
    }
    return std::make_unique<StripDecoder>(std::move(content), static_cast<size_t>(start),
                                          static_cast<size_t>(stop));
  }
  if (type == "Metaspace") {
    SY_ASSIGN_OR_RETURN(MetaspaceOptions options, ParseMetaspaceOptions(json, at));
    return std::make_unique<MetaspaceDecoder>(std::move(options.replacement),
                                              options.scheme != PrependScheme::kNever);
  }
  if (type == "WordPiece") {
    SY_ASSIGN_OR_RETURN(std::optional<std::string> prefix,
                        base::OptionalField<std::string>(json, "prefix", at));
    return std::make_unique<WordPieceDecoder>(prefix.value_or("##"));
  }
  if (type == "BPEDecoder") {
    SY_ASSIGN_OR_RETURN(std::optional<std::string> suffix,
                        base::OptionalField<std::string>(json, "suffix", at));
    return std::make_unique<SuffixDecoder>(suffix.value_or("</w>"));
  }
  return at.Child("type").Error(fmt::format("unsupported decoder type \"{}\"", type));
}

}  // namespace switchyard::text::internal
