#include "engine/kv_cache_manager.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "fmt/format.h"

#include "base/logging.h"
#include "base/status_macros.h"

namespace switchyard::engine {
namespace {

int32_t CeilDiv(int64_t a, int32_t b) {
  return static_cast<int32_t>((a + b - 1) / b);
}

// Extends `chain`, the hashes of the first full blocks of `tokens`, to `num_blocks` blocks.
void ExtendChain(BlockHasher& hasher, std::span<const int32_t> tokens,
                 const BlockHashExtras& extras, int32_t block_size, int32_t num_blocks,
                 std::vector<BlockHash>* chain) {
  SY_CHECK(static_cast<int64_t>(num_blocks) * block_size <= static_cast<int64_t>(tokens.size()));
  for (auto i = static_cast<int32_t>(chain->size()); i < num_blocks; ++i) {
    const BlockHash* parent = i == 0 ? nullptr : &(*chain)[i - 1];
    // Hash into a local first: push_back may move the parent it reads.
    const BlockHash hash = hasher.Hash(
        parent, tokens.subspan(static_cast<size_t>(i) * block_size, block_size), extras, i);
    chain->push_back(hash);
  }
}

bool IsHeld(BlockId block) {
  return block != kNullBlock;
}

}  // namespace

int32_t MaxBlocksPerSequence(int64_t max_model_len, int64_t max_step_tokens, int32_t window,
                             int32_t block_size) {
  const int32_t full = CeilDiv(max_model_len, block_size);
  if (window <= 0)
    return full;
  return std::min(full, CeilDiv(window - 1 + max_step_tokens, block_size) + 1);
}

absl::StatusOr<std::unique_ptr<KvCacheManager>> KvCacheManager::Create(
    const KvCacheOptions& options) {
  if (options.num_blocks <= 0) {
    return absl::InvalidArgumentError(
        fmt::format("KV cache: num_blocks must be positive, got {}", options.num_blocks));
  }
  if (options.block_size <= 0) {
    return absl::InvalidArgumentError(
        fmt::format("KV cache: block_size must be positive, got {}", options.block_size));
  }
  if (options.sliding_window < 0) {
    return absl::InvalidArgumentError(fmt::format(
        "KV cache: sliding_window must be >= 0 (0: none), got {}", options.sliding_window));
  }
  std::optional<std::string_view> seed;
  if (options.hash_seed.has_value())
    seed = *options.hash_seed;
  return std::unique_ptr<KvCacheManager>(new KvCacheManager(options, BlockHasher(seed)));
}

KvCacheManager::KvCacheManager(const KvCacheOptions& options, BlockHasher hasher)
    : block_size_(options.block_size),
      window_(options.sliding_window),
      enable_caching_(options.enable_prefix_caching),
      enable_events_(options.enable_events),
      hasher_(std::move(hasher)),
      track_released_(options.track_released_blocks),
      pool_(options.num_blocks, options.enable_prefix_caching,
            options.enable_events ? &events_ : nullptr) {}

absl::Status KvCacheManager::AddSequence(SeqId seq, BlockHashExtras extras,
                                         std::optional<int64_t> lora_id) {
  auto [it, inserted] = seqs_.try_emplace(seq);
  if (!inserted) {
    return absl::AlreadyExistsError(fmt::format("KV cache: sequence {} already exists", seq));
  }
  it->second.extras = std::move(extras);
  it->second.lora_id = lora_id;
  return absl::OkStatus();
}

void KvCacheManager::EnsureHashes(Sequence& seq, std::span<const int32_t> tokens,
                                  int32_t num_blocks) {
  ExtendChain(hasher_, tokens, seq.extras, block_size_, num_blocks, &seq.hashes);
}

int32_t KvCacheManager::MaxHitBlocks(size_t num_tokens) const {
  // The last token is always recomputed: it is the one whose logits the step needs.
  if (!enable_caching_ || num_tokens == 0)
    return 0;
  return static_cast<int32_t>((num_tokens - 1) / block_size_);
}

int32_t KvCacheManager::NumSkippedBlocks(int64_t position) const {
  if (window_ == 0 || position < window_)
    return 0;
  return static_cast<int32_t>((position - window_ + 1) / block_size_);
}

PrefixHit KvCacheManager::FindHit(int32_t max_blocks,
                                  absl::FunctionRef<const BlockHash&(int32_t)> hash_at) const {
  // The hit is blocks [0, end).
  int32_t end = 0;
  if (window_ == 0) {
    while (end < max_blocks && pool_.Lookup(hash_at(end)).has_value())
      ++end;
  } else {
    // An end e is good when the blocks e's window reads (at least one) are cached: scan
    // from the right for the first run that long. Without one, the run that starts the
    // sequence (shorter) is the hit.
    const int32_t needed = std::max(1, CeilDiv(window_ - 1, block_size_));
    int32_t run = 0;
    for (int32_t i = max_blocks - 1; i >= 0; --i) {
      run = pool_.Lookup(hash_at(i)).has_value() ? run + 1 : 0;
      if (run == needed) {
        end = i + run;
        break;
      }
    }
    if (end == 0)
      end = run;
  }
  PrefixHit hit;
  hit.num_tokens = end * block_size_;
  hit.epoch = epoch_;
  const int32_t skipped = NumSkippedBlocks(hit.num_tokens);
  hit.blocks.assign(static_cast<size_t>(skipped), kNullBlock);
  for (int32_t i = skipped; i < end; ++i)
    hit.blocks.push_back(*pool_.Lookup(hash_at(i)));
  return hit;
}

absl::StatusOr<PrefixHit> KvCacheManager::GetComputedBlocks(SeqId seq_id,
                                                            std::span<const int32_t> tokens) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) {
    return absl::NotFoundError(fmt::format("KV cache: unknown sequence {}", seq_id));
  }
  Sequence& seq = it->second;
  if (!seq.blocks.empty()) {
    return absl::FailedPreconditionError(
        fmt::format("KV cache: sequence {} already holds blocks", seq_id));
  }
  PrefixHit hit = FindHit(MaxHitBlocks(tokens.size()), [&](int32_t i) -> const BlockHash& {
    EnsureHashes(seq, tokens, i + 1);
    return seq.hashes[i];
  });
  if (enable_caching_ && !tokens.empty()) {
    ++stats_.requests;
    stats_.queries += static_cast<int64_t>(tokens.size());
    stats_.hits += hit.num_tokens - std::min(hit.num_tokens, seq.num_loaded_tokens);
  }
  seq.num_loaded_tokens = 0;
  return hit;
}

