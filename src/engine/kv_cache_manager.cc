#include "engine/kv_cache_manager.h"

#include <algorithm>
#include <utility>

#include "fmt/format.h"

#include "base/logging.h"

namespace switchyard::engine {
namespace {

int32_t CeilDiv(int64_t a, int32_t b) {
  return static_cast<int32_t>((a + b - 1) / b);
}

}  // namespace

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
  std::optional<std::string_view> seed;
  if (options.hash_seed.has_value())
    seed = *options.hash_seed;
  return std::unique_ptr<KvCacheManager>(new KvCacheManager(options, BlockHasher(seed)));
}

KvCacheManager::KvCacheManager(const KvCacheOptions& options, BlockHasher hasher)
    : block_size_(options.block_size),
      enable_caching_(options.enable_prefix_caching),
      enable_events_(options.enable_events),
      hasher_(std::move(hasher)),
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
  SY_CHECK(static_cast<int64_t>(num_blocks) * block_size_ <= static_cast<int64_t>(tokens.size()));
  for (auto i = static_cast<int32_t>(seq.hashes.size()); i < num_blocks; ++i) {
    const BlockHash* parent = i == 0 ? nullptr : &seq.hashes[i - 1];
    // Hash into a local first: push_back may move the parent it reads.
    const BlockHash hash = hasher_.Hash(
        parent, tokens.subspan(static_cast<size_t>(i) * block_size_, block_size_), seq.extras, i);
    seq.hashes.push_back(hash);
  }
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
  PrefixHit hit;
  hit.epoch = epoch_;
  if (!enable_caching_ || tokens.empty())
    return hit;
  // The last token is always recomputed: it is the one whose logits the step needs.
  const auto max_blocks = static_cast<int32_t>((tokens.size() - 1) / block_size_);
  for (int32_t i = 0; i < max_blocks; ++i) {
    EnsureHashes(seq, tokens, i + 1);
    std::optional<BlockId> block = pool_.Lookup(seq.hashes[i]);
    if (!block.has_value())
      break;
    hit.blocks.push_back(*block);
  }
  hit.num_tokens = static_cast<int32_t>(hit.blocks.size()) * block_size_;
  ++stats_.requests;
  stats_.queries += static_cast<int64_t>(tokens.size());
  stats_.hits += hit.num_tokens;
  return hit;
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
  const auto num_evictable_hits = static_cast<int32_t>(std::count_if(
      hit.blocks.begin(), hit.blocks.end(), [&](BlockId b) { return pool_.ref_count(b) == 0; }));
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
  ++epoch_;
  if (!plan.hit_blocks.empty()) {
    pool_.Touch(plan.hit_blocks);
    seq.blocks.insert(seq.blocks.end(), plan.hit_blocks.begin(), plan.hit_blocks.end());
    seq.num_cached_blocks = static_cast<int32_t>(plan.hit_blocks.size());
  }
  pool_.Allocate(plan.num_new_blocks, &seq.blocks);
  seq.num_tokens = plan.num_tokens_after;
  if (enable_caching_)
    CacheFullBlocks(seq, tokens, seq.num_tokens / block_size_);
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
    events_.push_back(std::move(stored));
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
  for (auto block = seq.blocks.rbegin(); block != seq.blocks.rend(); ++block) {
    pool_.Release(*block);
  }
  seq.blocks.clear();
  seq.num_cached_blocks = 0;
  seq.num_tokens = 0;
}

absl::StatusOr<std::optional<BlockCopy>> KvCacheManager::Fork(SeqId parent_id, SeqId child_id) {
  auto parent_it = seqs_.find(parent_id);
  if (parent_it == seqs_.end()) {
    return absl::NotFoundError(fmt::format("KV cache: unknown sequence {}", parent_id));
  }
  if (seqs_.contains(child_id)) {
    return absl::AlreadyExistsError(fmt::format("KV cache: sequence {} already exists", child_id));
  }
  const bool partial_tail = parent_it->second.num_tokens % block_size_ != 0;
  if (partial_tail && pool_.num_free_blocks() == 0) {
    return absl::ResourceExhaustedError(
        fmt::format("KV cache: no free block to fork sequence {}", parent_id));
  }
  ++epoch_;
  // try_emplace may rehash, so the parent is looked up again afterwards.
  Sequence& child = seqs_[child_id];
  const Sequence& parent = seqs_.at(parent_id);
  child = parent;
  std::optional<BlockCopy> copy;
  std::span<const BlockId> shared = parent.blocks;
  if (partial_tail)
    shared = shared.first(shared.size() - 1);
  pool_.Touch(shared);
  if (partial_tail) {
    child.blocks.pop_back();
    pool_.Allocate(1, &child.blocks);
    copy = BlockCopy{parent.blocks.back(), child.blocks.back()};
  }
  return copy;
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
