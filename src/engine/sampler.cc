#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace switchyard::engine {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// First index of the largest non-NaN value; 0 when every value is NaN.
int32_t Argmax(std::span<const float> values) {
  int32_t best = 0;
  float best_value = kNegInf;
  bool found = false;
  for (size_t i = 0; i < values.size(); ++i) {
    float v = values[i];
    if (std::isnan(v))
      continue;
    if (!found || v > best_value) {
      best = static_cast<int32_t>(i);
      best_value = v;
      found = true;
    }
  }
  return best;
}

// Uniform in [0, 1) from the top 53 bits: the same on every platform, unlike
// std::uniform_real_distribution, whose algorithm the standard leaves open.
double Uniform(std::mt19937_64* rng) {
  return static_cast<double>((*rng)() >> 11) * 0x1.0p-53;
}

}  // namespace

SequenceSamplingState::SequenceSamplingState(int64_t vocab_size,
                                             std::span<const int32_t> prompt_ids,
                                             std::optional<uint64_t> seed)
    : flags_(static_cast<size_t>(vocab_size), 0),
      output_count_(static_cast<size_t>(vocab_size), 0),
      rng_(seed.has_value() ? *seed : std::random_device{}()) {
  for (int32_t id : prompt_ids) {
    if (id < 0 || id >= vocab_size)
      continue;
    uint8_t& f = flags_[static_cast<size_t>(id)];
    if (f == 0)
      seen_.push_back(id);
    f |= kInPrompt;
  }
}

void SequenceSamplingState::AppendOutput(int32_t token) {
  if (token < 0 || static_cast<size_t>(token) >= flags_.size())
    return;
  uint8_t& f = flags_[static_cast<size_t>(token)];
  if (f == 0)
    seen_.push_back(token);
  f |= kInOutput;
  ++output_count_[static_cast<size_t>(token)];
}

int32_t SequenceSamplingState::output_count(int32_t token) const {
  if (token < 0 || static_cast<size_t>(token) >= flags_.size())
    return 0;
  return output_count_[static_cast<size_t>(token)];
}

bool SequenceSamplingState::in_prompt(int32_t token) const {
  if (token < 0 || static_cast<size_t>(token) >= flags_.size())
    return false;
  return (flags_[static_cast<size_t>(token)] & kInPrompt) != 0;
}

void ApplyPenalties(const SamplingParams& params, const SequenceSamplingState& state,
                    std::span<float> logits) {
  const auto repetition = static_cast<float>(params.repetition_penalty);
  const auto presence = static_cast<float>(params.presence_penalty);
  const auto frequency = static_cast<float>(params.frequency_penalty);
  if (repetition == 1.0f && presence == 0.0f && frequency == 0.0f)
    return;
  for (int32_t id : state.seen_) {
    const auto i = static_cast<size_t>(id);
    float& logit = logits[i];
    if (repetition != 1.0f)
      logit = logit > 0 ? logit / repetition : logit * repetition;
    const int32_t count = state.output_count_[i];
    if (count > 0)
      logit -= frequency * static_cast<float>(count) + presence;
  }
}

Sampler::Sampler(int64_t vocab_size)
    : vocab_size_(vocab_size),
      work_(static_cast<size_t>(vocab_size)),
      candidates_(static_cast<size_t>(vocab_size)) {}

void Sampler::Sample(std::span<const float> logits, const SamplingParams& params,
                     SequenceSamplingState* state, SampleResult* result,
                     std::span<const int32_t> banned, std::span<const uint32_t> allowed) {
  result->top_logprobs.clear();
  std::copy(logits.begin(), logits.end(), work_.begin());
  ApplyLogitsProcessors(params, banned, allowed);
  ApplyPenalties(params, *state, work_);
  if (params.greedy()) {
    result->token = Argmax(work_);
  } else {
    result->token = Draw(params, &state->rng_);
  }
  if (params.logprobs.has_value())
    ComputeLogprobs(logits, *params.logprobs, result);
}

void Sampler::ApplyLogitsProcessors(const SamplingParams& params, std::span<const int32_t> banned,
                                    std::span<const uint32_t> allowed) {
  auto in_vocab = [this](int32_t id) { return id >= 0 && id < vocab_size_; };
  if (!params.allowed_token_ids.empty()) {
    // Keep the allowed logits aside, mask everything, put them back.
    allowed_values_.clear();
    for (int32_t id : params.allowed_token_ids)
      allowed_values_.push_back(in_vocab(id) ? work_[static_cast<size_t>(id)] : kNegInf);
    std::fill(work_.begin(), work_.end(), kNegInf);
    for (size_t i = 0; i < allowed_values_.size(); ++i) {
      const int32_t id = params.allowed_token_ids[i];
      if (in_vocab(id))
        work_[static_cast<size_t>(id)] = allowed_values_[i];
    }
  }
  for (const auto& [id, bias] : params.logit_bias) {
    if (in_vocab(id))
      work_[static_cast<size_t>(id)] += bias;
  }
  for (int32_t id : banned) {
    if (in_vocab(id))
      work_[static_cast<size_t>(id)] = kNegInf;
  }
  if (allowed.empty())
    return;
  for (size_t w = 0; w < allowed.size(); ++w) {
    const uint32_t bits = allowed[w];
    if (bits == ~0u)
      continue;
    const size_t end = std::min(work_.size(), (w + 1) * 32);
    for (size_t i = w * 32; i < end; ++i) {
      if (((bits >> (i % 32)) & 1u) == 0)
        work_[i] = kNegInf;
    }
  }
}

