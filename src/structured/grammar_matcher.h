// GrammarMatcher: where one sequence's output stands in a Grammar, advanced byte by byte.
// The state is a small set of threads (a grammar state plus the stack of return states that
// led there); stacks live in a node pool as parent-linked nodes, so a thread is two ints and
// copying or forking one is cheap. Ambiguous grammars give several threads; identical
// threads are merged, and a state set is capped at kMaxThreads (threads past the cap are
// dropped: the matcher may then refuse some valid continuations, never accept invalid ones).
//
// Besides committing bytes (AcceptBytes) the matcher offers trial steps that build states on
// top of the committed one and are undone by Truncate: the token mask computer walks the
// vocabulary trie with them. Trial steps reuse the matcher's buffers, so in steady state
// nothing is allocated per byte.
//
// Not thread-safe: one per sequence, used by the engine loop thread. Holds the grammar.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "structured/grammar.h"

namespace switchyard::structured {

class GrammarMatcher {
 public:
  static constexpr size_t kMaxThreads = 256;

  // A state set built by trial steps: threads [begin, end) of the trial buffer, the node pool
  // size it needs, and whether the bytes so far form a complete sentence.
  struct Level {
    uint32_t begin = 0;
    uint32_t end = 0;
    uint32_t pool = 0;
    bool accept = false;
    bool empty() const { return begin == end; }
    // Neither continuable nor complete: the bytes that led here are rejected.
    bool dead() const { return begin == end && !accept; }
  };

  explicit GrammarMatcher(std::shared_ptr<const Grammar> grammar);

  // Advances by `bytes` if the grammar allows all of them; otherwise returns false and the
  // state is unchanged.
  bool AcceptBytes(std::string_view bytes);
  // The output so far is a complete sentence (end of sequence allowed).
  bool CanEnd() const { return accept_; }
  // Some byte may follow.
  bool CanContinue() const { return !threads_.empty(); }

  // Trial steps. Root() copies the committed state into the trial buffer (invalidating any
  // earlier trial levels); Step builds the level after `byte` from `from`, which must be the
  // last level built (Truncate to it first); Truncate drops every level built after `keep`.
  Level Root();
  Level Step(const Level& from, uint8_t byte);
  void Truncate(const Level& keep);

  const std::shared_ptr<const Grammar>& grammar() const { return grammar_; }

  // Appends a canonical description of the committed state (whether it is complete, and each
  // thread's state with its stack of return states) to `key`: two matchers of one grammar
  // with equal keys allow exactly the same continuations.
  void AppendStateKey(std::vector<int32_t>* key) const;

 private:
  struct Thread {
    int32_t state = 0;
    int32_t parent = -1;  // node index; -1 for the root rule
  };
  struct Node {
    int32_t ret = 0;  // state to resume at when the callee finishes
    int32_t parent = -1;
  };

  // Adds `start` and everything reachable from it by calls and returns to `level` (the last
  // level of trial_).
  void Close(Thread start, Level* level);
  void AddThread(Thread t, Level* level);
  // Drops pool nodes no committed thread reaches once the pool has grown well past them.
  void MaybeCompact();

  std::shared_ptr<const Grammar> grammar_;
  std::vector<Thread> threads_;  // committed state
  bool accept_ = false;
  std::vector<Node> pool_;
  std::vector<Thread> trial_;
  std::vector<Thread> work_;    // Close scratch
  std::vector<int32_t> remap_;  // MaybeCompact scratch
  size_t compact_at_ = 4096;
};

}  // namespace switchyard::structured