PrefixHit KvCacheManager::ProbeComputedBlocks(std::span<const int32_t> tokens,
                                              const BlockHashExtras& extras,
                                              BlockHasher* hasher) const {
  std::vector<BlockHash> chain;
  return FindHit(MaxHitBlocks(tokens.size()), [&](int32_t i) -> const BlockHash& {
    ExtendChain(*hasher, tokens, extras, block_size_, i + 1, &chain);
    return chain[i];
  });
}

absl::StatusOr<AllocationPlan> KvCacheManager::Plan(SeqId seq_id, std::span<const int32_t> tokens,
                                                    int32_t num_new_tokens,
                                                    const PrefixHit& hit) const {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) {
    return absl::NotFoundError(fmt::format("KV cache: unknown sequence {}", seq_id));
  }
  const Sequence& seq = it->second;
  if (num_new_tokens < 0) {
    return absl::InvalidArgumentError(fmt::format(
        "KV cache: negative num_new_tokens {} for sequence {}", num_new_tokens, seq_id));
  }
  if (!hit.blocks.empty()) {
    if (!seq.blocks.empty()) {
      return absl::FailedPreconditionError(
          fmt::format("KV cache: prefix hit for sequence {} which already holds blocks", seq_id));
    }
    if (hit.epoch != epoch_) {
      return absl::FailedPreconditionError(
          fmt::format("KV cache: stale prefix hit for sequence {}", seq_id));
    }
  }
  const int64_t num_tokens_after =
      static_cast<int64_t>(seq.num_tokens) + hit.num_tokens + num_new_tokens;
  if (num_tokens_after > static_cast<int64_t>(tokens.size())) {
    return absl::InvalidArgumentError(
        fmt::format("KV cache: sequence {} would cover {} tokens but only {} are known", seq_id,
                    num_tokens_after, tokens.size()));
  }
  const int32_t num_required = CeilDiv(num_tokens_after, block_size_);
  const int32_t num_held = static_cast<int32_t>(seq.blocks.size() + hit.blocks.size());
  const int32_t num_new_blocks = std::max(0, num_required - num_held);
  // Hit blocks nobody references sit in the free queue; touching them shrinks it.
  const auto num_evictable_hits =
      static_cast<int32_t>(std::count_if(hit.blocks.begin(), hit.blocks.end(), [&](BlockId b) {
        return IsHeld(b) && pool_.ref_count(b) == 0;
      }));
  if (num_new_blocks > pool_.num_free_blocks() - num_evictable_hits) {
    return absl::ResourceExhaustedError(
        fmt::format("KV cache: sequence {} needs {} new blocks, {} free", seq_id, num_new_blocks,
                    pool_.num_free_blocks() - num_evictable_hits));
  }
  AllocationPlan plan;
  plan.seq = seq_id;
  plan.hit_blocks = hit.blocks;
  plan.num_new_blocks = num_new_blocks;
  plan.num_tokens_after = static_cast<int32_t>(num_tokens_after);
  plan.epoch = epoch_;
  return plan;
}

