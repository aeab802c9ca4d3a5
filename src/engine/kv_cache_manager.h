// KvCacheManager: per-sequence block tables over a BlockPool, with vLLM-style automatic
// prefix caching (vllm/v1/core/kv_cache_manager.py). A scheduler step for one sequence is:
//
//   hit  = GetComputedBlocks(seq, tokens)          // only before the sequence has blocks
//   plan = Plan(seq, tokens, num_new_tokens, hit)  // may fail; changes nothing
//   Commit(plan, tokens)                           // cannot fail
//   ... the forward step runs ...
//   ReleaseSkippedBlocks(seq)                      // sliding window only
//
// Every full block is hashed (block_hash.h) and published in the cache as soon as the step
// that fills it is committed, so later sequences in the same step can already hit it.
// Sequences are identified by caller-chosen integer ids; the caller owns the token lists and
// passes them in (prompt followed by generated tokens, append-only).
//
// Sliding window (options.sliding_window = W > 0; the token at t sees t - W < p <= t): a
// step computing from position c reads no key before c - W + 1, so the blocks wholly before
// it are *skipped* (vLLM's SlidingWindowManager). Their table entries are kNullBlock and
// they go back to the pool, cached full blocks keeping their hash until reused, exactly like
// a freed sequence's blocks. A table is always ceil(num_tokens / block_size) entries long;
// its null entries form a prefix. A prefix hit needs only the blocks its end's window
// reads to be cached; the ones before are null in the hit and never touched.
//
// Threading: the engine loop thread owns the manager; nothing here locks. Steady-state
// decode (one token, no new block) allocates nothing.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "engine/block_hash.h"
#include "engine/block_pool.h"
#include "kvx/kv_events.h"

namespace switchyard::engine {

using SeqId = int64_t;

struct KvCacheOptions {
  int32_t num_blocks = 0;
  int32_t block_size = 16;  // vLLM's CacheConfig.DEFAULT_BLOCK_SIZE
  bool enable_prefix_caching = true;
  // PYTHONHASHSEED semantics (see BlockHasher); unset makes hashes process-private.
  std::optional<std::string> hash_seed;
  bool enable_events = false;
  // The attention window W in tokens (Hugging Face's `sliding_window`); 0: full attention.
  int32_t sliding_window = 0;
  // Keep the cached blocks whose last reference goes for TakeReleasedBlocks (a KV tier
  // copies them).
  bool track_released_blocks = false;
};

// The most blocks one sequence holds at once: every block of max_model_len tokens under
// full attention; under a window W at most those of a step's own tokens (up to
// max_step_tokens) plus the W - 1 before them, unaligned (vLLM's SlidingWindowSpec
// max_memory_usage_bytes).
int32_t MaxBlocksPerSequence(int64_t max_model_len, int64_t max_step_tokens, int32_t window,
                             int32_t block_size);

// vLLM's PrefixCacheStats, counted in tokens: one query of the sequence's full length per
// GetComputedBlocks call, hits = tokens served from the cache. As in vLLM, whose connector
// reports loaded KV apart from the local cache, tokens a load (FinishLoad) just brought in
// are not hits of the admission that follows it.
struct PrefixCacheStats {
  int64_t requests = 0;
  int64_t queries = 0;
  int64_t hits = 0;
};

// The longest cached prefix of a new sequence. Valid only until the next state change.
struct PrefixHit {
  // One per full block of the prefix; kNullBlock for those the window skips.
  std::vector<BlockId> blocks;
  int32_t num_tokens = 0;
  uint64_t epoch = 0;
};

// What Commit will do; produced by Plan against the current state.
struct AllocationPlan {
  SeqId seq = 0;
  std::vector<BlockId> hit_blocks;
  int32_t num_new_blocks = 0;
  // KV slots the sequence covers once committed (computed + hit + new tokens).
  int32_t num_tokens_after = 0;
  uint64_t epoch = 0;
};

class KvCacheManager {
 public:
  static absl::StatusOr<std::unique_ptr<KvCacheManager>> Create(const KvCacheOptions& options);

  KvCacheManager(const KvCacheManager&) = delete;
  KvCacheManager& operator=(const KvCacheManager&) = delete;

  // Registers a sequence with no blocks. `lora_id` is reported in BlockStored events.
  absl::Status AddSequence(SeqId seq, BlockHashExtras extras, std::optional<int64_t> lora_id);

