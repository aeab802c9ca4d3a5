// Sampler: turns one row of logits into a token under a request's SamplingParams, the way
// vLLM's sampler does: raw logprobs first, then penalties (repetition over prompt and
// output, presence and frequency over output), then greedy argmax, or temperature, min-p,
// top-k and top-p followed by a draw from the request's own generator.
//
// Random numbers: each sequence owns a std::mt19937_64 seeded with SamplingParams::seed
// (or std::random_device when unset); a draw is the top 53 bits of one output scaled to
// [0, 1), so a seed gives the same tokens on every platform and whatever else shares the
// batch. Candidates are visited in a deterministic order (token id, or descending logit
// when top-p sorts them).
//
// A Sampler owns vocab-sized scratch so that sampling allocates nothing per token; use one
// per thread. SequenceSamplingState is per sequence, touched by one thread at a time.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <vector>

#include "engine/sampling_params.h"

namespace switchyard::engine {

// What the penalties and the generator need to know about one sequence.
class SequenceSamplingState {
 public:
  // Ids outside [0, vocab_size) are ignored.
  // REQUIRES: vocab_size > 0.
  SequenceSamplingState(int64_t vocab_size, std::span<const int32_t> prompt_ids,
                        std::optional<uint64_t> seed);

  // Records a generated token (counted by the penalties from the next step on).
  void AppendOutput(int32_t token);

  int32_t output_count(int32_t token) const;
  bool in_prompt(int32_t token) const;

 private:
  friend class Sampler;
  friend void ApplyPenalties(const SamplingParams& params, const SequenceSamplingState& state,
                             std::span<float> logits);

  static constexpr uint8_t kInPrompt = 1;
  static constexpr uint8_t kInOutput = 2;

  std::vector<uint8_t> flags_;         // per id: kInPrompt | kInOutput
  std::vector<int32_t> output_count_;  // per id
  std::vector<int32_t> seen_;          // distinct ids with any flag, first-seen order
  std::mt19937_64 rng_;
};

// Applies repetition, presence and frequency penalties in place, touching only ids the
// sequence has seen. REQUIRES: logits.size() == the state's vocab_size.
void ApplyPenalties(const SamplingParams& params, const SequenceSamplingState& state,
                    std::span<float> logits);

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0;
};

struct SampleResult {
  int32_t token = 0;
  // Raw logprob of `token`; set when params.logprobs is set.
  float logprob = 0;
  // The params.logprobs most likely tokens by raw logprob, descending (ties: lower id
  // first). Cleared and refilled by each Sample, keeping its capacity.
  std::vector<TokenLogprob> top_logprobs;
  // `token`'s rank in the vocabulary as vLLM counts it: the ids whose logit is >= its own
  // (1 = most likely); set with logprob.
  int32_t rank = 0;
};

class Sampler {
 public:
  // REQUIRES: vocab_size > 0.
  explicit Sampler(int64_t vocab_size);

  // Samples one token from `logits`. NaN logits never win; when no logit is finite the
  // result is the greedy argmax over non-NaN values (or token 0). Does not record the token
  // in `state`: call state->AppendOutput once the token is accepted.
  // REQUIRES: ValidateSamplingParams(params).ok(); logits.size() == vocab_size; state made
  // with the same vocab_size.
  // `banned` ids are masked before sampling (EOS and stop tokens under min_tokens).
  // `allowed`, when not empty, is a bitset over ids (bit id % 32 of word id / 32; structured
  // output's token mask): every id whose bit is clear is masked too.
  void Sample(std::span<const float> logits, const SamplingParams& params,
              SequenceSamplingState* state, SampleResult* result,
              std::span<const int32_t> banned = {}, std::span<const uint32_t> allowed = {});

  int64_t vocab_size() const { return vocab_size_; }

  // Raw logprobs of `logits` (no processors, penalties or temperature) for result->token:
  // sets its logprob and rank and replaces top_logprobs with the top_n most likely ids.
  // Sample calls it for params.logprobs; prompt logprobs call it for each prompt position.
  // REQUIRES: logits.size() == vocab_size; 0 <= result->token < vocab_size.
  void ComputeLogprobs(std::span<const float> logits, int32_t top_n, SampleResult* result);

 private:
  // logit_bias, allowed_token_ids, `banned` and the `allowed` bitset, on work_.
  void ApplyLogitsProcessors(const SamplingParams& params, std::span<const int32_t> banned,
                             std::span<const uint32_t> allowed);
  int32_t Draw(const SamplingParams& params, std::mt19937_64* rng);

  int64_t vocab_size_;
  std::vector<float> work_;
  std::vector<int32_t> candidates_;
  std::vector<float> allowed_values_;
};

}  // namespace switchyard::engine
