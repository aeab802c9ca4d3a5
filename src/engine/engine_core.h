// EngineCore: the engine loop. One owned thread ("sy-engine") owns the scheduler state,
// the KV cache manager, every sequence and the model runner, and repeats
//
//   take new requests and aborts -> Schedule -> ApplyPlan -> build the ForwardBatch ->
//   runner.Execute -> sample -> detokenize and check stops -> report -> free finished
//
// until stopped; it sleeps only while it has no sequence. Requests arrive from any thread
// (the HTTP front) through Submit and Abort, which only queue; results leave through each
// request's callback, called on the loop thread after every step that touched it.
//
// A request's n sequences are queued together; the first one's full prompt blocks are
// published as soon as its step commits, so the others start from them (prefix caching).
// Aborted requests (a client that went away) free their blocks at the top of the next
// step. KV events are drained after every step and handed to the publisher.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "base/mutex.h"
#include "engine/engine_request.h"
#include "engine/kv_cache_manager.h"
#include "engine/kv_connector.h"
#include "engine/kv_offloader.h"
#include "engine/kv_tier_stats.h"
#include "engine/metrics.h"
#include "engine/model_runner.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"
#include "engine/sequence_output.h"
#include "engine/sequence_table.h"
#include "kvx/kv_event_publisher.h"
#include "kvx/kv_transfer_params.h"
#include "net/host_port.h"
#include "structured/token_mask.h"
#include "text/tokenizer.h"

namespace switchyard::engine {

struct EngineCoreOptions {
  SchedulerBudget budget;
  int64_t max_model_len = 2048;
  bool enable_prefix_caching = true;
  // PYTHONHASHSEED-style seed of the block hashes (see BlockHasher).
  std::optional<std::string> hash_seed;
  // The tokenizer's EOS and the model's other EOS ids (generation_config / config.json).
  std::optional<int32_t> eos_token_id;
  std::vector<int32_t> extra_eos_ids;
  // A request with no update for this long gets a keep-alive beat (RequestUpdate::
  // keep_alive), so that its answer can show it is alive while it waits or prefills; swept
  // between steps. 0: none.
  std::chrono::steady_clock::duration keep_alive_interval{0};
  // Borrowed, optional; must outlive the core.
  EngineMetrics* metrics = nullptr;
  kvx::KvEventPublisher* kv_events = nullptr;
  // Prefill/decode disaggregation (--kv-transfer-config); the core starts the connector
  // over its runner's KV memory. The model fingerprint in its compatibility is the caller's.
  std::optional<KvConnectorOptions> kv_connector;
  // The KV tiers under the pool (--kv-offloading-size and the disk flags), over the
  // runner's KV memory. Need prefix caching and full attention.
  std::optional<KvOffloadOptions> kv_offload;
};

// Counts for /health, /debug and tests; read without stopping the loop.
struct EngineSnapshot {
  int64_t num_running = 0;
  int64_t num_waiting = 0;
  int64_t num_requests = 0;
  int32_t num_free_blocks = 0;
  int32_t num_blocks = 0;
  int64_t num_steps = 0;
  // The pool's prefix cache, in tokens (vllm:prefix_cache_queries / _hits).
  int64_t prefix_cache_queries = 0;
  int64_t prefix_cache_hits = 0;
  // The KV tiers under the pool (host, then disk), when there are any.
  std::vector<KvTierStats> kv_tiers;
};

class EngineCore {
 public:
  using UpdateCallback = std::function<void(RequestUpdate update)>;

  // Starts the loop thread. Errors: budgets beyond the runner's limits, a sequence whose
  // blocks exceed the runner's KV cache (MaxBlocksPerSequence: max_model_len's blocks, or
  // under a sliding window those of the window and one step). The runner's logit rows beyond
  // budget.max_num_seqs become budget.max_prompt_logit_rows (prompt logprobs).
  static absl::StatusOr<std::unique_ptr<EngineCore>> Start(const EngineCoreOptions& options,
                                                           std::unique_ptr<ModelRunner> runner,
                                                           const text::Tokenizer* tokenizer);
  ~EngineCore();
  EngineCore(const EngineCore&) = delete;
  EngineCore& operator=(const EngineCore&) = delete;

  // Queues a request; any thread. Errors, with nothing queued: InvalidArgument (empty
  // prompt, token ids outside the vocabulary, n < 1, prompt + max_tokens beyond
  // max_model_len, bad sampling parameters, prompt logprobs on a runner with no logit rows
  // to spare for them), AlreadyExists (the id is in flight), Unavailable (stopping). On OK,
  // `callback` receives updates on the loop thread, the last one with finished = true.
  absl::Status Submit(EngineRequest request, UpdateCallback callback);