int32_t Sampler::Draw(const SamplingParams& params, std::mt19937_64* rng) {
  const auto inv_temperature = static_cast<float>(1.0 / params.temperature);
  size_t n = 0;
  float max_logit = kNegInf;
  for (size_t i = 0; i < work_.size(); ++i) {
    float v = work_[i] * inv_temperature;
    work_[i] = v;
    if (std::isfinite(v)) {
      candidates_[n++] = static_cast<int32_t>(i);
      max_logit = std::max(max_logit, v);
    }
  }
  if (n == 0)
    return Argmax(work_);
  auto logit_of = [this](int32_t id) { return work_[static_cast<size_t>(id)]; };
  auto by_logit_desc = [&](int32_t a, int32_t b) {
    float la = logit_of(a);
    float lb = logit_of(b);
    return la > lb || (la == lb && a < b);
  };

  // min-p keeps p >= min_p * p_max, i.e. logit >= max + log(min_p): the normalisation
  // cancels, so it commutes with top-k.
  if (params.min_p > 0) {
    const auto threshold = static_cast<float>(max_logit + std::log(params.min_p));
    size_t kept = 0;
    for (size_t j = 0; j < n; ++j) {
      if (logit_of(candidates_[j]) >= threshold)
        candidates_[kept++] = candidates_[j];
    }
    n = kept;
  }
  if (params.top_k > 0 && static_cast<size_t>(params.top_k) < n) {
    std::nth_element(candidates_.begin(), candidates_.begin() + params.top_k - 1,
                     candidates_.begin() + static_cast<ptrdiff_t>(n), by_logit_desc);
    n = static_cast<size_t>(params.top_k);
  }
  if (params.top_p < 1) {
    std::sort(candidates_.begin(), candidates_.begin() + static_cast<ptrdiff_t>(n), by_logit_desc);
    double total = 0;
    for (size_t j = 0; j < n; ++j)
      total += std::exp(static_cast<double>(logit_of(candidates_[j]) - max_logit));
    // Keep the smallest prefix whose mass reaches top_p (at least one token).
    const double target = params.top_p * total;
    double cumulative = 0;
    size_t kept = 0;
    while (kept < n) {
      cumulative += std::exp(static_cast<double>(logit_of(candidates_[kept]) - max_logit));
      ++kept;
      if (cumulative >= target)
        break;
    }
    n = kept;
  }
  double total = 0;
  for (size_t j = 0; j < n; ++j)
    total += std::exp(static_cast<double>(logit_of(candidates_[j]) - max_logit));
  const double u = Uniform(rng) * total;
  double cumulative = 0;
  for (size_t j = 0; j < n; ++j) {
    cumulative += std::exp(static_cast<double>(logit_of(candidates_[j]) - max_logit));
    if (u < cumulative)
      return candidates_[j];
  }
  return candidates_[n - 1];
}

void Sampler::ComputeLogprobs(std::span<const float> logits, int32_t top_n, SampleResult* result) {
  float max_logit = kNegInf;
  for (float v : logits) {
    if (!std::isnan(v))
      max_logit = std::max(max_logit, v);
  }
  double sum = 0;
  if (std::isfinite(max_logit)) {
    for (float v : logits) {
      if (!std::isnan(v))
        sum += std::exp(static_cast<double>(v - max_logit));
    }
  }
  const double log_norm = static_cast<double>(max_logit) + std::log(sum);
  auto logprob_of = [&](int32_t id) {
    float v = logits[static_cast<size_t>(id)];
    if (std::isnan(v) || !std::isfinite(log_norm))
      return kNegInf;
    return static_cast<float>(static_cast<double>(v) - log_norm);
  };
  result->logprob = logprob_of(result->token);
  result->top_logprobs.clear();
  const float token_logit = logits[static_cast<size_t>(result->token)];
  result->rank = static_cast<int32_t>(
      std::count_if(logits.begin(), logits.end(), [&](float v) { return v >= token_logit; }));
  if (top_n <= 0)
    return;
  // candidates_ is free again once the token is drawn.
  size_t n = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (!std::isnan(logits[i]))
      candidates_[n++] = static_cast<int32_t>(i);
  }
  const size_t k = std::min(n, static_cast<size_t>(top_n));
  std::partial_sort(candidates_.begin(), candidates_.begin() + static_cast<ptrdiff_t>(k),
                    candidates_.begin() + static_cast<ptrdiff_t>(n), [&](int32_t a, int32_t b) {
                      float la = logits[static_cast<size_t>(a)];
                      float lb = logits[static_cast<size_t>(b)];
                      return la > lb || (la == lb && a < b);
                    });
  for (size_t j = 0; j < k; ++j)
    result->top_logprobs.push_back({candidates_[j], logprob_of(candidates_[j])});
}

}  // namespace switchyard::engine
