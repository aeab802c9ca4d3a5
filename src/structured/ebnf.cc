#include "structured/ebnf.h"

#include <algorithm>
#include <deque>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "fmt/format.h"

#include "base/status_macros.h"

namespace switchyard::structured {

EbnfExpr EbnfExpr::Literal(std::string bytes) {
  EbnfExpr e;
  e.kind = Kind::kLiteral;
  e.literal = std::move(bytes);
  return e;
}

EbnfExpr EbnfExpr::Class(std::vector<CodeRange> ranges) {
  EbnfExpr e;
  e.kind = Kind::kClass;
  e.ranges = std::move(ranges);
  return e;
}

EbnfExpr EbnfExpr::Ref(int32_t rule) {
  EbnfExpr e;
  e.kind = Kind::kRef;
  e.rule = rule;
  return e;
}

EbnfExpr EbnfExpr::Seq(std::vector<EbnfExpr> items) {
  EbnfExpr e;
  e.kind = Kind::kSeq;
  e.items = std::move(items);
  return e;
}

EbnfExpr EbnfExpr::Alt(std::vector<EbnfExpr> items) {
  EbnfExpr e;
  e.kind = Kind::kAlt;
  e.items = std::move(items);
  return e;
}

EbnfExpr EbnfExpr::Repeat(EbnfExpr item, int32_t min, int32_t max) {
  EbnfExpr e;
  e.kind = Kind::kRepeat;
  e.min = min;
  e.max = max;
  e.items.push_back(std::move(item));
  return e;
}

std::optional<uint32_t> ParseHexDigits(std::string_view s, size_t digits) {
  if (s.size() < digits)
    return std::nullopt;
  uint32_t value = 0;
  for (char h : s.substr(0, digits)) {
    const int v = h >= '0' && h <= '9'   ? h - '0'
                  : h >= 'a' && h <= 'f' ? h - 'a' + 10
                  : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                         : -1;
    if (v < 0)
      return std::nullopt;
    value = value * 16 + static_cast<uint32_t>(v);
  }
  return value;
}

std::string Printable(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 64))
    out.push_back(c >= 0x20 && c < 0x7F ? c : '?');
  if (s.size() > 64)
    out += "...";
  return out;
}

namespace {

using Kind = EbnfExpr::Kind;

absl::Status TooLarge() {
  return absl::InvalidArgumentError(
      fmt::format("the grammar is too large (more than {} states)", GrammarBuilder::kMaxStates));
}

class EbnfCompiler {
 public:
  explicit EbnfCompiler(const EbnfGrammar& g) : g_(g) {}

  absl::StatusOr<std::shared_ptr<const Grammar>> Compile() {
    Analyze();
    SY_RETURN_IF_ERROR(CheckLeftRecursion());
    const int32_t entry = b_.NewRule();
    const int32_t end = b_.NewState();
    b_.SetFinal(end);
    const auto root = static_cast<size_t>(g_.root);
    if (ref_users_[root].empty()) {
      // Nothing calls the root, so it is the entry itself and may match the empty string.
      SY_RETURN_IF_ERROR(Emit(g_.rules[root].body, b_.RuleStart(entry), end, Mode::kFull));
    } else {
      AddRuleCall(g_.root, b_.RuleStart(entry), end, Mode::kFull);
    }
    while (!pending_.empty()) {
      const auto [body, rule] = pending_.front();
      pending_.pop_front();
      const int32_t done = b_.NewState();
      b_.SetFinal(done);
      SY_RETURN_IF_ERROR(Emit(*body, b_.RuleStart(rule), done, Mode::kNonEmpty));
    }
    return b_.Build(entry);
  }

 private:
  // kFull: the part's language; kNonEmpty: the same without the empty string.
  enum class Mode { kFull, kNonEmpty };