void KvCacheManager::Commit(const AllocationPlan& plan, std::span<const int32_t> tokens) {
  SY_CHECK(plan.epoch == epoch_);
  SY_CHECK(static_cast<int64_t>(tokens.size()) >= plan.num_tokens_after);
  Sequence& seq = seqs_.at(plan.seq);
  TakeBlocks(plan, seq);
  if (enable_caching_)
    CacheFullBlocks(seq, tokens, seq.num_tokens / block_size_);
}

absl::StatusOr<KvCacheManager::LoadTarget> KvCacheManager::BeginLoad(
    SeqId seq_id, std::span<const int32_t> tokens) {
  return BeginLoad(seq_id, tokens, std::numeric_limits<int32_t>::max());
}

absl::StatusOr<KvCacheManager::LoadTarget> KvCacheManager::BeginLoad(
    SeqId seq_id, std::span<const int32_t> tokens, int32_t end_block) {
  if (!enable_caching_) {
    return absl::FailedPreconditionError(
        "KV cache: loading KV from elsewhere needs prefix caching");
  }
  if (window_ != 0) {
    return absl::FailedPreconditionError(
        "KV cache: loading KV from elsewhere is not supported under a sliding window");
  }
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end())
    return absl::NotFoundError(fmt::format("KV cache: unknown sequence {}", seq_id));
  Sequence& seq = it->second;
  if (!seq.blocks.empty()) {
    return absl::FailedPreconditionError(
        fmt::format("KV cache: sequence {} already holds blocks", seq_id));
  }
  // The local hit, without counting a prefix-cache query: admission counts it later.
  const PrefixHit hit = FindHit(MaxHitBlocks(tokens.size()), [&](int32_t i) -> const BlockHash& {
    EnsureHashes(seq, tokens, i + 1);
    return seq.hashes[i];
  });
  const auto hit_blocks = static_cast<int32_t>(hit.blocks.size());
  const int32_t num_blocks = std::max(hit_blocks, std::min(MaxHitBlocks(tokens.size()), end_block));
  SY_ASSIGN_OR_RETURN(const AllocationPlan plan,
                      Plan(seq_id, tokens, num_blocks * block_size_ - hit.num_tokens, hit));
  TakeBlocks(plan, seq);
  LoadTarget target;
  target.first_block = hit_blocks;
  target.blocks.assign(seq.blocks.begin() + target.first_block, seq.blocks.end());
  return target;
}

