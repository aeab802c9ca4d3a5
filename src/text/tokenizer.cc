#include "text/tokenizer.h"

#include <utility>

#include "fmt/format.h"

#include "base/status_macros.h"
#include "base/utf8.h"
#include "text/internal/tokenizer_impl.h"

namespace switchyard::text {

using internal::Piece;
using internal::Segment;

absl::Status Tokenizer::Impl::IndexTokens(const std::vector<internal::AddedToken>& added) {
  int32_t max_id = -1;
  for (const auto& [token, id] : model->vocab())
    max_id = std::max(max_id, id);
  for (const auto& token : added)
    max_id = std::max(max_id, token.id);
  const int64_t num_tokens = static_cast<int64_t>(model->vocab().size() + added.size());
  if (max_id >= num_tokens + kMaxIdGap) {
    return absl::InvalidArgumentError(
        fmt::format("token ids are sparse: largest id {} for {} tokens (model.vocab and "
                    "added_tokens must number tokens densely)",
                    max_id, num_tokens));
  }
  id_to_token.assign(static_cast<size_t>(max_id) + 1, std::string());
  special.assign(id_to_token.size(), false);
  for (const auto& [token, id] : model->vocab())
    id_to_token[id] = token;
  std::vector<internal::AddedToken> raw, normalized;
  std::vector<std::string> raw_patterns, normalized_patterns;
  for (const auto& token : added) {
    id_to_token[token.id] = token.content;
    special[token.id] = token.special;
    added_token_to_id.emplace(token.content, token.id);
    if (token.normalized) {
      normalized_patterns.push_back(normalizer ? normalizer->Normalize(token.content)
                                               : token.content);
      normalized.push_back(token);
    } else {
      raw_patterns.push_back(token.content);
      raw.push_back(token);
    }
  }
  raw_added = std::make_unique<internal::AddedTokenMatcher>(std::move(raw), raw_patterns);
  normalized_added =
      std::make_unique<internal::AddedTokenMatcher>(std::move(normalized), normalized_patterns);
  return absl::OkStatus();
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

absl::StatusOr<std::vector<int32_t>> Tokenizer::Encode(std::string_view text,
                                                       bool add_special_tokens) const {
  std::string sanitized;
  if (!base::IsValidUtf8(text)) {
    sanitized = base::SanitizeUtf8(text);
    text = sanitized;
  }
  const Impl& m = *impl_;
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  internal::Segments segments, inner;
  m.raw_added->Split(text, true, &segments);
  internal::ByteRanges words;
  std::vector<Piece> pieces;
  for (const Segment& segment : segments) {
    if (segment.id >= 0) {
      ids.push_back(segment.id);
      continue;
    }
    std::string normalized;
    std::string_view piece_text = segment.text;
    if (m.normalizer != nullptr) {
      normalized = m.normalizer->Normalize(segment.text);
      piece_text = normalized;
    }
    inner.clear();
    m.normalized_added->Split(piece_text, segment.at_origin, &inner);
    for (const Segment& part : inner) {
      if (part.id >= 0) {
        ids.push_back(part.id);
        continue;
      }
      if (m.pre_tokenizer == nullptr) {
        m.model->EncodeWord(part.text, &ids);
        continue;
      }
      if (m.pre_tokenizer->OnlyCuts()) {
        // The words are ranges of the text: no word is copied.
        words.assign(1, {0, part.text.size()});
        SY_RETURN_IF_ERROR(m.pre_tokenizer->Cut(part.text, &words));
        for (auto [begin, end] : words)
          m.model->EncodeWord(part.text.substr(begin, end - begin), &ids);
        continue;
      }
      pieces.clear();
      pieces.push_back(Piece{std::string(part.text), part.at_origin});
      SY_RETURN_IF_ERROR(m.pre_tokenizer->Apply(&pieces));
      for (const Piece& piece : pieces)
        m.model->EncodeWord(piece.text, &ids);
    }
  }
  if (add_special_tokens && m.post_processor != nullptr)
    m.post_processor->Apply(&ids);
  return ids;
}

std::string Tokenizer::Decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  const Impl& m = *impl_;
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= m.id_to_token.size())
      continue;
    if (m.id_to_token[id].empty())
      continue;
    if (skip_special_tokens && m.special[id])
      continue;
    tokens.push_back(m.id_to_token[id]);
  }
  std::string out;
  if (m.decoder != nullptr) {
    m.decoder->DecodeChain(&tokens);
    for (const std::string& t : tokens)
      out.append(t);
  } else {
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i > 0)
        out.push_back(' ');
      out.append(tokens[i]);
    }
  }
  return out;
}

size_t Tokenizer::vocab_size() const {
  return impl_->id_to_token.size();
}

std::optional<int32_t> Tokenizer::TokenToId(std::string_view token) const {
  auto it = impl_->added_token_to_id.find(absl::string_view(token.data(), token.size()));
  if (it != impl_->added_token_to_id.end())
    return it->second;
  return impl_->model->TokenToId(token);
}

std::string_view Tokenizer::IdToToken(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= impl_->id_to_token.size())
    return {};
  return impl_->id_to_token[id];
}

bool Tokenizer::IsSpecial(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < impl_->special.size() && impl_->special[id];
}

bool Tokenizer::IsAddedToken(int32_t id) const {
  const std::string_view token = IdToToken(id);
  if (token.empty())
    return false;
  auto it = impl_->added_token_to_id.find(absl::string_view(token.data(), token.size()));
  return it != impl_->added_token_to_id.end() && it->second == id;
}

std::string Tokenizer::TokenBytes(int32_t id) const {
  std::string token(IdToToken(id));
  if (token.empty())
    return token;
  if (impl_->decoder == nullptr)
    return " " + token;  // Decode joins tokens with spaces
  impl_->decoder->TokenBytes(&token);
  return token;
}

std::optional<int32_t> Tokenizer::bos_id() const {
  return impl_->bos_id;
}
std::optional<int32_t> Tokenizer::eos_id() const {
  return impl_->eos_id;
}
std::optional<int32_t> Tokenizer::unk_id() const {
  return impl_->unk_id;
}
std::optional<int32_t> Tokenizer::pad_id() const {
  return impl_->pad_id;
}

}  // namespace switchyard::text