  // Longest prefix of full blocks of `tokens` whose KV is cached, never covering the last
  // token (its logits must be computed): under full attention every block of it is cached;
  // under a window, those its end's window reads are (or all of them when the prefix is
  // shorter than that). Counts one prefix-cache query when caching is enabled.
  // REQUIRES: the sequence has no blocks yet (new or preempted and freed).
  absl::StatusOr<PrefixHit> GetComputedBlocks(SeqId seq, std::span<const int32_t> tokens);
  // What GetComputedBlocks would return for a new sequence with these tokens and extras,
  // without its side effects; `hasher` is the caller's copy of hasher() (scratch only).
  PrefixHit ProbeComputedBlocks(std::span<const int32_t> tokens, const BlockHashExtras& extras,
                                BlockHasher* hasher) const;

  // Plans a step that computes `num_new_tokens` more tokens of `tokens` after the hit.
  // ResourceExhausted when the free blocks (minus hit blocks that would leave the free
  // queue) do not suffice. Changes nothing.
  absl::StatusOr<AllocationPlan> Plan(SeqId seq, std::span<const int32_t> tokens,
                                      int32_t num_new_tokens, const PrefixHit& hit) const;
  // Applies a plan made by Plan with no state change in between.
  // REQUIRES: `tokens` is the list the plan was made with (or an extension of it).
  void Commit(const AllocationPlan& plan, std::span<const int32_t> tokens);

  // KV computed elsewhere (a peer engine's prefill, a KV tier) loaded into this cache, so
  // that the sequence is then admitted as usual and finds it as a prefix hit:
  //
  //   target = BeginLoad(seq, tokens)      // holds the cached prefix, allocates the rest
  //   ... the bytes of target.blocks arrive ...
  //   FinishLoad(seq, tokens, num_loaded)  // publishes those that arrived, releases all
  //   GetComputedBlocks(seq, tokens) ...   // the normal admission: a hit
  //
  // The blocks to load are the full blocks a hit may cover (never the last token's) past
  // the prefix already cached here; nothing is published before FinishLoad, so no other
  // sequence reads a block whose bytes are still on their way. ResourceExhausted when the
  // free blocks do not suffice; FailedPrecondition without prefix caching or under a
  // sliding window (whose skipped blocks a load would not honour).
  // REQUIRES: the sequence has no blocks yet.
  struct LoadTarget {
    // Index (in the sequence's block table) of target.blocks[0].
    int32_t first_block = 0;
    std::vector<BlockId> blocks;
  };
  absl::StatusOr<LoadTarget> BeginLoad(SeqId seq, std::span<const int32_t> tokens);
  // With `end_block`, the target stops before block end_block of the sequence (it may then
  // be empty).
  absl::StatusOr<LoadTarget> BeginLoad(SeqId seq, std::span<const int32_t> tokens,
                                       int32_t end_block);
  // Ends BeginLoad: the first `num_loaded` target blocks, which now hold the KV, are
  // published (one BlockStored, as a computed step's would be); the rest go back
  // unpublished. Either way the sequence keeps no blocks (as after Preempt).
  // REQUIRES: a BeginLoad of this sequence is open; num_loaded <= its target's blocks.
  void FinishLoad(SeqId seq, std::span<const int32_t> tokens, int32_t num_loaded);

  // A new sequence's prompt as a KV tier sees it: the hashes of the full blocks a hit may
  // cover (see GetComputedBlocks) and how many leading ones this cache holds. Counts no
  // query. The span lives until the sequence's next call here.
  // REQUIRES: the sequence has no blocks yet; full attention.
  struct PrefixProbe {
    std::span<const BlockHash> hashes;
    int32_t num_cached_blocks = 0;
  };
  PrefixProbe ProbePrefix(SeqId seq, std::span<const int32_t> tokens);

  // A cached full block whose last reference a sequence dropped (Free, Preempt, FinishLoad)
  // and which still holds that hash: a tier may copy it before the pool hands it out again.
  struct ReleasedBlock {
    BlockId block = 0;
    BlockHash hash;
  };
  // The blocks released since the last call (with track_released_blocks), leaving out those
  // the pool has since evicted. Call it between steps: a block published in a step's
  // Commit holds its KV only once that step has run.
  std::vector<ReleasedBlock> TakeReleasedBlocks();
  // One more reference on each block, keeping it out of the free queue (and from being
  // evicted) while a tier copies it; UnpinBlocks drops it. Pins are no sequence's release.
  // REQUIRES (Unpin): each block was pinned.
  void PinBlocks(std::span<const BlockId> blocks);
  void UnpinBlocks(std::span<const BlockId> blocks);
  // The blocks holding the leading run of `hashes` this pool caches, pinned as PinBlocks
  // pins, for a peer to read (a prefix lent to another engine). Between steps, as
  // TakeReleasedBlocks.
  std::vector<BlockId> PinCachedPrefix(std::span<const BlockHash> hashes);

