#include "structured/grammar_matcher.h"

#include <algorithm>
#include <utility>

namespace switchyard::structured {

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar)
    : grammar_(std::move(grammar)) {
  trial_.clear();
  Level level;
  Close({grammar_->root_start(), -1}, &level);
  threads_.assign(trial_.begin(), trial_.end());
  accept_ = level.accept;
  trial_.clear();
}

void GrammarMatcher::AddThread(Thread t, Level* level) {
  for (uint32_t i = level->begin; i < level->end; ++i) {
    if (trial_[i].state == t.state && trial_[i].parent == t.parent)
      return;
  }
  if (level->end - level->begin >= kMaxThreads)
    return;
  trial_.push_back(t);
  ++level->end;
}

void GrammarMatcher::Close(Thread start, Level* level) {
  const Grammar& g = *grammar_;
  // Most steps inside strings and numbers land on a state that only reads bytes.
  if (g.calls(start.state).empty() && !g.is_final(start.state)) {
    if (g.has_edges(start.state))
      AddThread(start, level);
    level->pool = static_cast<uint32_t>(pool_.size());
    return;
  }
  work_.clear();
  work_.push_back(start);
  while (!work_.empty()) {
    const Thread t = work_.back();
    work_.pop_back();
    if (g.has_edges(t.state))
      AddThread(t, level);
    // Calls with the same return state share one stack node, so their threads merge again
    // once the callees finish.
    int32_t last_ret = -1;
    int32_t node = -1;
    for (const Grammar::Call& call : g.calls(t.state)) {
      if (call.ret != last_ret) {
        node = static_cast<int32_t>(pool_.size());
        pool_.push_back({call.ret, t.parent});
        last_ret = call.ret;
      }
      work_.push_back({g.rule_start(call.rule), node});
    }
    if (g.is_final(t.state)) {
      if (t.parent < 0) {
        level->accept = true;
      } else {
        const Node& n = pool_[static_cast<size_t>(t.parent)];
        work_.push_back({n.ret, n.parent});
      }
    }
  }
  level->pool = static_cast<uint32_t>(pool_.size());
}

GrammarMatcher::Level GrammarMatcher::Root() {
  trial_.assign(threads_.begin(), threads_.end());
  return {0, static_cast<uint32_t>(threads_.size()), static_cast<uint32_t>(pool_.size()), accept_};
}

GrammarMatcher::Level GrammarMatcher::Step(const Level& from, uint8_t byte) {
  const Grammar& g = *grammar_;
  Level out;
  out.begin = out.end = static_cast<uint32_t>(trial_.size());
  out.pool = static_cast<uint32_t>(pool_.size());
  for (uint32_t i = from.begin; i < from.end; ++i) {
    const Thread t = trial_[i];
    for (const Grammar::ByteEdge& e : g.edges(t.state)) {
      if (byte < e.lo)
        break;
      if (byte <= e.hi)
        Close({e.target, t.parent}, &out);
    }
  }
  return out;
}

void GrammarMatcher::Truncate(const Level& keep) {
  trial_.resize(keep.end);
  pool_.resize(keep.pool);
}

bool GrammarMatcher::AcceptBytes(std::string_view bytes) {
  const auto committed_pool = static_cast<uint32_t>(pool_.size());
  Level level = Root();
  for (char c : bytes) {
    level = Step(level, static_cast<uint8_t>(c));
    if (level.dead()) {
      trial_.clear();
      pool_.resize(committed_pool);
      return false;
    }
  }
  threads_.assign(trial_.begin() + level.begin, trial_.begin() + level.end);
  accept_ = level.accept;
  trial_.clear();
  MaybeCompact();
  return true;
}

void GrammarMatcher::AppendStateKey(std::vector<int32_t>* key) const {
  key->push_back(accept_ ? 1 : 0);
  for (const Thread& t : threads_) {
    key->push_back(t.state);
    for (int32_t n = t.parent; n >= 0; n = pool_[static_cast<size_t>(n)].parent)
      key->push_back(pool_[static_cast<size_t>(n)].ret);
    key->push_back(-1);
  }
}

void GrammarMatcher::MaybeCompact() {
  if (pool_.size() < compact_at_)
    return;
  // Parents are always older than their children, so one pass in index order keeps the
  // pool's order and remaps every parent before its children.
  remap_.assign(pool_.size(), -1);
  for (const Thread& t : threads_) {
    for (int32_t n = t.parent; n >= 0 && remap_[static_cast<size_t>(n)] == -1;
         n = pool_[static_cast<size_t>(n)].parent) {
      remap_[static_cast<size_t>(n)] = 0;
    }
  }
  int32_t live = 0;
  for (size_t i = 0; i < pool_.size(); ++i) {
    if (remap_[i] < 0)
      continue;
    Node node = pool_[i];
    if (node.parent >= 0)
      node.parent = remap_[static_cast<size_t>(node.parent)];
    pool_[static_cast<size_t>(live)] = node;
    remap_[i] = live++;
  }
  pool_.resize(static_cast<size_t>(live));
  for (Thread& t : threads_) {
    if (t.parent >= 0)
      t.parent = remap_[static_cast<size_t>(t.parent)];
  }
  compact_at_ = std::max<size_t>(4096, 2 * static_cast<size_t>(live));
}

}  // namespace switchyard::structured
