// CycleState: what the plugins of one scheduling cycle leave for each other and for their
// own later steps (llm-d's CycleState). A cycle is one pick for one request: the filters,
// the scorers and the picker run, then, once the pick is sent, the PreRequest hooks. The
// caller makes one CycleState per cycle and passes it to every plugin call of that cycle,
// then reads what the prefix-cache scorer predicted (prefix_match) for its metrics.
//
// Plain data: a cycle runs on one thread at a time, so nothing here is synchronized. Plugins
// themselves stay shared by every request thread (plugin.h).
#pragma once

#include <cstdint>
#include <list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace switchyard::router {

// What the prefix-cache scorer predicted in a cycle (llm-d's PrefixCacheMatchInfo): per
// scored endpoint, how many of the prompt's leading tokens it should already hold. Written by
// the scorer's Score (a later prefix scorer in the profile replaces it), read after the pick
// for the prefix-hit metrics, the P/D decider and the P2P source, so nothing is matched twice.
struct PrefixMatch {
  struct Holder {
    std::string name;
    int64_t tokens = 0;       // in any tier: the endpoint serves them without computing
    int64_t pool_tokens = 0;  // in its pool: what it lends a peer (<= tokens)
  };
  int64_t prompt_tokens = 0;
  std::vector<Holder> cached;  // endpoints holding at least one block

  // 0 for an endpoint the scorer did not see or matched nothing on.
  int64_t CachedTokens(std::string_view endpoint) const {
    for (const Holder& e : cached) {
      if (e.name == endpoint)
        return e.tokens;
    }
    return 0;
  }
};

struct CycleState {
  // A request's prefix keys at one (block size, mode), and what they were computed from, so
  // that a cycle state reused for a changed request does not serve stale keys.
  struct PrefixKeys {
    std::span<const int32_t> tokens;
    std::string model;
    std::string cache_salt;
    int32_t block_size = 0;
    bool precise = false;
    std::vector<uint64_t> keys;
  };
  // Computed once per (block size, mode) by the first prefix plugin that needs them and
  // reused by the others (scorer, filter, no-hit LRU, PreRequest). A list: adding an entry
  // keeps references to the others valid, and an empty one allocates nothing (a deque
  // allocates when made, for every cycle).
  std::list<PrefixKeys> prefix_keys;
  // Whether no endpoint had any prefix of the request (no-hit-lru-scorer's Score, for its
  // PreRequest step).
  std::optional<bool> cold_prefix;
  // What the prefix-cache scorer predicted (PrefixMatch above).
  std::optional<PrefixMatch> prefix_match;
};

}  // namespace switchyard::router
