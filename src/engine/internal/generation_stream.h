// GenerationStream: one HTTP generation request's answer, assembled from the engine
// updates of its prompts (a batched completion has several; each has n choices, choice
// index = prompt * n + sequence). Streaming requests get one SSE chunk per choice per
// update (carrying the choice's usage so far under continuous_usage); others get the whole
// response once every choice has finished, with the prompt logprobs when asked (vLLM sends
// them on non-streaming responses only: each completion choice of a prompt carries its
// prompt's, a chat response carries them at the top level). With best_of, a prompt's
// best_of sequences are generated and its n choices are the best of them by cumulative
// logprob (engine/best_of.h); usage counts the tokens of all of them.
//
// Echo: each choice starts with its prompt's text; with logprobs (completions) its logprobs
// start with the prompt's tokens, built from the prompt logprobs. A stream sends a prompt's
// echo once they are all in, and holds its choices' updates until then (a sibling sequence
// may finish its own prefill before the first one has computed the prompt's logprobs).
//
// A stream's head (200, text/event-stream) goes out when its requests are accepted (Accept,
// as vLLM does), so that a request queued behind others shows a live engine; while it waits
// (queued, long prefill) the engine's keep-alive beats become SSE comments
// (": keep-alive"), which OpenAI clients skip. Without Accept the head goes with the first
// chunk. Once the head is out a failure ends the stream with an SSE error event and
// [DONE]; before, it is a plain error response (503 ones with Retry-After).
//
// Threads: OnUpdate runs on the engine loop thread; Accept and Fail on either. A mutex
// orders them, and HttpResponder keeps the order of calls made in turn from different
// threads.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "api/chat_output_parser.h"
#include "api/response_writer.h"
#include "api/tool_choice.h"
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
  int32_t n = 1;  // choices answered per prompt
  // Sequences generated per prompt when their best n are answered (best_of, not streamed);
  // unset: n, answered in order.
  std::optional<int32_t> best_of;
  bool logprobs = false;         // the request asked for logprobs
  bool prompt_logprobs = false;  // the response carries prompt_logprobs
  // Completions with echo and logprobs: each choice's logprobs start with its prompt's
  // tokens, whose top alternatives are cut to echo_top_logprobs + 1 entries.
  bool echo_logprobs = false;
  int32_t echo_top_logprobs = 0;
  // Completions with echo and max_tokens 0: each choice is its echoed prompt alone (the
  // token the engine ran counts in usage only).
  bool echo_only = false;
  // Per prompt: text put before each choice's output (echo), the prompt's length, and (with
  // echo_logprobs) its first token, which has no prompt logprob.
  std::vector<std::string> echo_prefix;
  std::vector<int64_t> prompt_tokens;
  std::vector<int32_t> first_prompt_token;
  // Chat: the parsers the output is read through (null: none; tool_choice says how calls
  // finish), and the seed of the tool calls' random ids.
  std::shared_ptr<const api::ToolParser> tool_parser;
  std::shared_ptr<const api::ReasoningParser> reasoning_parser;
  api::ToolChoiceMode tool_choice = api::ToolChoiceMode::kNone;
  // parallel_tool_calls false: only the first call is answered (vLLM truncates the others).
  bool parallel_tool_calls = true;
  uint64_t tool_call_id_seed = 0;
  api::ResponseHeader header;
  // Sent on every response (x-request-id and the like).
  net::HeaderList extra_headers;
};

class GenerationStream {
 public:
  GenerationStream(GenerationStreamOptions options, const text::Tokenizer* tokenizer,
                   std::shared_ptr<net::HttpResponder> responder);

  // Holds `ticket` (base::DrainGate) until the answer is fully handed to the socket or the
  // connection closes.
  void HoldUntilAnswered(std::shared_ptr<void> ticket);
  // Every request of the response is in the engine: a stream's head goes out now.
  void Accept();
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
    double cumulative_logprob = 0;     // of the sampled tokens (ranks best_of sequences)
    std::vector<SequenceUpdate> held;  // streaming: waiting for the prompt's echo
    // Streaming chat with parsers: what the output so far has sent, and whether it sent calls.
    std::unique_ptr<api::ChatOutputParser> parser;
    bool tools_streamed = false;
  };

  size_t SequencesPerPrompt() const;
  // Engine updates carry prompt logprobs this stream keeps.
  bool KeepsPromptLogprobs() const;
  std::string DecodeOne(int32_t id) const;
  api::TokenLogprob ToApiLogprob(const SampleResult& sample) const;
  std::vector<api::PromptLogprobEntry> ToPromptLogprob(const SampleResult& sample) const;
  std::vector<api::TokenLogprob> EchoLogprobs(size_t prompt) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sends the SSE head and the echoes that are ready, once.
  void BeginStream() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Streaming: sends the prompt's echo chunks (once its prompt logprobs are in, when the
  // echo carries them), then the updates its choices held meanwhile.
  void SendEchoIfReady(size_t prompt) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SendEcho(size_t prompt) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One sequence's update: counted, then streamed (or held), or kept for the response.
  void TakeSequence(size_t prompt, SequenceUpdate seq) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FailLocked(const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StreamChoice(size_t index, const SequenceUpdate& update, std::vector<api::TokenLogprob> lps)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Finish() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool ParsesChat() const;
  // Streaming: fills `c` from the parser's delta for `text` (and its end when `finishing`).
  void ParseDelta(Choice& choice, const std::string& text, bool finishing, api::ChatChoice* c)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Non-streaming: fills `c` from the whole generated text of a choice.
  void ParseComplete(std::string_view generated, api::ChatChoice* c)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // vLLM's finish_reason once calls were made: "tool_calls" for auto and required ones that
  // stopped, the engine's reason otherwise (named calls keep "stop").
  std::string ToolFinishReason(const std::string& engine_reason, bool called) const;
  std::string NextToolCallId() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After the last byte of the answer was handed to the responder: the ticket goes once the
  // responder has written it.
  void ReleaseWhenWritten() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  api::Usage TotalUsage() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const GenerationStreamOptions options_;
  const text::Tokenizer* tokenizer_;
  const std::shared_ptr<net::HttpResponder> responder_;

  base::Mutex mu_;
  std::vector<Choice> choices_ ABSL_GUARDED_BY(mu_);
  std::vector<int64_t> cached_tokens_ ABSL_GUARDED_BY(mu_);
  // A producer's kv_transfer_params for the response (a remote decode's prefill).
  std::string kv_transfer_params_ ABSL_GUARDED_BY(mu_);
  std::vector<api::PromptLogprobs> prompt_logprobs_ ABSL_GUARDED_BY(mu_);  // per prompt
  std::vector<bool> echoed_ ABSL_GUARDED_BY(mu_);  // streaming, per prompt: echo sent
  size_t prompts_finished_ ABSL_GUARDED_BY(mu_) = 0;
  bool answered_ ABSL_GUARDED_BY(mu_) = false;
  std::shared_ptr<void> ticket_ ABSL_GUARDED_BY(mu_);
  std::mt19937_64 tool_call_ids_ ABSL_GUARDED_BY(mu_);
};

}  // namespace switchyard::engine::internal