KvCacheManager::PrefixProbe KvCacheManager::ProbePrefix(SeqId seq_id,
                                                        std::span<const int32_t> tokens) {
  SY_CHECK(window_ == 0);
  Sequence& seq = seqs_.at(seq_id);
  const int32_t max_blocks = MaxHitBlocks(tokens.size());
  EnsureHashes(seq, tokens, max_blocks);
  const PrefixHit hit =
      FindHit(max_blocks, [&](int32_t i) -> const BlockHash& { return seq.hashes[i]; });
  return PrefixProbe{
      .hashes = std::span<const BlockHash>(seq.hashes).first(static_cast<size_t>(max_blocks)),
      .num_cached_blocks = static_cast<int32_t>(hit.blocks.size())};
}

std::vector<KvCacheManager::ReleasedBlock> KvCacheManager::TakeReleasedBlocks() {
  std::vector<ReleasedBlock> released = std::exchange(released_, {});
  std::erase_if(released, [&](const ReleasedBlock& r) {
    const BlockHash* hash = pool_.hash(r.block);
    return hash == nullptr || *hash != r.hash;
  });
  return released;
}

void KvCacheManager::PinBlocks(std::span<const BlockId> blocks) {
  ++epoch_;
  pool_.Touch(blocks);
}

void KvCacheManager::UnpinBlocks(std::span<const BlockId> blocks) {
  ++epoch_;
  for (BlockId block : blocks)
    pool_.Release(block);
}

std::vector<BlockId> KvCacheManager::PinCachedPrefix(std::span<const BlockHash> hashes) {
  std::vector<BlockId> held;
  for (const BlockHash& hash : hashes) {
    const std::optional<BlockId> block = pool_.Lookup(hash);
    if (!block.has_value())
      break;
    held.push_back(*block);
  }
  PinBlocks(held);
  return held;
}

void KvCacheManager::FinishLoad(SeqId seq_id, std::span<const int32_t> tokens, int32_t num_loaded) {
  Sequence& seq = seqs_.at(seq_id);
  const int32_t loaded_end = seq.num_cached_blocks + num_loaded;
  SY_CHECK(loaded_end <= static_cast<int32_t>(seq.blocks.size()));
  CacheFullBlocks(seq, tokens, loaded_end);
  seq.num_loaded_tokens = num_loaded * block_size_;
  ReleaseBlocks(seq);
}

void KvCacheManager::TakeBlocks(const AllocationPlan& plan, Sequence& seq) {
  ++epoch_;
  if (!plan.hit_blocks.empty()) {
    const auto skipped =
        static_cast<int32_t>(std::find_if(plan.hit_blocks.begin(), plan.hit_blocks.end(), IsHeld) -
                             plan.hit_blocks.begin());
    pool_.Touch(std::span(plan.hit_blocks).subspan(static_cast<size_t>(skipped)));
    seq.blocks.insert(seq.blocks.end(), plan.hit_blocks.begin(), plan.hit_blocks.end());
    seq.num_null_blocks = skipped;
    seq.num_cached_blocks = static_cast<int32_t>(plan.hit_blocks.size());
  }
  pool_.Allocate(plan.num_new_blocks, &seq.blocks);
  seq.num_tokens = plan.num_tokens_after;
}