  // The checks Submit makes, for a caller that wants them before it commits to an answer
  // (a stream's head). Any thread.
  absl::Status Validate(const EngineRequest& request) const;

  // Ends the request with FinishReason::kAbort if it is still in flight; any thread.
  void Abort(std::string request_id);

  // Drops every cached block hash (vLLM's reset_prefix_cache), on the loop thread between
  // steps; `done` runs there with the result: OK (KV events then carry AllBlocksCleared),
  // FailedPrecondition while running sequences hold blocks, Unavailable when stopping. With
  // `preempt_running`, running sequences are first preempted by recompute, as the scheduler
  // preempts them, and go on from the front of the waiting queue. Any thread.
  using ResetCallback = std::function<void(absl::Status status)>;
  void ResetPrefixCache(bool preempt_running, ResetCallback done);

  // Ends everything in flight with an Unavailable error (callbacks run; KV blocks are freed)
  // and joins the loop; later Submits get Unavailable. Idempotent.
  void Stop();

  EngineSnapshot snapshot() const;
  const EngineCoreOptions& options() const { return options_; }
  // Null without --kv-transfer-config.
  const KvConnector* kv_connector() const { return connector_.get(); }

 private:
  struct RequestState;
  struct SeqState;
  struct Intake {
    EngineRequest request;
    UpdateCallback callback;
  };
  struct Reset {
    bool preempt_running = false;
    ResetCallback done;
  };
  // Where a request's prompt KV comes from when it is loaded rather than computed.
  enum class LoadSource {
    kRemotePrefill,  // the producer that prefilled it (kv_transfer_params)
    kPeer,           // a peer engine holding its prefix (x-kv-cache-source-host-port)
    kTier,           // this engine's KV tiers
  };
  // A request's sequences while the first loads the prompt's KV; they join the waiting
  // queue when the load ends.
  struct Loading {
    std::vector<Sequence> seqs;
    LoadSource source = LoadSource::kTier;
    // kRemotePrefill: the producer's kv_transfer_params; kPeer: the peer's KV address. Kept
    // here: an aborted request's state is gone while its load still has to end.
    std::optional<kvx::KvTransferParams> producer;
    std::optional<net::HostPort> peer;
    // The request was aborted meanwhile: the blocks are freed once the load stops writing.
    bool abandoned = false;
    // Set while the load waits for room in the pool (load_queue_), not started.
    std::optional<std::chrono::steady_clock::time_point> queued_since;
  };
  enum class LoadStart { kStarted, kNothingToLoad, kNoRoom };

  EngineCore(const EngineCoreOptions& options, std::unique_ptr<ModelRunner> runner,
             const text::Tokenizer* tokenizer, std::unique_ptr<KvCacheManager> kv);

