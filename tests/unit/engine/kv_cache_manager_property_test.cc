// Randomized operation sequences (admit with prefix hits and chunked prefill, decode,
// fork, preempt, free, reset) against the KV cache manager, checking after every step the
// invariants that make the block pool and the prefix cache sound, and that the KV events
// replayed by a subscriber reproduce the cache exactly. With a sliding window, every step
// is followed by the release of the blocks the window skips, as in the engine.
#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "gtest/gtest.h"

#include "engine/kv_cache_manager.h"

namespace switchyard::engine {
namespace {

struct Config {
  int32_t num_blocks;
  int32_t block_size;
  bool caching;
  int32_t window;  // 0: full attention
};

class Harness {
 public:
  Harness(const Config& config, uint64_t seed)
      : config_(config), rng_(seed), reference_(std::string_view("42")) {
    KvCacheOptions options;
    options.num_blocks = config.num_blocks;
    options.block_size = config.block_size;
    options.enable_prefix_caching = config.caching;
    options.hash_seed = "42";
    options.enable_events = true;
    options.sliding_window = config.window;
    auto manager = KvCacheManager::Create(options);
    EXPECT_TRUE(manager.ok());
    m_ = std::move(*manager);
    // A few shared stems make prefix hits common.
    for (int s = 0; s < 3; ++s) {
      std::vector<int32_t> stem(Uniform(0, 3 * config.block_size + 2));
      for (int32_t& t : stem)
        t = Uniform(0, 3);
      stems_.push_back(stem);
    }
  }

  void Step() {
    switch (Uniform(0, 9)) {
      case 0:
      case 1:
      case 2:
      case 6:
        AddNew();
        break;
      case 3:
      case 4:
      case 5:
        Advance(PickSeq());
        break;
      case 7:
        if (auto seq = PickSeq()) {
          ASSERT_TRUE(m_->Free(*seq).ok());
          tokens_.erase(*seq);
        }
        break;
      case 8:
        if (auto seq = PickSeq()) {
          ASSERT_TRUE(m_->Preempt(*seq).ok());
        }
        break;
      case 9:
        Reset();
        break;
    }
    CheckInvariants();
  }

 private:
  int32_t Uniform(int32_t lo, int32_t hi) {
    return std::uniform_int_distribution<int32_t>(lo, hi)(rng_);
  }

  std::optional<SeqId> PickSeq() {
    if (tokens_.empty())
      return std::nullopt;
    auto it = tokens_.begin();
    std::advance(it, Uniform(0, static_cast<int32_t>(tokens_.size()) - 1));
    return it->first;
  }

  void AddNew() {
    const SeqId seq = next_id_++;
    std::vector<int32_t> prompt = stems_[Uniform(0, 2)];
    prompt.resize(Uniform(0, static_cast<int32_t>(prompt.size())));
    for (int n = Uniform(prompt.empty() ? 1 : 0, 2 * config_.block_size); n > 0; --n) {
      prompt.push_back(Uniform(0, 3));
    }
    BlockHashExtras extras;
    if (Uniform(0, 4) == 0)
      extras.lora_name = "lora";
    if (Uniform(0, 4) == 0)
      extras.cache_salt = "salt";
    extras_[seq] = extras;
    ASSERT_TRUE(m_->AddSequence(seq, extras, std::nullopt).ok());
    tokens_[seq] = prompt;
    Advance(seq);
  }