  // Numbers the nodes of every rule reachable from the root and finds which can match the
  // empty string, in time linear in the grammar: a node becomes nullable when all (a
  // sequence) or one (anything else) of its children has, and a rule when its body has.
  void Analyze() {
    const size_t num_rules = g_.rules.size();
    body_id_.assign(num_rules, -1);
    ref_users_.assign(num_rules, {});
    std::vector<int32_t> todo = {g_.root};
    std::vector<uint8_t> queued(num_rules, 0);
    queued[static_cast<size_t>(g_.root)] = 1;
    std::vector<std::pair<const EbnfExpr*, int32_t>> stack;  // node, parent id
    while (!todo.empty()) {
      const auto r = static_cast<size_t>(todo.back());
      todo.pop_back();
      stack.assign(1, {&g_.rules[r].body, -1});
      while (!stack.empty()) {
        const auto [e, parent] = stack.back();
        stack.pop_back();
        const auto id = static_cast<int32_t>(nodes_.size());
        if (parent < 0)
          body_id_[r] = id;
        id_.emplace(e, id);
        nodes_.push_back(e);
        parent_.push_back(parent);
        body_rule_.push_back(parent < 0 ? static_cast<int32_t>(r) : -1);
        if (e->kind == Kind::kRef) {
          const auto callee = static_cast<size_t>(e->rule);
          ref_users_[callee].push_back(id);
          if (queued[callee] == 0) {
            queued[callee] = 1;
            todo.push_back(e->rule);
          }
        }
        for (const EbnfExpr& child : e->items)
          stack.emplace_back(&child, id);
      }
    }
    const size_t n = nodes_.size();
    nullable_.assign(n, 0);
    std::vector<int32_t> waiting(n, 1);  // children still to become nullable
    std::vector<int32_t> ready;
    for (size_t i = 0; i < n; ++i) {
      const EbnfExpr& e = *nodes_[i];
      const bool empty = (e.kind == Kind::kLiteral && e.literal.empty()) ||
                         (e.kind == Kind::kSeq && e.items.empty()) ||
                         (e.kind == Kind::kRepeat && (e.min == 0 || e.max == 0));
      if (e.kind == Kind::kSeq)
        waiting[i] = static_cast<int32_t>(e.items.size());
      if (empty) {
        waiting[i] = 0;
        nullable_[i] = 1;
        ready.push_back(static_cast<int32_t>(i));
      }
    }
    const auto satisfy = [&](int32_t id) {
      if (--waiting[static_cast<size_t>(id)] == 0) {
        nullable_[static_cast<size_t>(id)] = 1;
        ready.push_back(id);
      }
    };
    while (!ready.empty()) {
      const auto i = static_cast<size_t>(ready.back());
      ready.pop_back();
      if (parent_[i] >= 0) {
        satisfy(parent_[i]);
      } else {
        for (int32_t user : ref_users_[static_cast<size_t>(body_rule_[i])])
          satisfy(user);
      }
    }
  }

  bool Nullable(const EbnfExpr& e) const { return nullable_[static_cast<size_t>(id_.at(&e))]; }
  bool RuleNullable(int32_t rule) const {
    return nullable_[static_cast<size_t>(body_id_[static_cast<size_t>(rule)])];
  }

  // The rules `e` may call before consuming anything.
  void FirstRefs(const EbnfExpr& e, std::vector<int32_t>* out) const {
    switch (e.kind) {
      case Kind::kLiteral:
      case Kind::kClass:
        return;
      case Kind::kRef:
        out->push_back(e.rule);
        return;
      case Kind::kSeq:
        for (const EbnfExpr& item : e.items) {
          FirstRefs(item, out);
          if (!Nullable(item))
            return;
        }
        return;
      case Kind::kAlt:
      case Kind::kRepeat:
        if (e.kind == Kind::kRepeat && e.max == 0)
          return;
        for (const EbnfExpr& item : e.items)
          FirstRefs(item, out);
        return;
    }
  }

