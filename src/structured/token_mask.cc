#include "structured/token_mask.h"

#include <algorithm>
#include <string>
#include <utility>

namespace switchyard::structured {

TokenVocabulary::TokenVocabulary(const text::Tokenizer& tokenizer, int64_t vocab_size,
                                 std::vector<int32_t> eos_ids)
    : vocab_size_(vocab_size), eos_ids_(std::move(eos_ids)) {
  std::sort(eos_ids_.begin(), eos_ids_.end());
  eos_ids_.erase(std::unique(eos_ids_.begin(), eos_ids_.end()), eos_ids_.end());
  const auto known = std::min<int64_t>(vocab_size, static_cast<int64_t>(tokenizer.vocab_size()));
  offsets_.reserve(static_cast<size_t>(vocab_size) + 1);
  offsets_.push_back(0);
  for (int64_t i = 0; i < vocab_size; ++i) {
    const auto id = static_cast<int32_t>(i);
    if (i < known && !tokenizer.IsSpecial(id) && !is_eos(id))
      bytes_ += tokenizer.TokenBytes(id);
    offsets_.push_back(static_cast<uint32_t>(bytes_.size()));
  }

  std::vector<int32_t> order;
  for (int64_t i = 0; i < vocab_size; ++i) {
    if (!bytes(static_cast<int32_t>(i)).empty())
      order.push_back(static_cast<int32_t>(i));
  }
  std::sort(order.begin(), order.end(), [this](int32_t a, int32_t b) {
    const std::string_view ba = bytes(a);
    const std::string_view bb = bytes(b);
    return ba < bb || (ba == bb && a < b);
  });

  // Preorder trie: `path` holds the nodes of the previous token's bytes.
  std::vector<uint32_t> path;
  std::string_view previous;
  for (int32_t id : order) {
    const std::string_view b = bytes(id);
    size_t lcp = 0;
    while (lcp < b.size() && lcp < previous.size() && b[lcp] == previous[lcp])
      ++lcp;
    while (path.size() > lcp) {
      nodes_[path.back()].subtree_end = static_cast<uint32_t>(nodes_.size());
      path.pop_back();
    }
    for (size_t d = lcp; d < b.size(); ++d) {
      TrieNode node;
      node.byte = static_cast<uint8_t>(b[d]);
      node.depth = static_cast<uint32_t>(d + 1);
      node.tokens_begin = node.tokens_end = static_cast<uint32_t>(token_ids_.size());
      path.push_back(static_cast<uint32_t>(nodes_.size()));
      nodes_.push_back(node);
    }
    token_ids_.push_back(id);
    ++nodes_[path.back()].tokens_end;
    max_depth_ = std::max(max_depth_, static_cast<uint32_t>(b.size()));
    previous = b;
  }
  for (uint32_t node : path)
    nodes_[node].subtree_end = static_cast<uint32_t>(nodes_.size());
}

bool TokenVocabulary::is_eos(int32_t id) const {
  return std::binary_search(eos_ids_.begin(), eos_ids_.end(), id);
}

TokenMasker::TokenMasker(const TokenVocabulary* vocab)
    : vocab_(vocab), levels_(vocab->max_depth_ + 1), cache_(kCacheEntries) {}

void TokenMasker::Fill(GrammarMatcher* matcher, std::span<uint32_t> mask) {
  key_.clear();
  matcher->AppendStateKey(&key_);
  ++uses_;
  CacheEntry* victim = &cache_[0];
  for (CacheEntry& e : cache_) {
    if (e.grammar == matcher->grammar() && e.key == key_) {
      e.last_use = uses_;
      std::copy(e.mask.begin(), e.mask.end(), mask.begin());
      return;
    }
    if (e.last_use < victim->last_use)
      victim = &e;
  }
  Compute(matcher, mask);
  victim->grammar = matcher->grammar();
  victim->key.assign(key_.begin(), key_.end());
  victim->mask.assign(mask.begin(), mask.end());
  victim->last_use = uses_;
}

void TokenMasker::Compute(GrammarMatcher* matcher, std::span<uint32_t> mask) {
  std::fill(mask.begin(), mask.end(), 0u);
  auto allow = [&mask](int32_t id) {
    mask[static_cast<size_t>(id) / 32] |= 1u << (static_cast<uint32_t>(id) % 32);
  };
  const std::vector<TokenVocabulary::TrieNode>& nodes = vocab_->nodes_;
  const GrammarMatcher::Level root = matcher->Root();
  levels_[0] = root;
  size_t i = 0;
  while (i < nodes.size()) {
    const TokenVocabulary::TrieNode& node = nodes[i];
    const GrammarMatcher::Level& parent = levels_[node.depth - 1];
    matcher->Truncate(parent);
    const GrammarMatcher::Level level = matcher->Step(parent, node.byte);
    if (level.dead()) {
      i = node.subtree_end;
      continue;
    }
    for (uint32_t t = node.tokens_begin; t < node.tokens_end; ++t)
      allow(vocab_->token_ids_[t]);
    if (level.empty()) {
      i = node.subtree_end;
      continue;
    }
    levels_[node.depth] = level;
    ++i;
  }
  matcher->Truncate(root);
  if (root.accept) {
    for (int32_t id : vocab_->eos_ids_) {
      if (id >= 0 && id < vocab_->vocab_size_)
        allow(id);
    }
  }
}

}  // namespace switchyard::structured
