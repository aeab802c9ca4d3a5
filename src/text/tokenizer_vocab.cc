// Tokenizer::FromVocab: a tokenizer from bare vocabulary data (GGUF metadata), configured
// the way HF's converters configure the equivalent tokenizer.json.
#include <algorithm>
#include <utility>

#include "fmt/format.h"

#include "base/status_macros.h"
#include "text/internal/byte_level.h"
#include "text/internal/tokenizer_impl.h"
#include "text/internal/unicode.h"

namespace switchyard::text {
namespace {

constexpr int32_t kTypeNormal = 1, kTypeUnknown = 2, kTypeControl = 3, kTypeUserDefined = 4;
constexpr std::string_view kSource = "vocabulary";

absl::Status Invalid(std::string_view message) {
  return absl::InvalidArgumentError(fmt::format("{}: {}", kSource, message));
}

int32_t TypeOf(const VocabSpec& spec, size_t id) {
  return spec.token_types.empty() ? kTypeNormal : spec.token_types[id];
}

// SentencePiece BPE priority as HF's converter derives it: every split of a piece into two
// known pieces is a merge ranked by the merged piece's score (higher first), ties in
// vocabulary order.
std::vector<std::pair<std::string, std::string>> MergesFromScores(
    const VocabSpec& spec, const absl::flat_hash_map<std::string, int32_t>& vocab) {
  struct Candidate {
    float score;
    int32_t left, right;
  };
  std::vector<Candidate> candidates;
  for (size_t id = 0; id < spec.tokens.size(); ++id) {
    if (TypeOf(spec, id) != kTypeNormal)
      continue;
    const std::string& piece = spec.tokens[id];
    std::vector<Candidate> local;
    size_t pos = 0;
    internal::NextCodePoint(piece, &pos);
    while (pos < piece.size()) {
      auto l = vocab.find(piece.substr(0, pos));
      auto r = vocab.find(piece.substr(pos));
      if (l != vocab.end() && r != vocab.end()) {
        local.push_back({spec.scores[id], l->second, r->second});
      }
      internal::NextCodePoint(piece, &pos);
    }
    std::sort(local.begin(), local.end(), [](const Candidate& a, const Candidate& b) {
      return std::make_pair(a.left, a.right) < std::make_pair(b.left, b.right);
    });
    candidates.insert(candidates.end(), local.begin(), local.end());
  }
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const Candidate& a, const Candidate& b) { return a.score > b.score; });
  std::vector<std::pair<std::string, std::string>> merges;
  merges.reserve(candidates.size());
  for (const Candidate& c : candidates)
    merges.emplace_back(spec.tokens[c.left], spec.tokens[c.right]);
  return merges;
}

absl::StatusOr<std::vector<std::pair<std::string, std::string>>> SplitMerges(
    const std::vector<std::string>& merges) {
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    size_t space = merges[i].find(' ');
    if (space == std::string::npos || merges[i].find(' ', space + 1) != std::string::npos) {
      return Invalid(fmt::format("merges[{}]: expected \"a b\", got \"{}\"", i, merges[i]));
    }
    out.emplace_back(merges[i].substr(0, space), merges[i].substr(space + 1));
  }
  return out;
}

