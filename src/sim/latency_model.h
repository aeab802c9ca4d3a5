// LatencyModel: how long one forward step takes on the simulated backend, as a function of
// the step's shape. Linear in four terms:
//
//   seconds = step_overhead
//           + prefill_per_token * (new tokens of prefill sequences)
//           + decode_per_seq    * (decode sequences)
//           + attention_per_context_token * (KV positions read, summed over sequences)
//
// A sequence of the step is a *decode* sequence when q_len == 1 and context_len > 1 (one
// new token after at least one cached one); every other sequence is a *prefill* sequence
// and all its q_len tokens count as prefill tokens. (A 1-token tail of a chunked prefill
// therefore costs as a decode: on a real backend the two cost the same.) context_len
// includes the step's new tokens, as in runtime::AttentionSequence. A sequence reads its
// context_len positions, or under a sliding window W those from its first row's window on:
// min(context_len, q_len - 1 + W), so a decode reads min(context_len, W).
//
// The overhead stands for the per-step weight pass (decode reads every weight once per
// step, whatever the batch); decode_per_seq for the per-row matmul work (large on our CPU
// backend, whose small-batch matmul path is compute-bound); prefill_per_token for prompt
// processing; attention for reading each sequence's KV once per step.
//
// Default calibration: our CPU backend, release build (build/bench-rel, commit b2eacbd:
// bf16 GEMM and `generate --batch`), 2 threads, models/bench/bench-135m (SmolLM-135M
// shape: 30 layers, hidden 576, 9/3 heads, bf16 safetensors), 2026-11-30, on the 2-core
// development VM under load average 4.6-7 (other builds running). Best of 3-5 runs of
// `switchyard generate --model models/bench/bench-135m --threads 2 --ignore-eos`:
//   --prompt <561 tokens> -n 1                  prefill 2.85 ms/token (512 + 49 chunks)
//   --prompt "Hello world" -n 64                decode 25.2 ms/step   (B=1, context ~2-65)
//   --prompt "Hello world" -n 64 --batch 8      decode 78.6 ms/step   (B=8)
//   --prompt <561 tokens> -n 32                 decode 54.0 ms/step   (B=1, context ~580)
//   --prompt <561 tokens> -n 32 --batch 8       decode 236.5 ms/step  (B=8, context ~580)
// The two B=8 steps give attention (157.9 ms / (8 x 558) = 35 us per context token); then
// B=1 vs B=8 at short context give overhead 17.5 ms and 7.5 ms per decode sequence; the
// prefill run, less two overheads and the attention term, gives 2.7 ms per prompt token.
// Check: docs/benchmarks.md's batch table (bench-135m, context 512, similar load) reads 43 /
// 128 / 407 ms per step at B = 1 / 4 / 16; this model gives 43 / 119 / 424 (it overshoots at
// B = 32, where the blocked GEMM takes over: 831 against 484). On a quiet machine the
// backend is ~1.7x (decode) to ~2.7x (prefill) faster (docs/benchmarks.md: 40.9 decode
// tok/s, 942 prefill tok/s). models/tiny-llama3 (2 layers, hidden 64) steps in 0.05-0.6 ms:
// use `zero` or small values for it.
//
// Plain values and functions; thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

#include "runtime/backend.h"

namespace switchyard::sim {

struct LatencyParams {
  // Field names are the keys of the flag string (ParseLatencyParams).
  double overhead_ms = 17.5;
  double prefill_us_per_token = 2700.0;
  double decode_ms_per_seq = 7.5;
  double attention_us_per_context_token = 35.0;

  // Every term zero: steps take no simulated time (proxy and router benchmarks).
  static LatencyParams Zero() { return LatencyParams{0, 0, 0, 0}; }
};

// Parses "key=value,key=value" over the defaults; keys are LatencyParams' field names,
// values finite and >= 0. The word "zero" (alone or as an item) sets every term to zero
// before the items after it apply; "" gives the defaults. Errors: InvalidArgument naming
// the bad item (unknown or repeated key, bad number).
absl::StatusOr<LatencyParams> ParseLatencyParams(std::string_view spec);

// What the model charges for: see the file comment for the decode/prefill rule.
struct StepShape {
  int64_t prefill_tokens = 0;
  int64_t decode_seqs = 0;
  int64_t context_tokens = 0;
};
// `window`: the runner's sliding window (0: full attention).
StepShape ShapeOf(std::span<const runtime::AttentionSequence> sequences, int64_t window);

std::chrono::nanoseconds StepLatency(const LatencyParams& params, const StepShape& shape);

}  // namespace switchyard::sim