  void Run();
  void Admit(Intake intake);
  // Starts loading the prompt's KV from `loading.source` into the first sequence's new
  // blocks; false when there is nothing to load (the sequences, back in `loading.seqs`, then
  // compute the prompt as usual, the first one registered with kv_ or not). When the pool
  // has no room for the blocks now, or earlier loads wait for room, the request waits in
  // load_queue_ (true) as vLLM's scheduler holds a request whose external KV it cannot place
  // yet: computing the prompt would need those blocks too.
  bool BeginLoad(Loading& loading);
  // Starts the load of its first sequence (registered with kv_, no blocks); `retry`: it
  // waited in load_queue_ (its tier lookup is counted, and it is the queue's head).
  LoadStart TryLoad(const Loading& loading, bool retry);
  LoadStart TryRemotePrefill(const Sequence& first, const kvx::KvTransferParams& producer);
  LoadStart TryPeerPull(const Sequence& first, const net::HostPort& peer);
  LoadStart TryTierLoad(const Sequence& first, bool retry);
  // A load that will not run: what its source needs told (a producer's blocks released) and
  // counted.
  void GiveUpLoad(const Loading& loading);
  // Between steps: starts the queued loads in order while the pool has room. A load that
  // waited kMaxLoadWait, or that nothing running can make room for, is given up: its
  // request computes the prompt (the scheduler's queue then holds it in order).
  void RetryLoads();
  // Ends a load TryLoad started: the loaded blocks are published and the request's
  // sequences join the queue (or are freed when it was aborted).
  void EndLoad(SeqId seq, int32_t num_loaded);
  // Connector work between steps: finished loads join the queue, ended leases are freed.
  void ServiceConnector();
  // KV tier work between steps: finished copies are collected, released blocks stored.
  void ServiceOffloader();
  // Producer: when the request asked for a remote decode, puts its first sequence's blocks
  // under a lease and the response's kv_transfer_params in its update; false otherwise.
  bool LeaseForRemoteDecode(RequestState& req, int32_t index, SeqId id);
  void AbortRequest(const std::string& request_id, FinishReason reason, absl::Status error);
  absl::Status ResetNow(bool preempt_running);
  absl::Status Step();
  // Samples the logit rows of `sampled` and reports; finishes sequences that stop.
  void ProcessSamples(std::span<const SeqId> sampled, std::span<float> logits);
  // Turns the prompt-position logit rows of the step (prompt_logit_seqs_ order) into prompt
  // logprobs for the requests' next updates.
  void ProcessPromptLogprobs(std::span<const float> logits);
  // Ends a sequence: it leaves the queues and its blocks are freed, or leased when it
  // `completed` (stopped by itself, not aborted) and the request asked for a remote decode.
  void FinishSequence(SeqState& seq, bool completed);
  // Wakes the loop for connector or tier work; any thread.
  void WakeForKvWork();
  // The structured-output token masker, built on first use.
  structured::TokenMasker& Masker();
  void Report();
  // Beats for the requests that had no update for keep_alive_interval.
  void SendKeepAlives();
  void PublishEvents();
  void UpdateGauges();
  // The KV tiers' stats to the snapshot and metrics. Loop thread (or Start, before it runs).
  void PublishTierStats();

  const EngineCoreOptions options_;
  std::unique_ptr<ModelRunner> runner_;
  const text::Tokenizer* tokenizer_;

  // Loop thread only.
  std::unique_ptr<KvCacheManager> kv_;
  SequenceTable table_;
  Sampler sampler_;
  absl::flat_hash_map<std::string, std::unique_ptr<RequestState>> requests_;
  absl::flat_hash_map<SeqId, std::unique_ptr<SeqState>> seqs_;
  SeqId next_seq_id_ = 1;
  // Step scratch, reused.
  std::vector<int32_t> batch_tokens_;
  std::vector<int32_t> batch_positions_;
  std::vector<int32_t> batch_slots_;
  std::vector<runtime::AttentionSequence> batch_sequences_;
  std::vector<int32_t> batch_logit_rows_;
  std::vector<SeqId> sampled_;
  // Rows of prompt positions whose logits the step returns after the sample rows.
  std::vector<int32_t> prompt_logit_rows_;
  std::vector<ScheduledSeq> prompt_logit_seqs_;
  std::vector<float> logits_;
  std::vector<int32_t> banned_;
  // The model's end-of-sequence ids: eos_token_id and extra_eos_ids.
  const std::vector<int32_t> eos_ids_;
  std::unique_ptr<structured::TokenVocabulary> token_vocab_;
  std::unique_ptr<structured::TokenMasker> token_masker_;
  std::vector<uint32_t> token_mask_;
  // Requests with news since the last Report, in first-touched order.
  std::vector<RequestState*> touched_;
  PrefixCacheStats reported_prefix_stats_;
  // The offloader's generation whose stats the snapshot and metrics show.
  uint64_t reported_tier_generation_ = 0;
  absl::flat_hash_map<SeqId, Loading> loading_;
  // First sequences of requests whose load waits for room, oldest first (in loading_).
  std::deque<SeqId> load_queue_;
  // The last step scheduled nothing while KV traffic held blocks: the loop sleeps until
  // that work wakes it instead of stepping again.
  bool waiting_for_kv_ = false;
  std::chrono::steady_clock::time_point next_keep_alive_sweep_;

  mutable base::Mutex mu_;
  base::CondVar cv_;
  std::deque<Intake> intake_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> aborts_ ABSL_GUARDED_BY(mu_);
  std::vector<Reset> resets_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<std::string> in_flight_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool kv_work_ ABSL_GUARDED_BY(mu_) = false;
  EngineSnapshot snapshot_ ABSL_GUARDED_BY(mu_);

  // After runner_: stopped (its load thread joined) before the KV memory goes.
  std::unique_ptr<KvConnector> connector_;
  std::unique_ptr<KvOffloader> offloader_;
  std::thread thread_;
};

}  // namespace switchyard::engine
