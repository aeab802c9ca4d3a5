// SimRunner: the ModelRunner of `--backend sim`. It computes nothing: each Execute checks
// the batch as strictly as a real runner needs it to be right, charges the latency model's
// time for the step's shape, and writes logits that make greedy sampling pick one token
// per row, chosen from the row's token id and position alone. So the same prompt yields
// the same output whatever it is batched with and whether its prefix came from the cache,
// and dozens of simulated engines fit on one small machine.
//
// Threads: as ModelRunner, the engine loop thread alone; one call at a time. Owns its
// clock. Holds no KV memory unless given a SimKvMemory (sim_kv_memory.h), which KV transfers
// then move; block ids are only checked against the limits.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

#include "engine/model_runner.h"
#include "sim/latency_model.h"
#include "sim/sim_kv_memory.h"

namespace switchyard::sim {

// Where simulated compute time goes. Production sleeps; tests record.
class SimClock {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  virtual ~SimClock() = default;
  virtual TimePoint Now() = 0;
  // Returns at `deadline` (at once when it has passed).
  virtual void SleepUntil(TimePoint deadline) = 0;
};

// std::chrono::steady_clock and std::this_thread::sleep_until: the step's thread is busy
// for the modeled time, as it would be computing.
class SteadySimClock final : public SimClock {
 public:
  TimePoint Now() override;
  void SleepUntil(TimePoint deadline) override;
};

// The logit every chosen token gets; all others get 0. exp(20) is ~5e8, so even under
// temperature 1 over a 128k vocabulary the chosen token keeps ~99.97% of the mass.
inline constexpr float kSimChosenLogit = 20.0f;

class SimRunner final : public engine::ModelRunner {
 public:
  // `emit_tokens`: the ids the runner may choose (the caller passes the tokenizer's
  // non-special ids, so outputs detokenize and never stop on EOS by chance).
  // `kv`: KV bytes for transfers to move (null: none); it must hold limits.num_kv_blocks.
  // Errors: InvalidArgument for non-positive limits, an empty `emit_tokens` or one outside
  // [0, vocab_size), or `kv` of another block count.
  static absl::StatusOr<std::unique_ptr<SimRunner>> Create(
      const engine::RunnerLimits& limits, const LatencyParams& latency,
      std::vector<int32_t> emit_tokens, std::unique_ptr<SimClock> clock,
      std::unique_ptr<SimKvMemory> kv = nullptr);

  const engine::RunnerLimits& limits() const override { return limits_; }

  // Errors: InvalidArgument for a batch the real runner could not run right: sizes over
  // the limits or disagreeing, a logits span of the wrong size, a logit row, token id,
  // block id (among those the window reads, limits().sliding_window) or slot id out of
  // range, a sequence outside the batch or whose positions and slot ids do not follow its
  // context length and block table. Nothing is charged then.
  absl::Status Execute(const model::ForwardBatch& batch, std::span<float> logits) override;

  // The SimKvMemory's pools; Unimplemented without one.
  absl::StatusOr<engine::RunnerKvMemory> kv_memory() const override;

  std::string backend_name() const override { return "sim"; }

  // The token Execute makes greedy pick for a row holding `token` at `position`.
  int32_t ChosenToken(int32_t token, int32_t position) const;

 private:
  SimRunner(const engine::RunnerLimits& limits, const LatencyParams& latency,
            std::vector<int32_t> emit_tokens, std::unique_ptr<SimClock> clock,
            std::unique_ptr<SimKvMemory> kv);

  absl::Status CheckBatch(const model::ForwardBatch& batch, std::span<float> logits) const;

  const engine::RunnerLimits limits_;
  const LatencyParams latency_;
  const std::vector<int32_t> emit_tokens_;
  const std::unique_ptr<SimClock> clock_;
  const std::unique_ptr<SimKvMemory> kv_;
};

}  // namespace switchyard::sim
