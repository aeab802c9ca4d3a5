// BeamSearchRun: one prompt's beam search driven through EngineCore. Each step submits one
// max_tokens=1 request per live beam (prompt + the beam's tokens, greedy, raw top-2w
// logprobs; the prefix cache serves the shared prefix), gathers the results in the requests'
// callbacks and starts the next step from the last one to arrive, so no thread ever waits.
// When BeamSearch is done, the best beams go to `done` as one finished RequestUpdate (beam i
// is sequence i), which a GenerationStream turns into the response like any other.
//
// Threads: Start and Cancel from any thread; step callbacks on the engine loop thread; a
// mutex orders them. `done` runs once, on the engine loop thread (or Start's caller when the
// first step cannot be submitted), never after Cancel. Owned by shared_ptr (the callbacks
// hold it); borrows the engine and the tokenizer.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/mutex.h"
#include "engine/beam_search.h"
#include "engine/engine_core.h"
#include "text/tokenizer.h"

namespace switchyard::engine::internal {

class BeamSearchRun : public std::enable_shared_from_this<BeamSearchRun> {
 public:
  using DoneCallback = std::function<void(RequestUpdate update)>;

  // `request`: the validated request of the prompt; its prompt, priority and cache salt are
  // kept, and its sampling.logprobs (when set) is how many of each step's candidates the
  // results carry. Step requests are named `id_prefix`-s<step>-b<beam>.
  BeamSearchRun(EngineCore* engine, const text::Tokenizer* tokenizer, const EngineRequest& request,
                BeamSearchOptions options, std::string id_prefix, DoneCallback done);

  void Start();
  // Aborts the step in flight; nothing is reported afterwards. Idempotent.
  void Cancel();

 private:
  // The next step's submissions (SubmitStep), or the final result once the search is done.
  std::optional<RequestUpdate> Advance() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Submits one request per live beam; on a failure aborts those already in and fails.
  // Returns the update to report (the failure) or nullopt.
  std::optional<RequestUpdate> SubmitStep() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnStepUpdate(int64_t step, size_t beam, RequestUpdate update);
  RequestUpdate Result() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static RequestUpdate Failure(absl::Status status);

  EngineCore* const engine_;
  const text::Tokenizer* const tokenizer_;
  const std::vector<int32_t> prompt_;
  const std::optional<int32_t> result_logprobs_;
  const int32_t priority_;
  const BlockHashExtras hash_extras_;
  const BeamSearchOptions options_;
  const std::string id_prefix_;
  const DoneCallback done_;

  base::Mutex mu_;
  BeamSearch search_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> step_ids_ ABSL_GUARDED_BY(mu_);
  std::vector<SampleResult> step_results_ ABSL_GUARDED_BY(mu_);
  size_t step_pending_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t cached_tokens_ ABSL_GUARDED_BY(mu_) = 0;
  bool over_ ABSL_GUARDED_BY(mu_) = false;  // reported, failed or cancelled
};

}  // namespace switchyard::engine::internal