void KvCacheManager::ReleaseSkippedBlocks(SeqId seq_id) {
  if (window_ == 0)
    return;
  Sequence& seq = seqs_.at(seq_id);
  const int32_t skipped =
      std::min(NumSkippedBlocks(seq.num_tokens), static_cast<int32_t>(seq.blocks.size()));
  if (skipped <= seq.num_null_blocks)
    return;
  ++epoch_;
  // Oldest first: the pool evicts them first, keeping longest the blocks near the window
  // that longer prefix hits need.
  for (int32_t i = seq.num_null_blocks; i < skipped; ++i) {
    pool_.Release(seq.blocks[i]);
    seq.blocks[i] = kNullBlock;
  }
  seq.num_null_blocks = skipped;
}

void KvCacheManager::CacheFullBlocks(Sequence& seq, std::span<const int32_t> tokens,
                                     int32_t num_full_blocks) {
  const int32_t first = seq.num_cached_blocks;
  if (num_full_blocks <= first)
    return;
  EnsureHashes(seq, tokens, num_full_blocks);
  for (int32_t i = first; i < num_full_blocks; ++i)
    pool_.Cache(seq.blocks[i], seq.hashes[i]);
  seq.num_cached_blocks = num_full_blocks;
  if (enable_events_) {
    kvx::BlockStored stored;
    stored.block_hashes.reserve(num_full_blocks - first);
    for (int32_t i = first; i < num_full_blocks; ++i)
      stored.block_hashes.push_back(seq.hashes[i].event_hash());
    if (first > 0)
      stored.parent_block_hash = seq.hashes[first - 1].event_hash();
    stored.token_ids.assign(tokens.begin() + static_cast<size_t>(first) * block_size_,
                            tokens.begin() + static_cast<size_t>(num_full_blocks) * block_size_);
    stored.block_size = block_size_;
    stored.lora_id = seq.lora_id;
    stored.medium = kvx::kMediumGpu;
    stored.lora_name = seq.extras.lora_name;
    events_.emplace_back(std::move(stored));
  }
}

absl::Status KvCacheManager::Free(SeqId seq_id) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) {
    return absl::NotFoundError(fmt::format("KV cache: unknown sequence {}", seq_id));
  }
  ReleaseBlocks(it->second);
  seqs_.erase(it);
  return absl::OkStatus();
}

absl::Status KvCacheManager::Preempt(SeqId seq_id) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) {
    return absl::NotFoundError(fmt::format("KV cache: unknown sequence {}", seq_id));
  }
  ReleaseBlocks(it->second);
  return absl::OkStatus();
}

void KvCacheManager::ReleaseBlocks(Sequence& seq) {
  ++epoch_;
  const size_t first_released = released_.size();
  for (auto i = static_cast<int32_t>(seq.blocks.size()) - 1; i >= seq.num_null_blocks; --i) {
    const BlockId block = seq.blocks[i];
    pool_.Release(block);
    if (track_released_ && pool_.ref_count(block) == 0) {
      if (const BlockHash* hash = pool_.hash(block); hash != nullptr)
        released_.push_back({block, *hash});
    }
  }
  // In block-table order, so that a tier's copies of adjacent blocks coalesce.
  std::reverse(released_.begin() + static_cast<std::ptrdiff_t>(first_released), released_.end());
  seq.blocks.clear();
  seq.num_null_blocks = 0;
  seq.num_cached_blocks = 0;
  seq.num_tokens = 0;
}

absl::Status KvCacheManager::ResetPrefixCache() {
  if (!pool_.ResetPrefixCache()) {
    return absl::FailedPreconditionError(
        fmt::format("KV cache: cannot reset the prefix cache while {} blocks are in use",
                    pool_.num_blocks() - pool_.num_free_blocks()));
  }
  ++epoch_;
  return absl::OkStatus();
}

std::vector<kvx::KvCacheEvent> KvCacheManager::TakeEvents() {
  return std::exchange(events_, {});
}

std::vector<SeqId> KvCacheManager::SequenceIds() const {
  std::vector<SeqId> ids;
  ids.reserve(seqs_.size());
  for (const auto& [id, seq] : seqs_)
    ids.push_back(id);
  return ids;
}

}  // namespace switchyard::engine