  // One scheduler step for `seq`: admission with a prefix lookup when it holds no blocks,
  // a prefill chunk while its prompt is not covered, else one decode token.
  void Advance(std::optional<SeqId> seq_id) {
    if (!seq_id)
      return;
    const SeqId seq = *seq_id;
    std::vector<int32_t>& tokens = tokens_[seq];
    PrefixHit hit;
    if (m_->block_table(seq).empty()) {
      auto computed = m_->GetComputedBlocks(seq, tokens);
      ASSERT_TRUE(computed.ok()) << computed.status();
      hit = *computed;
      CheckHit(seq, tokens, hit);
    }
    const int32_t covered = m_->num_tokens(seq) + hit.num_tokens;
    if (covered == static_cast<int32_t>(tokens.size()))
      tokens.push_back(Uniform(0, 3));
    const int32_t remaining = static_cast<int32_t>(tokens.size()) - covered;
    const int32_t num_new = Uniform(1, remaining);
    const auto queue_before = m_->pool().FreeQueue();
    auto plan = m_->Plan(seq, tokens, num_new, hit);
    if (!plan.ok()) {
      ASSERT_EQ(plan.status().code(), absl::StatusCode::kResourceExhausted) << plan.status();
      ASSERT_EQ(m_->pool().FreeQueue(), queue_before);
      ++exhausted_;
      return;
    }
    m_->Commit(*plan, tokens);
    ++committed_;
    NoteHashes(seq);
    m_->ReleaseSkippedBlocks(seq);
  }

  // The blocks a step fills may leave the window as soon as it ran: checks their hashes and
  // notes them while the sequence still holds them.
  void NoteHashes(SeqId seq) {
    const auto table = m_->block_table(seq);
    for (size_t i = 0; i < table.size(); ++i) {
      const BlockHash* h = table[i] == kNullBlock ? nullptr : m_->pool().hash(table[i]);
      if (h == nullptr)
        continue;
      ASSERT_EQ(*h, ReferenceHash(seq, tokens_[seq], static_cast<int32_t>(i)));
      last_hash_[table[i]] = *h;
    }
  }

  void Reset() {
    const bool idle = m_->pool().num_free_blocks() == config_.num_blocks;
    const absl::Status status = m_->ResetPrefixCache();
    ASSERT_EQ(status.ok(), idle) << status;
    if (idle) {
      ASSERT_TRUE(m_->pool().cache_map().empty());
    }
  }

  // The reference chain hash of block `index` of `tokens`. Token lists are append-only,
  // so the chain is memoized per sequence.
  BlockHash ReferenceHash(SeqId seq, const std::vector<int32_t>& tokens, int32_t index) {
    const int32_t bs = config_.block_size;
    std::vector<BlockHash>& chain = reference_chains_[seq];
    for (auto i = static_cast<int32_t>(chain.size()); i <= index; ++i) {
      const BlockHash hash = reference_.Hash(
          i == 0 ? nullptr : &chain[i - 1],
          std::span(tokens).subspan(static_cast<size_t>(i) * bs, bs), extras_[seq], i);
      chain.push_back(hash);
    }
    return chain[index];
  }

  // Blocks wholly before the window of a step computing from `position`.
  int32_t Skipped(int32_t position) const {
    if (config_.window == 0)
      return 0;
    return std::max(0, position - config_.window + 1) / config_.block_size;
  }

  bool Cached(SeqId seq, const std::vector<int32_t>& tokens, int32_t index) {
    return m_->pool().Lookup(ReferenceHash(seq, tokens, index)).has_value();
  }

  // A hit ending at block `end` is usable when the blocks its window reads are cached (under
  // a window, at least the last one, as vLLM asks).
  bool Usable(SeqId seq, const std::vector<int32_t>& tokens, int32_t end) {
    int32_t first = Skipped(end * config_.block_size);
    if (config_.window > 0)
      first = std::min(first, end - 1);
    for (int32_t i = first; i < end; ++i) {
      if (!Cached(seq, tokens, i))
        return false;
    }
    return true;
  }

