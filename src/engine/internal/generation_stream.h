// GenerationStream: one HTTP generation request's answer, assembled from the engine
// updates of its prompts (a batched completion has several; each has n choices, choice
// index = prompt * n + sequence). Streaming requests get one SSE chunk per choice per
// update (carrying the choice's usage so far under continuous_usage); others get the whole
// response once every choice has finished, with the prompt logprobs when asked (vLLM sends
// them on non-streaming responses only: each completion choice of a prompt carries its
// prompt's, a chat response carries them at the top level).
//
// Threads: OnUpdate runs on the engine loop thread; Fail on either. A mutex orders them.
// A streaming response's head goes out with its first chunk, from the engine thread, so
// that every piece of the response is posted from one thread: HttpResponder keeps call
// order only per calling thread (a head posted from the HTTP loop inside the handler can
// reach the connection after chunks posted meanwhile by the engine thread).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "api/response_writer.h"
#include "base/mutex.h"
#include "engine/engine_request.h"
#include "net/http_server.h"
#include "text/tokenizer.h"

namespace switchyard::engine::internal {

struct GenerationStreamOptions {
  bool chat = false;
  bool stream = false;
  bool include_usage = false;
  // Usage on every chunk too (include_usage and stream_options.continuous_usage_stats).
  bool continuous_usage = false;
  int32_t n = 1;
  bool logprobs = false;         // the request asked for logprobs
  bool prompt_logprobs = false;  // the request asked for prompt_logprobs
  // Per prompt: text put before each choice's output (echo), and the prompt's length.
  std::vector<std::string> echo_prefix;
  std::vector<int64_t> prompt_tokens;
  api::ResponseHeader header;
  // Sent on every response (x-request-id and the like).
  net::HeaderList extra_headers;
};

class GenerationStream {
 public:
  GenerationStream(GenerationStreamOptions options, const text::Tokenizer* tokenizer,
                   std::shared_ptr<net::HttpResponder> responder);

  // An engine update for prompt `prompt`.
  void OnUpdate(size_t prompt, RequestUpdate update);
  // Answers with an error unless the response has begun (then an SSE error event ends it).
  void Fail(const absl::Status& status);

 private:
  struct Choice {
    std::string text;  // non-streaming: everything so far
    std::vector<api::TokenLogprob> logprobs;
    size_t text_chars = 0;  // text sent or kept so far, in characters (logprob text offsets)
    bool sent_role = false;
    std::string finish_reason;
    std::string stop_reason;
    int64_t num_tokens = 0;
  };

  std::string DecodeOne(int32_t id) const;
  api::TokenLogprob ToApiLogprob(const SampleResult& sample) const;
  std::vector<api::PromptLogprobEntry> ToPromptLogprob(const SampleResult& sample) const;
  // Sends the SSE head and the echoed prompts, once.
  void BeginStream() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FailLocked(const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StreamChoice(int index, const SequenceUpdate& update, std::vector<api::TokenLogprob> lps)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Finish() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  api::Usage TotalUsage() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const GenerationStreamOptions options_;
  const text::Tokenizer* tokenizer_;
  const std::shared_ptr<net::HttpResponder> responder_;

  base::Mutex mu_;
  std::vector<Choice> choices_ ABSL_GUARDED_BY(mu_);
  std::vector<int64_t> cached_tokens_ ABSL_GUARDED_BY(mu_);
  std::vector<api::PromptLogprobs> prompt_logprobs_ ABSL_GUARDED_BY(mu_);  // per prompt
  size_t prompts_finished_ ABSL_GUARDED_BY(mu_) = 0;
  bool answered_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace switchyard::engine::internal
