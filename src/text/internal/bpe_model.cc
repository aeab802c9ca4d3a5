#include "text/internal/bpe_model.h"

#include <climits>
#include <functional>
#include <queue>
#include <span>

#include "fmt/format.h"

#include "text/internal/byte_level.h"
#include "text/internal/unicode.h"

namespace switchyard::text::internal {
namespace {

// Past this many symbols the linear-scan merge loop loses to the heap.
constexpr size_t kQuadraticMergeLimit = 48;

// U+2581, SentencePiece's word boundary marker.
constexpr std::string_view kMarker = "\xE2\x96\x81";
constexpr uint32_t kMarkerCp = 0x2581;

// The code point that ends just before byte `end` of `s` (valid UTF-8, end > 0).
uint32_t CodePointBefore(std::string_view s, size_t end) {
  size_t start = end - 1;
  while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80)
    --start;
  return NextCodePoint(s, &start);
}

// Debian's Abseil keeps its own string_view; heterogeneous lookups need one.
absl::string_view AbslView(std::string_view s) {
  return absl::string_view(s.data(), s.size());
}

}  // namespace

absl::StatusOr<std::unique_ptr<BpeModel>> BpeModel::Create(
    absl::flat_hash_map<std::string, int32_t> vocab,
    const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions options,
    std::string_view source) {
  std::unique_ptr<BpeModel> model(new BpeModel(std::move(options)));
  model->vocab_ = std::move(vocab);
  const std::string& prefix = model->options_.continuing_subword_prefix;
  model->merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [a, b] = merges[rank];
    auto a_it = model->vocab_.find(a);
    auto b_it = model->vocab_.find(b);
    if (a_it == model->vocab_.end() || b_it == model->vocab_.end()) {
      return absl::InvalidArgumentError(
          fmt::format("{}: model.merges[{}]: token \"{}\" is not in the vocabulary", source, rank,
                      a_it == model->vocab_.end() ? a : b));
    }
    std::string merged = a;
    if (!prefix.empty() && b.compare(0, prefix.size(), prefix) == 0) {
      merged.append(b, prefix.size());
    } else {
      merged.append(b);
    }
    auto m_it = model->vocab_.find(merged);
    if (m_it == model->vocab_.end()) {
      return absl::InvalidArgumentError(
          fmt::format("{}: model.merges[{}]: merged token \"{}\" is not in the vocabulary", source,
                      rank, merged));
    }
    // The first (lowest-rank) occurrence of a pair wins, as in HF.
    model->merges_.try_emplace(PairKey(a_it->second, b_it->second),
                               MergeTarget{static_cast<int32_t>(rank), m_it->second});
  }
  for (int b = 0; b < 256; ++b) {
    auto it = model->vocab_.find(fmt::format("<0x{:02X}>", b));
    model->byte_fallback_ids_[b] = it == model->vocab_.end() ? -1 : it->second;
    auto bl = model->vocab_.find(AbslView(ByteToChars(static_cast<uint8_t>(b))));
    model->byte_level_ids_[b] = bl == model->vocab_.end() ? -1 : bl->second;
  }
  model->simple_byte_level_ = model->options_.byte_level_input && prefix.empty() &&
                              model->options_.end_of_word_suffix.empty();
  model->PlanMarkerSplits();
  return model;
}

BpeModel::BpeModel(BpeOptions options)
    : options_(std::move(options)), cache_(options_.cache_capacity) {}

void BpeModel::PlanMarkerSplits() {
  // Cutting is exact only when each piece is encoded as it would be inside the word: no
  // prefix/suffix or whole-word lookup depends on the word's extent, and a pending unknown
  // run is always closed by the known "▁" that starts the next piece.
  if (options_.byte_level_input || !options_.continuing_subword_prefix.empty() ||
      !options_.end_of_word_suffix.empty() || options_.ignore_merges ||
      !vocab_.contains(AbslView(kMarker))) {
    return;
  }
  for (const auto& [token, id] : vocab_) {
    std::string_view t = token;
    for (size_t pos = t.find(kMarker, 1); pos != std::string_view::npos;
         pos = t.find(kMarker, pos + kMarker.size())) {
      uint32_t before = CodePointBefore(t, pos);
      if (before != kMarkerCp)
        marker_joiners_.insert(before);
    }
  }
  split_at_marker_ = true;
}

std::optional<int32_t> BpeModel::TokenToId(std::string_view token) const {
  auto it = vocab_.find(AbslView(token));
  if (it == vocab_.end())
    return std::nullopt;
  return it->second;
}

// Inlined into its callers: on a cache hit a call costs a good part of the lookup.
ABSL_ATTRIBUTE_ALWAYS_INLINE inline void BpeModel::EncodeCached(std::string_view word,
                                                                std::vector<int32_t>* ids) const {
  if (word.size() > options_.max_cached_word_bytes) {
    EncodeUncached(word, ids);
    return;
  }
  const size_t hash = WordCache::Hash(word);
  if (!cache_.Lookup(word, hash, ids))
    EncodeAndCache(word, hash, ids);
}

void BpeModel::EncodeWord(std::string_view word, std::vector<int32_t>* ids) const {
  if (!split_at_marker_) {
    EncodeCached(word, ids);
    return;
  }
  size_t start = 0;
  for (size_t pos = word.find(kMarker, 1); pos != std::string_view::npos;
       pos = word.find(kMarker, pos + kMarker.size())) {
    uint32_t before = CodePointBefore(word, pos);
    if (before == kMarkerCp || marker_joiners_.contains(before))
      continue;
    EncodeCached(word.substr(start, pos - start), ids);
    start = pos;
  }
  EncodeCached(word.substr(start), ids);
}

