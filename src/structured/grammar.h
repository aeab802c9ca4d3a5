// Grammar: a compiled structured-output grammar, a recursive transition network over bytes.
// Each rule is a nondeterministic automaton whose states have byte-range edges, call edges
// (enter another rule's start; resume at a return state when that rule reaches a final
// state) and a final flag. Epsilon moves are closed at build time, so a matcher only follows
// bytes, calls and returns. A rule never accepts the empty string and no rule can reach
// itself through calls without consuming a byte (Build checks both), so following calls and
// returns always terminates.
//
// GrammarBuilder assembles one (the JSON-schema, regex and GBNF compilers, choices); Build
// freezes it. A built Grammar is immutable and shared (shared_ptr) by the grammar cache and
// every matcher that uses it, on any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace switchyard::structured {

class Grammar {
 public:
  struct ByteEdge {
    uint8_t lo = 0;
    uint8_t hi = 0;  // inclusive
    int32_t target = 0;
  };
  struct Call {
    int32_t rule = 0;
    int32_t ret = 0;  // the state to resume at once the rule is done
  };

  // Edges sorted by lo, non-overlapping ranges may still share bytes (nondeterminism).
  std::span<const ByteEdge> edges(int32_t state) const {
    return {edges_.data() + edge_begin_[state], edges_.data() + edge_begin_[state + 1]};
  }
  // Calls sorted by ret.
  std::span<const Call> calls(int32_t state) const {
    return {calls_.data() + call_begin_[state], calls_.data() + call_begin_[state + 1]};
  }
  bool is_final(int32_t state) const { return final_[state] != 0; }
  bool has_edges(int32_t state) const { return edge_begin_[state] != edge_begin_[state + 1]; }
  int32_t rule_start(int32_t rule) const { return rule_start_[rule]; }
  int32_t root_start() const { return rule_start_[root_rule_]; }
  int32_t num_states() const { return static_cast<int32_t>(final_.size()); }
  int32_t num_rules() const { return static_cast<int32_t>(rule_start_.size()); }

 private:
  friend class GrammarBuilder;
  Grammar() = default;

  std::vector<uint32_t> edge_begin_;  // num_states + 1
  std::vector<ByteEdge> edges_;
  std::vector<uint32_t> call_begin_;  // num_states + 1
  std::vector<Call> calls_;
  std::vector<uint8_t> final_;
  std::vector<int32_t> rule_start_;
  int32_t root_rule_ = 0;
};

class GrammarBuilder {
 public:
  // Grammars past this many states are refused (a hostile schema must not exhaust memory).
  static constexpr int32_t kMaxStates = 1 << 18;
  // Bound on Build's work (states visited plus edges and calls gathered while closing epsilon
  // moves), which long chains of epsilon moves make quadratic in the number of states; it
  // also bounds the built grammar's edges and calls.
  static constexpr size_t kMaxClosureWork = size_t{1} << 22;

  // A new rule with a fresh start state; returns its id.
  int32_t NewRule();
  int32_t RuleStart(int32_t rule) const { return rule_start_[static_cast<size_t>(rule)]; }
  int32_t NewState();
  void AddBytes(int32_t from, uint8_t lo, uint8_t hi, int32_t to);
  void AddByte(int32_t from, char c, int32_t to) {
    AddBytes(from, static_cast<uint8_t>(c), static_cast<uint8_t>(c), to);
  }
  // A chain of states spelling `bytes` from `from` to `to` (an epsilon move when empty).
  void AddLiteral(int32_t from, std::string_view bytes, int32_t to);
  void AddEpsilon(int32_t from, int32_t to);
  void AddCall(int32_t from, int32_t rule, int32_t to);
  void SetFinal(int32_t state);
  // Copies a built grammar's states and rules into this builder; returns the id its root
  // rule has here, for AddCall. REQUIRES: `g` does not accept the empty string when called.
  int32_t AddGrammar(const Grammar& g);
  int32_t num_states() const { return static_cast<int32_t>(states_.size()); }

  // Freezes the grammar with `root` as its start rule. InvalidArgument when it exceeds
  // kMaxStates or kMaxClosureWork, when a called rule accepts the empty string, or when a
  // rule can reach itself through calls before consuming a byte (left recursion).
  absl::StatusOr<std::shared_ptr<const Grammar>> Build(int32_t root) const;

 private:
  struct State {
    std::vector<Grammar::ByteEdge> edges;
    std::vector<Grammar::Call> calls;
    std::vector<int32_t> epsilons;
    bool final = false;
  };
  std::vector<State> states_;
  std::vector<int32_t> rule_start_;
};

}  // namespace switchyard::structured