  absl::Status CheckLeftRecursion() const {
    const size_t num_rules = g_.rules.size();
    std::vector<std::vector<int32_t>> first(num_rules);
    for (size_t r = 0; r < num_rules; ++r) {
      if (body_id_[r] >= 0)
        FirstRefs(g_.rules[r].body, &first[r]);
    }
    enum : uint8_t { kWhite, kGrey, kBlack };
    std::vector<uint8_t> color(num_rules, kWhite);
    std::vector<std::pair<int32_t, size_t>> path;  // rule, next first-call index
    for (size_t r0 = 0; r0 < num_rules; ++r0) {
      if (color[r0] != kWhite || body_id_[r0] < 0)
        continue;
      path.assign(1, {static_cast<int32_t>(r0), 0});
      color[r0] = kGrey;
      while (!path.empty()) {
        auto& [rule, next] = path.back();
        const std::vector<int32_t>& calls = first[static_cast<size_t>(rule)];
        if (next == calls.size()) {
          color[static_cast<size_t>(rule)] = kBlack;
          path.pop_back();
          continue;
        }
        const int32_t callee = calls[next++];
        if (color[static_cast<size_t>(callee)] == kGrey) {
          std::string cycle;
          auto it = std::find_if(path.begin(), path.end(),
                                 [callee](const auto& p) { return p.first == callee; });
          for (; it != path.end(); ++it)
            cycle += Printable(g_.rules[static_cast<size_t>(it->first)].name) + " -> ";
          cycle += Printable(g_.rules[static_cast<size_t>(callee)].name);
          return absl::InvalidArgumentError(fmt::format(
              "left recursion: rule '{}' can reach itself without consuming anything ({})",
              Printable(g_.rules[static_cast<size_t>(callee)].name), cycle));
        }
        if (color[static_cast<size_t>(callee)] == kWhite) {
          color[static_cast<size_t>(callee)] = kGrey;
          path.emplace_back(callee, 0);
        }
      }
    }
    return absl::OkStatus();
  }

  // The Grammar rule that matches the non-empty sentences of `body`, compiled once.
  int32_t RuleFor(const EbnfExpr& body) {
    auto [it, fresh] = rules_.try_emplace(&body, 0);
    if (fresh) {
      it->second = b_.NewRule();
      pending_.emplace_back(&body, it->second);
    }
    return it->second;
  }

  void AddRuleCall(int32_t rule, int32_t from, int32_t to, Mode mode) {
    b_.AddCall(from, RuleFor(g_.rules[static_cast<size_t>(rule)].body), to);
    if (mode == Mode::kFull && RuleNullable(rule))
      b_.AddEpsilon(from, to);
  }

  // Parts cheap enough to copy wherever a construction needs them twice or more.
  static bool Small(const EbnfExpr& e) {
    switch (e.kind) {
      case Kind::kRef:
        return true;
      case Kind::kLiteral:
        return e.literal.size() <= 8;
      case Kind::kClass:
        return e.ranges.size() <= 4 && IsAsciiClass(e.ranges);
      default:
        return false;
    }
  }

  // `e` from `from` to `to`; when `shared` (the construction emits `e` more than once) and
  // `e` is not small, as a call to a rule of its own.
  absl::Status EmitPart(const EbnfExpr& e, int32_t from, int32_t to, Mode mode, bool shared) {
    if (!shared || Small(e))
      return Emit(e, from, to, mode);
    b_.AddCall(from, RuleFor(e), to);
    if (mode == Mode::kFull && Nullable(e))
      b_.AddEpsilon(from, to);
    return absl::OkStatus();
  }

  // Adds `e` between `from` and `to`. Edges leave only `from` or new states and enter only
  // `to` or new states, so sibling parts sharing `from` or `to` never run into each other.
  absl::Status Emit(const EbnfExpr& e, int32_t from, int32_t to, Mode mode) {
    if (b_.num_states() > GrammarBuilder::kMaxStates)
      return TooLarge();
    switch (e.kind) {
      case Kind::kLiteral:
        if (!e.literal.empty() || mode == Mode::kFull)
          b_.AddLiteral(from, e.literal, to);
        return absl::OkStatus();
      case Kind::kClass:
        AddClass(&b_, e.ranges, from, to);
        return absl::OkStatus();
      case Kind::kRef:
        AddRuleCall(e.rule, from, to, mode);
        return absl::OkStatus();
      case Kind::kAlt:
        for (const EbnfExpr& item : e.items)
          SY_RETURN_IF_ERROR(Emit(item, from, to, mode));
        return absl::OkStatus();
      case Kind::kSeq:
        return EmitSeq(e, from, to, mode);
      case Kind::kRepeat:
        return EmitRepeat(e, from, to, mode);
    }
    return absl::OkStatus();
  }