std::string_view PatternFor(std::string_view pre) {
  if (pre == "llama-bpe" || pre == "llama3" || pre == "llama-v3" || pre == "smaug-bpe") {
    return internal::kLlama3Pattern;
  }
  if (pre == "qwen2" || pre == "deepseek-r1-qwen")
    return internal::kQwen2Pattern;
  return internal::kGpt2Pattern;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromVocab(const VocabSpec& spec) {
  size_t n = spec.tokens.size();
  if (n == 0)
    return Invalid("tokens: empty vocabulary");
  if (n >= (size_t{1} << 30))
    return Invalid("tokens: vocabulary too large");
  if (!spec.scores.empty() && spec.scores.size() != n) {
    return Invalid(fmt::format("scores: {} entries for {} tokens", spec.scores.size(), n));
  }
  if (!spec.token_types.empty() && spec.token_types.size() != n) {
    return Invalid(
        fmt::format("token_types: {} entries for {} tokens", spec.token_types.size(), n));
  }
  for (const auto& [name, id] : {std::pair{"bos_id", spec.bos_id},
                                 {"eos_id", spec.eos_id},
                                 {"unk_id", spec.unk_id},
                                 {"pad_id", spec.pad_id}}) {
    if (id && (*id < 0 || static_cast<size_t>(*id) >= n)) {
      return Invalid(fmt::format("{} {} is outside the vocabulary of {} tokens", name, *id, n));
    }
  }
  bool spm = spec.kind == VocabSpec::Kind::kSentencePieceBpe;
  if (spm && spec.merges.empty() && spec.scores.empty()) {
    return Invalid("scores: SentencePiece vocabularies need scores or merges");
  }

  absl::flat_hash_map<std::string, int32_t> vocab;
  vocab.reserve(n);
  std::vector<internal::AddedToken> added;
  for (size_t id = 0; id < n; ++id) {
    // Duplicate texts keep their first id, as a JSON vocabulary would.
    vocab.try_emplace(spec.tokens[id], static_cast<int32_t>(id));
    int32_t type = TypeOf(spec, id);
    if (type == kTypeControl || type == kTypeUserDefined || (spm && type == kTypeUnknown)) {
      if (spec.tokens[id].empty())
        continue;
      internal::AddedToken token;
      token.content = spec.tokens[id];
      token.id = static_cast<int32_t>(id);
      token.special = type != kTypeUserDefined;
      added.push_back(std::move(token));
    }
  }

  auto impl = std::make_unique<Impl>();
  std::vector<std::pair<std::string, std::string>> merges;
  if (!spec.merges.empty()) {
    SY_ASSIGN_OR_RETURN(merges, SplitMerges(spec.merges));
  } else if (spm) {
    merges = MergesFromScores(spec, vocab);
  }
  internal::BpeOptions options;
  if (spm) {
    constexpr char kSpace[] = "\xE2\x96\x81";
    std::vector<std::unique_ptr<internal::Normalizer>> steps;
    if (spec.add_space_prefix)
      steps.push_back(internal::MakePrependNormalizer(kSpace));
    steps.push_back(internal::MakeReplaceNormalizer(" ", kSpace));
    impl->normalizer = internal::MakeSequenceNormalizer(std::move(steps));
    impl->decoder = internal::MakeSentencePieceDecoder(spec.add_space_prefix);
    options.byte_fallback = true;
    options.fuse_unk = true;
    options.unk_id = spec.unk_id;
  } else {
    SY_ASSIGN_OR_RETURN(impl->pre_tokenizer,
                        internal::MakeByteLevelSplit(PatternFor(spec.pre_tokenizer)));
    options.byte_level_input = true;
    options.ignore_merges = PatternFor(spec.pre_tokenizer) == internal::kLlama3Pattern;
    // Qwen2's tokenizer.json normalizes to NFC before splitting.
    if (PatternFor(spec.pre_tokenizer) == internal::kQwen2Pattern) {
      impl->normalizer = internal::MakeNfcNormalizer();
    }
    impl->decoder = internal::MakeByteLevelDecoder();
  }
  SY_ASSIGN_OR_RETURN(impl->model, internal::BpeModel::Create(std::move(vocab), merges,
                                                              std::move(options), kSource));
  std::vector<int32_t> prefix, suffix;
  if (spec.add_bos && spec.bos_id)
    prefix.push_back(*spec.bos_id);
  if (spec.add_eos && spec.eos_id)
    suffix.push_back(*spec.eos_id);
  if (!prefix.empty() || !suffix.empty()) {
    impl->post_processor =
        std::make_unique<internal::PostProcessor>(std::move(prefix), std::move(suffix));
  }
  SY_RETURN_IF_ERROR(impl->IndexTokens(added));
  impl->bos_id = spec.bos_id;
  impl->eos_id = spec.eos_id;
  impl->unk_id = spec.unk_id;
  impl->pad_id = spec.pad_id;
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(impl)));
}

}  // namespace switchyard::text
