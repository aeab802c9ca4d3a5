#include "structured/grammar.h"

#include <algorithm>
#include <tuple>

#include "absl/status/status.h"
#include "fmt/format.h"

namespace switchyard::structured {

int32_t GrammarBuilder::NewRule() {
  rule_start_.push_back(NewState());
  return static_cast<int32_t>(rule_start_.size() - 1);
}

int32_t GrammarBuilder::NewState() {
  states_.emplace_back();
  return static_cast<int32_t>(states_.size() - 1);
}

void GrammarBuilder::AddBytes(int32_t from, uint8_t lo, uint8_t hi, int32_t to) {
  states_[static_cast<size_t>(from)].edges.push_back({lo, hi, to});
}

void GrammarBuilder::AddLiteral(int32_t from, std::string_view bytes, int32_t to) {
  if (bytes.empty()) {
    AddEpsilon(from, to);
    return;
  }
  int32_t at = from;
  for (size_t i = 0; i < bytes.size(); ++i) {
    const int32_t next = i + 1 == bytes.size() ? to : NewState();
    AddByte(at, bytes[i], next);
    at = next;
  }
}

void GrammarBuilder::AddEpsilon(int32_t from, int32_t to) {
  states_[static_cast<size_t>(from)].epsilons.push_back(to);
}

void GrammarBuilder::AddCall(int32_t from, int32_t rule, int32_t to) {
  states_[static_cast<size_t>(from)].calls.push_back({rule, to});
}

void GrammarBuilder::SetFinal(int32_t state) {
  states_[static_cast<size_t>(state)].final = true;
}

int32_t GrammarBuilder::AddGrammar(const Grammar& g) {
  const auto state_base = static_cast<int32_t>(states_.size());
  const auto rule_base = static_cast<int32_t>(rule_start_.size());
  for (int32_t s = 0; s < g.num_states(); ++s) {
    State& copy = states_.emplace_back();
    for (const Grammar::ByteEdge& e : g.edges(s))
      copy.edges.push_back({e.lo, e.hi, e.target + state_base});
    for (const Grammar::Call& c : g.calls(s))
      copy.calls.push_back({c.rule + rule_base, c.ret + state_base});
    copy.final = g.is_final(s);
  }
  for (int32_t r = 0; r < g.num_rules(); ++r)
    rule_start_.push_back(g.rule_start(r) + state_base);
  return rule_base + g.root_rule_;
}

absl::StatusOr<std::shared_ptr<const Grammar>> GrammarBuilder::Build(int32_t root) const {
  const size_t n = states_.size();
  if (n > static_cast<size_t>(kMaxStates)) {
    return absl::InvalidArgumentError(
        fmt::format("the grammar is too large ({} states, at most {})", n, kMaxStates));
  }
  std::shared_ptr<Grammar> g(new Grammar());
  g->rule_start_ = rule_start_;
  g->root_rule_ = root;
  g->final_.assign(n, 0);
  g->edge_begin_.reserve(n + 1);
  g->call_begin_.reserve(n + 1);

  // Epsilon closure of each state; `stamp` marks the states seen for the current one.
  std::vector<uint32_t> stamp(n, 0);
  std::vector<int32_t> stack;
  std::vector<Grammar::ByteEdge> edges;
  std::vector<Grammar::Call> calls;
  size_t closure_work = 0;
  for (size_t s = 0; s < n; ++s) {
    const auto mark = static_cast<uint32_t>(s + 1);
    edges.clear();
    calls.clear();
    bool final = false;
    stack.assign(1, static_cast<int32_t>(s));
    stamp[s] = mark;
    while (!stack.empty()) {
      const State& st = states_[static_cast<size_t>(stack.back())];
      stack.pop_back();
      // Long chains of epsilon moves (many optional parts in a row) make closures quadratic.
      closure_work += 1 + st.edges.size() + st.calls.size();
      if (closure_work > kMaxClosureWork) {
        return absl::InvalidArgumentError(
            "the grammar is too large (too many optional parts in a row)");
      }
      edges.insert(edges.end(), st.edges.begin(), st.edges.end());
      calls.insert(calls.end(), st.calls.begin(), st.calls.end());
      final = final || st.final;
      for (int32_t e : st.epsilons) {
        if (stamp[static_cast<size_t>(e)] != mark) {
          stamp[static_cast<size_t>(e)] = mark;
          stack.push_back(e);
        }
      }
    }
    std::sort(edges.begin(), edges.end(), [](const auto& a, const auto& b) {
      return std::tie(a.lo, a.hi, a.target) < std::tie(b.lo, b.hi, b.target);
    });
    edges.erase(std::unique(edges.begin(), edges.end(),
                            [](const auto& a, const auto& b) {
                              return a.lo == b.lo && a.hi == b.hi && a.target == b.target;
                            }),
                edges.end());
    std::sort(calls.begin(), calls.end(), [](const auto& a, const auto& b) {
      return std::tie(a.ret, a.rule) < std::tie(b.ret, b.rule);
    });
    calls.erase(std::unique(calls.begin(), calls.end(),
                            [](const auto& a, const auto& b) {
                              return a.ret == b.ret && a.rule == b.rule;
                            }),
                calls.end());
    g->edge_begin_.push_back(static_cast<uint32_t>(g->edges_.size()));
    g->call_begin_.push_back(static_cast<uint32_t>(g->calls_.size()));
    g->edges_.insert(g->edges_.end(), edges.begin(), edges.end());
    g->calls_.insert(g->calls_.end(), calls.begin(), calls.end());
    g->final_[s] = final ? 1 : 0;
  }
  g->edge_begin_.push_back(static_cast<uint32_t>(g->edges_.size()));
  g->call_begin_.push_back(static_cast<uint32_t>(g->calls_.size()));

  // No called rule may accept the empty string, so a rule's first calls are those of its
  // start state; their graph must be acyclic.
  const size_t num_rules = rule_start_.size();
  for (const Grammar::Call& c : g->calls_) {
    if (g->is_final(g->rule_start(c.rule)))
      return absl::InvalidArgumentError("a referenced sub-grammar accepts the empty string");
  }
  enum : uint8_t { kWhite, kGrey, kBlack };
  std::vector<uint8_t> color(num_rules, kWhite);
  std::vector<std::pair<int32_t, size_t>> dfs;  // rule, next call index
  for (size_t r0 = 0; r0 < num_rules; ++r0) {
    if (color[r0] != kWhite)
      continue;
    dfs.assign(1, {static_cast<int32_t>(r0), 0});
    color[r0] = kGrey;
    while (!dfs.empty()) {
      auto& [rule, next] = dfs.back();
      const auto first_calls = g->calls(g->rule_start(rule));
      if (next == first_calls.size()) {
        color[static_cast<size_t>(rule)] = kBlack;
        dfs.pop_back();
        continue;
      }
      const int32_t callee = first_calls[next++].rule;
      if (color[static_cast<size_t>(callee)] == kGrey) {
        return absl::InvalidArgumentError(
            "the schema refers to itself without consuming input (left recursion)");
      }
      if (color[static_cast<size_t>(callee)] == kWhite) {
        color[static_cast<size_t>(callee)] = kGrey;
        dfs.emplace_back(callee, 0);
      }
    }
  }
  return std::shared_ptr<const Grammar>(std::move(g));
}

}  // namespace switchyard::structured
