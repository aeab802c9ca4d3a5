#include "sim/sim_runner.h"

#include <algorithm>
#include <thread>
#include <utility>

#include "fmt/format.h"

#include "base/status_macros.h"

namespace switchyard::sim {
namespace {

absl::Status Invalid(std::string_view what) {
  return absl::InvalidArgumentError(fmt::format("sim runner: {}", what));
}

// SplitMix64's finalizer: every input bit moves every output bit, so neighbouring
// positions of one token pick unrelated outputs.
uint64_t Mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

}  // namespace

SimClock::TimePoint SteadySimClock::Now() {
  return std::chrono::steady_clock::now();
}

void SteadySimClock::SleepUntil(TimePoint deadline) {
  std::this_thread::sleep_until(deadline);
}

absl::StatusOr<std::unique_ptr<SimRunner>> SimRunner::Create(const engine::RunnerLimits& limits,
                                                             const LatencyParams& latency,
                                                             std::vector<int32_t> emit_tokens,
                                                             std::unique_ptr<SimClock> clock,
                                                             std::unique_ptr<SimKvMemory> kv) {
  if (limits.vocab_size <= 0 || limits.max_num_batched_tokens <= 0 || limits.max_logit_rows <= 0 ||
      limits.num_kv_blocks <= 0 || limits.block_size <= 0) {
    return Invalid(
        "vocabulary, tokens per step, logit rows, KV blocks and block size must be "
        "positive");
  }
  if (emit_tokens.empty()) {
    return Invalid("no tokens to emit");
  }
  for (int32_t token : emit_tokens) {
    if (token < 0 || token >= limits.vocab_size) {
      return Invalid(
          fmt::format("emit token {} outside the vocabulary [0, {})", token, limits.vocab_size));
    }
  }
  if (clock == nullptr) {
    return Invalid("no clock");
  }
  if (kv != nullptr && kv->kv_memory().region.num_blocks() != limits.num_kv_blocks) {
    return Invalid(fmt::format("KV memory of {} blocks for a cache of {}",
                               kv->kv_memory().region.num_blocks(), limits.num_kv_blocks));
  }
  return std::unique_ptr<SimRunner>(
      new SimRunner(limits, latency, std::move(emit_tokens), std::move(clock), std::move(kv)));
}

SimRunner::SimRunner(const engine::RunnerLimits& limits, const LatencyParams& latency,
                     std::vector<int32_t> emit_tokens, std::unique_ptr<SimClock> clock,
                     std::unique_ptr<SimKvMemory> kv)
    : limits_(limits),
      latency_(latency),
      emit_tokens_(std::move(emit_tokens)),
      clock_(std::move(clock)),
      kv_(std::move(kv)) {}

absl::StatusOr<engine::RunnerKvMemory> SimRunner::kv_memory() const {
  if (kv_ == nullptr)
    return engine::ModelRunner::kv_memory();
  return kv_->kv_memory();
}

int32_t SimRunner::ChosenToken(int32_t token, int32_t position) const {
  const uint64_t key =
      (static_cast<uint64_t>(static_cast<uint32_t>(token)) << 32) | static_cast<uint32_t>(position);
  return emit_tokens_[Mix(key) % emit_tokens_.size()];
}

absl::Status SimRunner::CheckBatch(const model::ForwardBatch& batch,
                                   std::span<float> logits) const {
  const auto n = static_cast<int64_t>(batch.tokens.size());
  if (n == 0 || n > limits_.max_num_batched_tokens) {
    return Invalid(
        fmt::format("{} tokens; a step takes 1 to {}", n, limits_.max_num_batched_tokens));
  }
  if (batch.positions.size() != batch.tokens.size() ||
      batch.slot_ids.size() != batch.tokens.size()) {
    return Invalid(fmt::format("{} tokens but {} positions and {} slot ids", n,
                               batch.positions.size(), batch.slot_ids.size()));
  }
  const auto rows = static_cast<int64_t>(batch.logit_rows.size());
  if (rows > limits_.max_logit_rows) {
    return Invalid(
        fmt::format("{} logit rows; a step takes at most {}", rows, limits_.max_logit_rows));
  }
  if (static_cast<int64_t>(logits.size()) != rows * limits_.vocab_size) {
    return Invalid(fmt::format("logits span holds {} floats, {} rows x {} vocab need {}",
                               logits.size(), rows, limits_.vocab_size, rows * limits_.vocab_size));
  }
  for (int32_t row : batch.logit_rows) {
    if (row < 0 || row >= n) {
      return Invalid(fmt::format("logit row {} outside the batch's {} tokens", row, n));
    }
  }
  const int64_t block_size = limits_.block_size;
  const int64_t num_slots = int64_t{limits_.num_kv_blocks} * block_size;
  for (int64_t i = 0; i < n; ++i) {
    const int32_t token = batch.tokens[static_cast<size_t>(i)];
    const int32_t slot = batch.slot_ids[static_cast<size_t>(i)];
    if (token < 0 || token >= limits_.vocab_size) {
      return Invalid(fmt::format("row {}: token {} outside the vocabulary", i, token));
    }
    if (slot < 0 || slot >= num_slots) {
      return Invalid(fmt::format("row {}: slot {} outside the {} KV slots", i, slot, num_slots));
    }
  }
  for (size_t s = 0; s < batch.sequences.size(); ++s) {
    const runtime::AttentionSequence& seq = batch.sequences[s];
    if (seq.q_begin < 0 || seq.q_len < 0 || seq.q_begin + seq.q_len > n ||
        seq.q_len > seq.context_len) {
      return Invalid(fmt::format("sequence {}: rows [{}, +{}) context {} do not fit {} tokens", s,
                                 seq.q_begin, seq.q_len, seq.context_len, n));
    }
    const int64_t blocks_needed = (seq.context_len + block_size - 1) / block_size;
    if (static_cast<int64_t>(seq.block_table.size()) < blocks_needed) {
      return Invalid(fmt::format("sequence {}: block table has {} blocks, needs {}", s,
                                 seq.block_table.size(), blocks_needed));
    }
    // As PagedAttention: blocks before the first row's window are never read.
    const int64_t window = limits_.sliding_window;
    for (int64_t b = seq.WindowStart(0, window) / block_size; b < blocks_needed; ++b) {
      const int32_t id = seq.block_table[static_cast<size_t>(b)];
      if (id < 0 || id >= limits_.num_kv_blocks) {
        return Invalid(fmt::format("sequence {}: block_table[{}] = {} outside [0, {})", s, b, id,
                                   limits_.num_kv_blocks));
      }
    }
    // Row i of the sequence holds position context_len - q_len + i, and its K/V must land
    // where attention will look for that position.
    for (int64_t i = 0; i < seq.q_len; ++i) {
      const auto row = static_cast<size_t>(seq.q_begin + i);
      const int64_t position = seq.context_len - seq.q_len + i;
      const int64_t slot =
          int64_t{seq.block_table[static_cast<size_t>(position / block_size)]} * block_size +
          position % block_size;
      if (batch.positions[row] != position || batch.slot_ids[row] != slot) {
        return Invalid(fmt::format(
            "sequence {}: row {} has position {} and slot {}; its context puts it at {} in slot {}",
            s, row, batch.positions[row], batch.slot_ids[row], position, slot));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status SimRunner::Execute(const model::ForwardBatch& batch, std::span<float> logits) {
  const SimClock::TimePoint start = clock_->Now();
  SY_RETURN_IF_ERROR(CheckBatch(batch, logits));
  std::fill(logits.begin(), logits.end(), 0.0f);
  const auto vocab = static_cast<size_t>(limits_.vocab_size);
  for (size_t r = 0; r < batch.logit_rows.size(); ++r) {
    const auto row = static_cast<size_t>(batch.logit_rows[r]);
    const int32_t chosen = ChosenToken(batch.tokens[row], batch.positions[row]);
    logits[r * vocab + static_cast<size_t>(chosen)] = kSimChosenLogit;
  }
  clock_->SleepUntil(start +
                     StepLatency(latency_, ShapeOf(batch.sequences, limits_.sliding_window)));
  return absl::OkStatus();
}

}  // namespace switchyard::sim