  absl::Status EmitSeq(const EbnfExpr& e, int32_t from, int32_t to, Mode mode) {
    const size_t n = e.items.size();
    if (n == 0) {
      if (mode == Mode::kFull)
        b_.AddEpsilon(from, to);
      return absl::OkStatus();
    }
    if (mode == Mode::kFull || !Nullable(e)) {
      // Without an empty sentence in the whole, the parts keep theirs.
      int32_t at = from;
      for (size_t i = 0; i < n; ++i) {
        const int32_t next = i + 1 == n ? to : b_.NewState();
        SY_RETURN_IF_ERROR(Emit(e.items[i], at, next, Mode::kFull));
        at = next;
      }
      return absl::OkStatus();
    }
    // Every part may be empty, but not all at once: track "nothing yet" (skip a part or take
    // a non-empty one) and "something" (take any), entering the latter on the first byte.
    int32_t nothing = from;
    int32_t something = -1;
    for (size_t i = 0; i < n; ++i) {
      const bool last = i + 1 == n;
      const int32_t next_something = last ? to : b_.NewState();
      const bool shared = something >= 0;
      SY_RETURN_IF_ERROR(EmitPart(e.items[i], nothing, next_something, Mode::kNonEmpty, shared));
      if (shared)
        SY_RETURN_IF_ERROR(EmitPart(e.items[i], something, next_something, Mode::kFull, true));
      if (!last) {
        const int32_t next_nothing = b_.NewState();
        b_.AddEpsilon(nothing, next_nothing);
        nothing = next_nothing;
      }
      something = next_something;
    }
    return absl::OkStatus();
  }

  // x{min,max} with x's empty sentence dropped: (x+){min,max}, or (x+){0,max} when x can be
  // empty, where x+ is x without the empty string. Copies chain through new states.
  absl::Status EmitRepeat(const EbnfExpr& e, int32_t from, int32_t to, Mode mode) {
    const EbnfExpr& x = e.items[0];
    if (e.max == 0) {
      if (mode == Mode::kFull)
        b_.AddEpsilon(from, to);
      return absl::OkStatus();
    }
    int32_t lo = Nullable(x) ? 0 : e.min;
    if (lo == 0 && mode == Mode::kFull)
      b_.AddEpsilon(from, to);
    lo = std::max(lo, 1);
    if (e.max < 0) {
      // lo - 1 copies, then one that loops.
      const bool shared = lo > 1;
      int32_t at = from;
      for (int32_t i = 1; i < lo; ++i) {
        if (b_.num_states() > GrammarBuilder::kMaxStates)
          return TooLarge();
        const int32_t next = b_.NewState();
        SY_RETURN_IF_ERROR(EmitPart(x, at, next, Mode::kNonEmpty, shared));
        at = next;
      }
      const int32_t loop = b_.NewState();
      const int32_t again = b_.NewState();
      b_.AddEpsilon(at, loop);
      SY_RETURN_IF_ERROR(EmitPart(x, loop, again, Mode::kNonEmpty, shared));
      b_.AddEpsilon(again, loop);
      b_.AddEpsilon(again, to);
      return absl::OkStatus();
    }
    const bool shared = e.max > 1;
    int32_t at = from;
    for (int32_t i = 1; i <= e.max; ++i) {
      if (b_.num_states() > GrammarBuilder::kMaxStates)
        return TooLarge();
      const int32_t next = i == e.max ? to : b_.NewState();
      SY_RETURN_IF_ERROR(EmitPart(x, at, next, Mode::kNonEmpty, shared));
      if (i >= lo && i < e.max)
        b_.AddEpsilon(next, to);
      at = next;
    }
    return absl::OkStatus();
  }

  const EbnfGrammar& g_;
  GrammarBuilder b_;
  // Analysis, by node id (reachable rules only).
  std::vector<const EbnfExpr*> nodes_;
  absl::flat_hash_map<const EbnfExpr*, int32_t> id_;
  std::vector<int32_t> parent_;     // -1 for a rule's body
  std::vector<int32_t> body_rule_;  // the rule a body belongs to; -1 below a body
  std::vector<uint8_t> nullable_;
  // By rule: the id of its body (-1: unreachable), the kRef nodes that name it.
  std::vector<int32_t> body_id_;
  std::vector<std::vector<int32_t>> ref_users_;
  // Compilation: the Grammar rule of each rule body or lifted part; those still to emit.
  absl::flat_hash_map<const EbnfExpr*, int32_t> rules_;
  std::deque<std::pair<const EbnfExpr*, int32_t>> pending_;
};

}  // namespace

absl::StatusOr<std::shared_ptr<const Grammar>> CompileEbnf(const EbnfGrammar& g) {
  return EbnfCompiler(g).Compile();
}

}  // namespace switchyard::structured