void BpeModel::EncodeAndCache(std::string_view word, size_t hash, std::vector<int32_t>* ids) const {
  const size_t start = ids->size();
  EncodeUncached(word, ids);
  cache_.Insert(word, hash, std::span<const int32_t>(ids->data() + start, ids->size() - start));
}

void BpeModel::EncodeUncached(std::string_view word, std::vector<int32_t>* ids) const {
  if (options_.ignore_merges) {
    std::optional<int32_t> whole;
    if (options_.byte_level_input) {
      std::string mapped;
      AppendByteLevel(word, &mapped);
      whole = TokenToId(mapped);
    } else {
      whole = TokenToId(word);
    }
    if (whole) {
      ids->push_back(*whole);
      return;
    }
  }
  std::vector<int32_t> symbols;
  InitialSymbols(word, &symbols);
  MergeAll(&symbols);
  ids->insert(ids->end(), symbols.begin(), symbols.end());
}

void BpeModel::InitialSymbols(std::string_view word, std::vector<int32_t>* symbols) const {
  symbols->reserve(word.size());
  if (simple_byte_level_) {
    bool complete = true;
    for (char c : word) {
      int32_t id = byte_level_ids_[static_cast<uint8_t>(c)];
      if (id < 0) {
        complete = false;
        break;
      }
      symbols->push_back(id);
    }
    if (complete)
      return;
    symbols->clear();
  }
  std::string mapped_storage;
  if (options_.byte_level_input) {
    AppendByteLevel(word, &mapped_storage);
    word = mapped_storage;
  }
  // A pending unknown run: HF flushes it only before the next known character.
  bool has_unk = false;
  std::string piece;
  size_t pos = 0;
  while (pos < word.size()) {
    size_t start = pos;
    NextCodePoint(word, &pos);
    piece.clear();
    if (start != 0)
      piece.append(options_.continuing_subword_prefix);
    piece.append(word.substr(start, pos - start));
    if (pos == word.size())
      piece.append(options_.end_of_word_suffix);
    auto it = vocab_.find(piece);
    if (it != vocab_.end()) {
      if (has_unk) {
        symbols->push_back(*options_.unk_id);
        has_unk = false;
      }
      symbols->push_back(it->second);
      continue;
    }
    if (options_.byte_fallback) {
      bool all = true;
      for (char c : piece)
        all = all && byte_fallback_ids_[static_cast<uint8_t>(c)] >= 0;
      if (all) {
        for (char c : piece)
          symbols->push_back(byte_fallback_ids_[static_cast<uint8_t>(c)]);
        continue;
      }
    }
    if (options_.unk_id) {
      if (has_unk && !options_.fuse_unk)
        symbols->push_back(*options_.unk_id);
      has_unk = true;
    }
  }
  if (has_unk)
    symbols->push_back(*options_.unk_id);
}

void BpeModel::MergeAll(std::vector<int32_t>* symbols) const {
  std::vector<int32_t>& s = *symbols;
  if (s.size() < 2)
    return;
  if (s.size() <= kQuadraticMergeLimit) {
    // The merge of each adjacent pair, looked up once and again only for the two pairs a
    // merge changes; each step picks the lowest rank (leftmost on ties).
    constexpr MergeTarget kNone{INT32_MAX, -1};
    MergeTarget pairs[kQuadraticMergeLimit];
    auto lookup = [&](size_t i) {
      auto it = merges_.find(PairKey(s[i], s[i + 1]));
      return it == merges_.end() ? kNone : it->second;
    };
    size_t n = s.size();
    for (size_t i = 0; i + 1 < n; ++i)
      pairs[i] = lookup(i);
    while (n >= 2) {
      size_t best = 0;
      for (size_t i = 1; i + 1 < n; ++i) {
        if (pairs[i].rank < pairs[best].rank)
          best = i;
      }
      if (pairs[best].new_id < 0)
        break;
      s[best] = pairs[best].new_id;
      for (size_t i = best + 1; i + 1 < n; ++i)
        s[i] = s[i + 1];
      for (size_t i = best + 1; i + 2 < n; ++i)
        pairs[i] = pairs[i + 1];
      --n;
      if (best > 0)
        pairs[best - 1] = lookup(best - 1);
      if (best + 1 < n)
        pairs[best] = lookup(best);
    }
    s.resize(n);
    return;
  }
  // Linked list of symbols plus a min-heap of candidate merges (rank, position).
  const int n = static_cast<int>(s.size());
  std::vector<int> prev(n), next(n);
  std::vector<bool> alive(n, true);
  for (int i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  struct Candidate {
    int32_t rank;
    int pos;
    int32_t new_id;
    int32_t left, right;  // the pair's ids when pushed: still equal means still valid
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
  auto push = [&](int pos) {
    if (pos < 0 || next[pos] < 0)
      return;
    auto it = merges_.find(PairKey(s[pos], s[next[pos]]));
    if (it != merges_.end())
      heap.push({it->second.rank, pos, it->second.new_id, s[pos], s[next[pos]]});
  };
  for (int i = 0; i + 1 < n; ++i)
    push(i);
  while (!heap.empty()) {
    Candidate top = heap.top();
    heap.pop();
    if (!alive[top.pos] || next[top.pos] < 0)
      continue;
    int right = next[top.pos];
    if (s[top.pos] != top.left || s[right] != top.right)
      continue;
    s[top.pos] = top.new_id;
    alive[right] = false;
    next[top.pos] = next[right];
    if (next[right] >= 0)
      prev[next[right]] = top.pos;
    push(prev[top.pos]);
    push(top.pos);
  }
  size_t out = 0;
  for (int i = 0; i < n; ++i) {
    if (alive[i])
      s[out++] = s[i];
  }
  s.resize(out);
}

}  // namespace switchyard::text::internal
