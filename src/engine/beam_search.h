// BeamSearch: the bookkeeping of vLLM's OpenAI-server beam search (its serving layer's
// beam_search), with no engine in it. The caller runs one step at a time: it asks the
// engine for the raw top-2w next-token logprobs of every live beam (w = beam width), hands
// them to Step, and repeats until done(); TakeBest then gives the answer.
//
// Per step, every candidate (beam + one of its top-2w tokens) scores the beam's cumulative
// logprob plus the token's. A candidate whose token is the tokenizer's EOS (unless
// ignore_eos) joins the completed beams; the best w of the others by cumulative logprob
// become the live beams. After max_tokens steps (or when no beam is live) the live beams
// join the completed ones, and the best w by BeamSearchScore are the result, best first.
//
// Not thread-safe: one per request, used by one thread at a time.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "engine/sampler.h"

namespace switchyard::engine {

struct BeamSearchOptions {
  int32_t beam_width = 1;  // the API's n; >= 1
  int64_t max_tokens = 16;
  double length_penalty = 1.0;
  std::optional<int32_t> eos_token_id;  // the tokenizer's EOS (vLLM ignores the model's others)
  bool ignore_eos = false;
  // Keep the EOS that ended a beam in its tokens (it never reaches the text).
  bool include_stop_str_in_output = false;
};

struct Beam {
  // Generated tokens; an ending EOS only with include_stop_str_in_output.
  std::vector<int32_t> tokens;
  // One per entry of `tokens`: the token, its raw logprob and rank, and the step's top-2w.
  std::vector<SampleResult> logprobs;
  double cum_logprob = 0;  // EOS's logprob included even when the token is dropped
  bool stopped = false;    // ended on EOS ("stop"); else cut by max_tokens ("length")
};

// vLLM's get_beam_search_score: cum_logprob / seq_len^length_penalty, where seq_len counts
// the prompt and the generated tokens, less one when the last one is EOS.
double BeamSearchScore(const Beam& beam, int64_t prompt_tokens, const BeamSearchOptions& options);

class BeamSearch {
 public:
  // REQUIRES: options.beam_width >= 1; prompt_tokens >= 1.
  BeamSearch(BeamSearchOptions options, int64_t prompt_tokens);

  // The beams to extend next step (one, empty, before the first step).
  const std::vector<Beam>& live() const { return live_; }
  int64_t steps() const { return steps_; }
  bool done() const { return live_.empty() || steps_ >= options_.max_tokens; }

  // Extends the live beams. `next[i]` is live()[i]'s next-token result: top_logprobs holds
  // the candidates, most likely first (ties in the order given).
  // REQUIRES: !done(); next.size() == live().size().
  void Step(std::span<const SampleResult> next);

  // The best beam_width of the completed and live beams by score, best first (ties: completed
  // before live, then in the order they were found). Leaves the search empty.
  std::vector<Beam> TakeBest();

 private:
  const BeamSearchOptions options_;
  const int64_t prompt_tokens_;
  std::vector<Beam> live_;
  std::vector<Beam> completed_;
  int64_t steps_ = 0;
};

}  // namespace switchyard::engine
