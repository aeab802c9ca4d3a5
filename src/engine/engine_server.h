// EngineServer: one complete model server, assembled: checkpoint files, tokenizer and chat
// template, the model runner (real or simulated, from a factory), metrics, the KV event
// publisher, the engine loop and the HTTP front. `switchyard engine` is a thin flag parser
// over it; tests start it in-process.
//
// Shutdown, as vLLM's --shutdown-timeout and Envoy's drain: BeginDrain makes new generation
// requests 503 (with Retry-After) and /health 503 while the listener stays open and what was
// accepted (running and queued) goes on; AwaitDrained waits for it to be answered. Stop ends
// whatever is left with a clean error (an SSE error event and [DONE] on a stream whose head
// went out, else a 503 with Retry-After; KV blocks freed), lets those last bytes reach the
// sockets (for at most a couple of seconds), then closes the HTTP front and the publisher.
//
// Threads: Start, the drain calls and Stop from one controlling thread, but InterruptDrain
// from any. Owns everything it starts.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

#include "base/drain_gate.h"
#include "engine/api_server.h"
#include "engine/engine_core.h"
#include "engine/metrics.h"
#include "engine/model_runner.h"
#include "engine/serving_context.h"
#include "kvx/kv_event_publisher.h"
#include "kvx/kv_transfer_config.h"
#include "model/model_files.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace switchyard::engine {

// Makes the runner from the opened checkpoint (it may keep the files: weights map them).
using RunnerFactory = std::function<absl::StatusOr<std::unique_ptr<ModelRunner>>(
    std::unique_ptr<model::ModelFiles> files, const text::Tokenizer& tokenizer)>;

struct EngineServerOptions {
  std::string model;              // HF directory or .gguf file
  std::string served_model_name;  // empty: `model`
  int64_t max_model_len = 0;      // 0: the model's max_position_embeddings
  SchedulerBudget budget;
  bool enable_prefix_caching = true;
  std::optional<std::string> hash_seed;
  // Unset: no KV events.
  std::optional<kvx::KvEventPublisherOptions> kv_events;
  // Unset: no KV transfer (P/D). `kv_secret` authenticates KV peers.
  std::optional<kvx::KvTransferConfig> kv_transfer;
  std::string kv_secret;
  // Unset: no host KV tier (--kv-offloading-size).
  std::optional<KvOffloadOptions> kv_offload;
  ApiServerOptions api;
  api::RequestLimits limits;
  bool use_generation_config = true;  // vLLM's --generation-config auto
  // vLLM's tool and reasoning flags (serving_context.h); empty names: none.
  bool enable_auto_tool_choice = false;
  std::string tool_call_parser;
  std::string reasoning_parser;
  bool exclude_tools_when_tool_choice_none = false;
  std::string version;
  RunnerFactory make_runner;
  // vllm:cache_config_info's cache_dtype label.
  std::string cache_dtype = "auto";
  // SSE comments sent on a stream that has had nothing to send for this long (queued, long
  // prefill), so that clients and routers see a live engine. 0: none.
  std::chrono::milliseconds sse_keep_alive_interval{5000};
};

class EngineServer {
 public:
  static absl::StatusOr<std::unique_ptr<EngineServer>> Start(EngineServerOptions options);
  ~EngineServer();

  int port() const { return api_->port(); }
  // The KV event endpoints as bound ("" without events).
  std::string kv_events_endpoint() const;
  std::string kv_events_replay_endpoint() const;
  // Where this engine lends KV blocks to peers (KvConnector::lending_address); empty when it
  // does not produce.
  std::string kv_transfer_address() const;
  EngineCore& core() { return *core_; }
  const ServingContext& context() const { return ctx_; }

  // Refuses new generation requests and reports not ready from now on. Idempotent.
  void BeginDrain();
  // Waits until every accepted generation request was answered (true), `deadline`, or
  // InterruptDrain (false).
  bool AwaitDrained(std::chrono::steady_clock::time_point deadline);
  // Ends AwaitDrained at once (a second signal); any thread.
  void InterruptDrain();
  // Idempotent.
  void Stop();

 private:
  EngineServer() = default;

  // First, so that it goes last: answers in flight hold tickets on it until they are gone.
  base::DrainGate drain_;
  std::unique_ptr<text::Tokenizer> tokenizer_;
  std::unique_ptr<text::ChatTemplate> chat_template_;
  std::unique_ptr<EngineMetrics> metrics_;
  std::unique_ptr<kvx::KvEventPublisher> publisher_;
  std::unique_ptr<EngineCore> core_;
  structured::GrammarCache grammars_;
  ServingContext ctx_;
  std::unique_ptr<ApiServer> api_;
};

}  // namespace switchyard::engine