  // Releases, oldest first, the blocks the window skips from the sequence's next position
  // (num_tokens(seq)) on; nothing under full attention. Call it once the step that computed
  // those tokens has run: that step may still read them.
  // REQUIRES: HasSequence(seq).
  void ReleaseSkippedBlocks(SeqId seq);
  // Leading blocks a step computing from `position` never reads: floor(max(0, position -
  // W + 1) / block_size); 0 under full attention.
  int32_t NumSkippedBlocks(int64_t position) const;

  // Releases the sequence's blocks, tail first, so that chain tails are evicted first, and
  // forgets the sequence.
  absl::Status Free(SeqId seq);
  // Releases the blocks as Free does but keeps the sequence (and its computed hashes) for
  // rescheduling from GetComputedBlocks; vLLM's recompute preemption.
  absl::Status Preempt(SeqId seq);

  // Forgets every cached hash. FailedPrecondition while any block is referenced.
  absl::Status ResetPrefixCache();

  // Drains the queued KV events (empty unless enable_events).
  std::vector<kvx::KvCacheEvent> TakeEvents();

  double usage() const { return pool_.Usage(); }
  const PrefixCacheStats& prefix_cache_stats() const { return stats_; }
  int32_t block_size() const { return block_size_; }
  int32_t sliding_window() const { return window_; }
  const BlockPool& pool() const { return pool_; }
  const BlockHasher& hasher() const { return hasher_; }
  bool HasSequence(SeqId seq) const { return seqs_.contains(seq); }
  // REQUIRES: HasSequence(seq). Released blocks read kNullBlock.
  std::span<const BlockId> block_table(SeqId seq) const { return seqs_.at(seq).blocks; }
  int32_t num_tokens(SeqId seq) const { return seqs_.at(seq).num_tokens; }
  // Ids of all registered sequences, unordered.
  std::vector<SeqId> SequenceIds() const;

 private:
  struct Sequence {
    BlockHashExtras extras;
    std::optional<int64_t> lora_id;
    std::vector<BlockId> blocks;
    // blocks[0, num_null_blocks) are kNullBlock.
    int32_t num_null_blocks = 0;
    // Hashes of the sequence's first hashes.size() full blocks (computed lazily).
    std::vector<BlockHash> hashes;
    // Blocks [0, num_cached_blocks) are published in the pool's cache map.
    int32_t num_cached_blocks = 0;
    int32_t num_tokens = 0;
    // Tokens the last FinishLoad published, left out of the next query's hits.
    int32_t num_loaded_tokens = 0;
  };

  KvCacheManager(const KvCacheOptions& options, BlockHasher hasher);

  // Extends seq.hashes to cover `num_blocks` full blocks of `tokens`.
  void EnsureHashes(Sequence& seq, std::span<const int32_t> tokens, int32_t num_blocks);
  // Full blocks a hit may cover: never the last token, whose logits the step needs; 0
  // without caching.
  int32_t MaxHitBlocks(size_t num_tokens) const;
  // The hit among the first `max_blocks` full blocks; `hash_at(i)` gives block i's hash.
  PrefixHit FindHit(int32_t max_blocks, absl::FunctionRef<const BlockHash&(int32_t)> hash_at) const;
  void ReleaseBlocks(Sequence& seq);
  // Takes the plan's blocks: touches the hit, allocates the new ones.
  void TakeBlocks(const AllocationPlan& plan, Sequence& seq);
  // Publishes the sequence's full blocks up to `num_full_blocks`, with one BlockStored.
  void CacheFullBlocks(Sequence& seq, std::span<const int32_t> tokens, int32_t num_full_blocks);

  const int32_t block_size_;
  const int32_t window_;
  const bool enable_caching_;
  const bool enable_events_;
  BlockHasher hasher_;
  std::vector<kvx::KvCacheEvent> events_;
  const bool track_released_;
  std::vector<ReleasedBlock> released_;
  BlockPool pool_;
  absl::flat_hash_map<SeqId, Sequence> seqs_;
  PrefixCacheStats stats_;
  // Bumped by every state change; hits and plans carry the epoch they were made in.
  uint64_t epoch_ = 0;
};

}  // namespace switchyard::engine