  void CheckHit(SeqId seq, const std::vector<int32_t>& tokens, const PrefixHit& hit) {
    const int32_t bs = config_.block_size;
    ASSERT_EQ(hit.num_tokens, static_cast<int32_t>(hit.blocks.size()) * bs);
    ASSERT_LT(hit.num_tokens, static_cast<int32_t>(tokens.size()));  // never the last token
    if (!config_.caching) {
      ASSERT_TRUE(hit.blocks.empty());
    }
    const int32_t skipped = Skipped(hit.num_tokens);
    for (size_t i = 0; i < hit.blocks.size(); ++i) {
      if (static_cast<int32_t>(i) < skipped) {
        ASSERT_EQ(hit.blocks[i], kNullBlock);
        continue;
      }
      const BlockHash* h = m_->pool().hash(hit.blocks[i]);
      ASSERT_NE(h, nullptr);
      ASSERT_EQ(*h, ReferenceHash(seq, tokens, static_cast<int32_t>(i)));
    }
    if (!hit.blocks.empty()) {
      ASSERT_TRUE(Usable(seq, tokens, static_cast<int32_t>(hit.blocks.size())));
    }
    // Longest: no longer prefix (within the limit) is usable.
    const int32_t max_blocks = (static_cast<int32_t>(tokens.size()) - 1) / bs;
    for (auto end = static_cast<int32_t>(hit.blocks.size()) + 1;
         config_.caching && end <= max_blocks; ++end) {
      ASSERT_FALSE(Usable(seq, tokens, end)) << "a hit of " << end << " blocks was missed";
    }
    if (skipped > 0)
      ++window_hits_;
  }

  void CheckInvariants() {
    const BlockPool& pool = m_->pool();
    const int32_t n = config_.num_blocks;
    const int32_t bs = config_.block_size;
    std::vector<int32_t> holders(n, 0);
    for (SeqId seq : m_->SequenceIds()) {
      ASSERT_TRUE(tokens_.contains(seq));
      const auto table = m_->block_table(seq);
      const int32_t num_tokens = m_->num_tokens(seq);
      ASSERT_LE(num_tokens, static_cast<int32_t>(tokens_[seq].size()));
      ASSERT_EQ(static_cast<int32_t>(table.size()), (num_tokens + bs - 1) / bs);
      // Exactly the blocks before the next position's window are released.
      const int32_t skipped = Skipped(num_tokens);
      for (size_t i = 0; i < table.size(); ++i) {
        const BlockId b = table[i];
        ASSERT_EQ(b == kNullBlock, static_cast<int32_t>(i) < skipped) << "block " << i;
        if (b == kNullBlock) {
          ++released_;
          continue;
        }
        ASSERT_GE(b, 0);
        ASSERT_LT(b, n);
        ++holders[b];
        const bool full = static_cast<int32_t>(i + 1) * bs <= num_tokens;
        const BlockHash* h = pool.hash(b);
        if (config_.caching && full) {
          // Every full block is cached, under the hash of the tokens it holds.
          ASSERT_NE(h, nullptr);
          ASSERT_EQ(*h, ReferenceHash(seq, tokens_[seq], static_cast<int32_t>(i)));
          last_hash_[b] = *h;
        } else {
          ASSERT_EQ(h, nullptr);
        }
      }
    }
    const std::vector<BlockId> queue = pool.FreeQueue();
    ASSERT_EQ(static_cast<int32_t>(queue.size()), pool.num_free_blocks());
    std::vector<bool> queued(n, false);
    for (BlockId b : queue) {
      ASSERT_GE(b, 0);
      ASSERT_LT(b, n);
      ASSERT_FALSE(queued[b]) << "block queued twice";
      queued[b] = true;
    }
    int32_t used = 0;
    int32_t hashed = 0;
    for (BlockId b = 0; b < n; ++b) {
      ASSERT_EQ(pool.ref_count(b), holders[b]) << "block " << b;
      ASSERT_EQ(queued[b], holders[b] == 0) << "block " << b;
      ASSERT_EQ(pool.in_free_queue(b), queued[b]);
      used += holders[b] > 0 ? 1 : 0;
      if (const BlockHash* h = pool.hash(b)) {
        ++hashed;
        // A free cached block keeps the hash it had while it was held.
        ASSERT_TRUE(last_hash_.contains(b));
        ASSERT_EQ(*h, last_hash_[b]);
      }
    }
    ASSERT_EQ(pool.num_free_blocks() + used, n);
    ASSERT_DOUBLE_EQ(m_->usage(), 1.0 - static_cast<double>(pool.num_free_blocks()) / n);
    int32_t mapped = 0;
    for (const auto& [hash, ids] : pool.cache_map()) {
      ASSERT_FALSE(ids.empty());
      for (BlockId b : ids) {
        ASSERT_NE(pool.hash(b), nullptr);
        ASSERT_EQ(*pool.hash(b), hash);
        ++mapped;
      }
    }
    ASSERT_EQ(mapped, hashed);
    CheckEvents();
  }

