// EngineRequest and RequestUpdate: what the API front hands the engine loop (a tokenized,
// validated request) and what the loop hands back after each step that touched it.
// Plain values; copied or moved between threads.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"

#include "engine/block_hash.h"
#include "engine/metrics.h"
#include "engine/sampler.h"
#include "engine/sampling_params.h"
#include "kvx/kv_transfer_params.h"
#include "net/host_port.h"
#include "structured/grammar.h"

namespace switchyard::engine {

// When a sequence stops, besides the KV context filling up.
struct StopConditions {
  int64_t max_tokens = 16;
  // EOS and stop_token_ids are ignored until this many tokens were generated.
  int32_t min_tokens = 0;
  // Stop strings end the text before them (or after them with include_stop_str_in_output)
  // and are matched across token boundaries; the text of a streaming sequence lags by the
  // longest stop string less one byte so that no part of a stop string is ever sent.
  std::vector<std::string> stop_strings;
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  bool include_stop_str_in_output = false;
};

struct EngineRequest {
  std::string request_id;
  std::vector<int32_t> prompt_tokens;
  // Sequences sampled from the prompt (the API's n). They share the prompt's KV blocks
  // through the prefix cache; sequence i draws from seed + i when a seed is given.
  int32_t n = 1;
  SamplingParams sampling;
  StopConditions stop;
  // vLLM's bad_words as token sequences (see engine/bad_words.h): the last token of each is
  // banned whenever the generated tokens end with the rest.
  std::vector<std::vector<int32_t>> bad_words;
  bool skip_special_tokens = true;
  // vLLM's spaces_between_special_tokens (see text::IncrementalDetokenizer).
  bool spaces_between_special_tokens = true;
  // vLLM's prompt_logprobs: when set, the raw logprob and rank of every prompt token after
  // the first, with this many top alternatives. The first sequence computes them from the
  // logits of each prompt position (so it never starts from the prefix cache, as in vLLM);
  // they arrive in RequestUpdate::prompt_logprobs as chunked prefill proceeds.
  std::optional<int32_t> prompt_logprobs;
  // Structured output: every sequence's text must be a sentence of this grammar (its tokens
  // are masked to those the grammar allows, EOS only once the text is complete); null when
  // unconstrained. Compiled on the HTTP thread, shared and immutable.
  std::shared_ptr<const structured::Grammar> grammar;
  int32_t priority = 0;
  // cache_salt (and later the LoRA name) for the block hashes.
  BlockHashExtras hash_extras;
  // vLLM's kv_transfer_params (kv_connector.h): do_remote_decode asks a producer to keep the
  // KV for a decode elsewhere, do_remote_prefill a consumer to pull it first. Ignored by an
  // engine without --kv-transfer-config, as vLLM ignores it without a connector.
  std::optional<kvx::KvTransferParams> kv_transfer;
  // The KV transfer address of an engine that holds more of the prompt's prefix, as the
  // router names it in x-kv-cache-source-host-port (llm-d's P2P pull): an engine that
  // consumes KV pulls the blocks it lacks from there (kv_connector.h). Ignored otherwise.
  std::optional<net::HostPort> kv_source;
  std::chrono::steady_clock::time_point arrival_time = std::chrono::steady_clock::now();
};

// A matched stop string, a matched stop token id, or nothing (EOS, length, abort).
using StopReason = std::variant<std::monostate, std::string, int32_t>;

// What one sequence produced in one step.
struct SequenceUpdate {
  int32_t index = 0;  // 0..n-1
  std::string text;   // new text (possibly empty while bytes are held back)
  std::vector<int32_t> token_ids;
  // One entry per token in token_ids when the request asked for logprobs.
  std::vector<SampleResult> logprobs;
  std::optional<FinishReason> finish_reason;
  StopReason stop_reason;
};

// Everything a request produced in one step. Sent on the engine loop thread; the
// callback must not block (it formats and posts to the client's connection).
struct RequestUpdate {
  std::vector<SequenceUpdate> sequences;
  int64_t num_prompt_tokens = 0;
  // Prompt tokens served from the prefix cache (the first sequence's hit).
  int64_t num_cached_tokens = 0;
  // Prompt logprobs computed since the last update, in prompt order, continuing where the
  // previous update stopped: entry k of the whole series is prompt token k + 1.
  std::vector<SampleResult> prompt_logprobs;
  // Every sequence has finished; no update follows.
  bool finished = false;
  // Set when the engine failed the request (then finished is true).
  absl::Status error;
  // A liveness beat (EngineCoreOptions::keep_alive_interval): the request is in flight and
  // had no other update for the interval. Carries nothing else; never finished.
  bool keep_alive = false;
  // On the finished update of a request whose KV a producer kept for a remote decode: the
  // kv_transfer_params (JSON object) the response carries to the decode engine.
  std::string kv_transfer_params;
};

}  // namespace switchyard::engine