  // A subscriber replaying the events must end with exactly the cache's contents.
  void CheckEvents() {
    for (kvx::KvCacheEvent& event : m_->TakeEvents()) {
      if (auto* stored = std::get_if<kvx::BlockStored>(&event)) {
        ASSERT_EQ(stored->token_ids.size(), stored->block_hashes.size() * config_.block_size);
        for (const kvx::EventHash& h : stored->block_hashes)
          ++published_[h];
      } else if (auto* removed = std::get_if<kvx::BlockRemoved>(&event)) {
        for (const kvx::EventHash& h : removed->block_hashes) {
          ASSERT_GT(published_[h], 0);
          if (--published_[h] == 0)
            published_.erase(h);
        }
      } else {
        published_.clear();
      }
    }
    absl::flat_hash_map<kvx::EventHash, int32_t> cached;
    for (const auto& [hash, ids] : m_->pool().cache_map()) {
      cached[hash.event_hash()] = static_cast<int32_t>(ids.size());
    }
    ASSERT_EQ(published_, cached);
  }

 public:
  int64_t committed_ = 0;
  int64_t exhausted_ = 0;
  int64_t released_ = 0;     // null table entries seen by the invariant checks
  int64_t window_hits_ = 0;  // hits with skipped blocks

 private:
  Config config_;
  std::mt19937_64 rng_;
  BlockHasher reference_;
  std::unique_ptr<KvCacheManager> m_;
  std::vector<std::vector<int32_t>> stems_;
  std::map<SeqId, std::vector<int32_t>> tokens_;
  std::map<SeqId, BlockHashExtras> extras_;
  std::map<SeqId, std::vector<BlockHash>> reference_chains_;
  absl::flat_hash_map<BlockId, BlockHash> last_hash_;
  absl::flat_hash_map<kvx::EventHash, int32_t> published_;
  SeqId next_id_ = 1;
};

TEST(KvCacheManagerPropertyTest, RandomOperationSequencesKeepInvariants) {
  const std::vector<Config> configs = {
      {4, 1, true, 0},   {8, 2, true, 0},   {16, 4, true, 0}, {40, 4, true, 0},
      {12, 16, true, 0}, {16, 4, false, 0}, {16, 4, true, 6}, {12, 2, true, 3},
      {40, 4, true, 9},  {16, 4, false, 6}, {8, 1, true, 1},  {8, 4, true, 1},
  };
  int64_t committed = 0;
  int64_t exhausted = 0;
  int64_t released = 0;
  int64_t window_hits = 0;
  for (const Config& config : configs) {
    for (uint64_t seed = 0; seed < 10; ++seed) {
      SCOPED_TRACE(testing::Message()
                   << "blocks=" << config.num_blocks << " block_size=" << config.block_size
                   << " caching=" << config.caching << " seed=" << seed);
      Harness harness(config, seed);
      for (int step = 0; step < 250; ++step) {
        harness.Step();
        if (testing::Test::HasFatalFailure())
          return;
      }
      committed += harness.committed_;
      exhausted += harness.exhausted_;
      released += harness.released_;
      window_hits += harness.window_hits_;
    }
  }
  // The runs exercise both outcomes of Plan, released blocks and hits that skip blocks.
  EXPECT_GT(committed, 1000);
  EXPECT_GT(exhausted, 10);
  EXPECT_GT(released, 1000);
  EXPECT_GT(window_hits, 10);
}

}  // namespace
}  // namespace switchyard::engine
