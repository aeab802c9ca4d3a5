#include "engine/engine_core.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "fmt/format.h"

#include "base/logging.h"
#include "base/status_macros.h"
#include "base/thread_name.h"
#include "engine/bad_words.h"
#include "engine/step_apply.h"

namespace switchyard::engine {
namespace {

// The longest a prompt waits for room to load its prefix from a KV tier before computing it.
constexpr std::chrono::seconds kMaxLoadWait{2};

using Clock = std::chrono::steady_clock;

absl::Status StoppingError() {
  return absl::UnavailableError("the engine is stopping");
}

double Seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

double UnixSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

struct EngineCore::RequestState {
  EngineRequest request;
  UpdateCallback callback;
  std::vector<SeqId> seqs;  // by sequence index
  int32_t num_unfinished = 0;
  int64_t num_cached_tokens = 0;
  int64_t num_generated = 0;
  std::optional<Clock::time_point> first_scheduled;
  std::optional<Clock::time_point> first_token;
  Clock::time_point last_token;
  Clock::time_point last_update;  // reported, or admitted (keep-alive beats)
  // The update being built for the next Report; `touched` while it holds news.
  RequestUpdate pending;
  bool touched = false;
  // Sequences whose update entry is pending.sequences[slot]; -1 when none.
  std::vector<int32_t> pending_slot;
  FinishReason last_finish = FinishReason::kStop;
  // Prompt tokens whose KV a remote prefill delivered (part of num_cached_tokens once
  // admitted, unless evicted before).
  int64_t num_loaded_tokens = 0;
};

struct EngineCore::SeqState {
  SeqState(RequestState* req, int32_t idx, int64_t vocab, std::optional<uint64_t> seed,
           const text::Tokenizer* tokenizer, std::optional<int32_t> eos,
           std::span<const int32_t> extra_eos)
      : request(req),
        index(idx),
        sampling(vocab, req->request.prompt_tokens, seed),
        output(tokenizer, req->request, eos, extra_eos) {
    if (req->request.grammar != nullptr)
      matcher = std::make_unique<structured::GrammarMatcher>(req->request.grammar);
  }

  RequestState* request;
  int32_t index;
  SequenceSamplingState sampling;
  SequenceOutput output;
  // Structured output: where the text stands in the request's grammar; null if unconstrained.
  std::unique_ptr<structured::GrammarMatcher> matcher;
  int64_t num_generated = 0;
  std::optional<Clock::time_point> last_token;
  bool finished = false;
};

absl::StatusOr<std::unique_ptr<EngineCore>> EngineCore::Start(const EngineCoreOptions& options,
                                                              std::unique_ptr<ModelRunner> runner,
                                                              const text::Tokenizer* tokenizer) {
  const RunnerLimits& limits = runner->limits();
  const SchedulerBudget& budget = options.budget;
  if (budget.max_num_seqs <= 0 || budget.max_num_batched_tokens <= 0 ||
      budget.max_num_seqs > limits.max_logit_rows ||
      budget.max_num_batched_tokens > limits.max_num_batched_tokens) {
    return absl::InvalidArgumentError(fmt::format(
        "max_num_seqs ({}) and max_num_batched_tokens ({}) must be positive and within the "
        "runner's limits ({} logit rows, {} tokens per step)",
        budget.max_num_seqs, budget.max_num_batched_tokens, limits.max_logit_rows,
        limits.max_num_batched_tokens));
  }
  // One sequence alone must always fit: under a sliding window it holds its window and one
  // step's tokens, not its whole length.
  if (options.max_model_len <= 0 ||
      MaxBlocksPerSequence(options.max_model_len, budget.max_num_batched_tokens,
                           limits.sliding_window, limits.block_size) > limits.num_kv_blocks) {
    return absl::InvalidArgumentError(fmt::format(
        "max_model_len {} needs more KV blocks than the cache holds ({} blocks of {} tokens; "
        "sliding window {}, {} tokens per step); lower --max-model-len or give the KV cache "
        "more memory",
        options.max_model_len, limits.num_kv_blocks, limits.block_size, limits.sliding_window,
        budget.max_num_batched_tokens));
  }
  KvCacheOptions kv_options;
  kv_options.num_blocks = limits.num_kv_blocks;
  kv_options.block_size = limits.block_size;
  kv_options.sliding_window = limits.sliding_window;
  kv_options.enable_prefix_caching = options.enable_prefix_caching;
  kv_options.hash_seed = options.hash_seed;
  kv_options.enable_events = options.kv_events != nullptr;
  kv_options.track_released_blocks = options.kv_offload.has_value();
  if (options.kv_offload.has_value() &&
      (!options.enable_prefix_caching || limits.sliding_window != 0)) {
    return absl::InvalidArgumentError(
        "--kv-offloading-size needs prefix caching and a model with full attention (no "
        "sliding window)");
  }
  SY_ASSIGN_OR_RETURN(std::unique_ptr<KvCacheManager> kv, KvCacheManager::Create(kv_options));
  EngineCoreOptions core_options = options;
  core_options.budget.max_prompt_logit_rows =
      static_cast<int32_t>(limits.max_logit_rows - budget.max_num_seqs);
  std::unique_ptr<EngineCore> core(
      new EngineCore(core_options, std::move(runner), tokenizer, std::move(kv)));
  if (options.kv_connector.has_value()) {
    SY_ASSIGN_OR_RETURN(RunnerKvMemory memory, core->runner_->kv_memory());
    KvConnectorOptions connector = *options.kv_connector;
    memory.compatibility.model_fingerprint = connector.compatibility.model_fingerprint;
    connector.compatibility = std::move(memory.compatibility);
    SY_ASSIGN_OR_RETURN(core->connector_,
                        KvConnector::Start(std::move(connector), std::move(memory.region),
                                           [c = core.get()] { c->WakeForKvWork(); }));
  }
  if (options.kv_offload.has_value()) {
    SY_ASSIGN_OR_RETURN(RunnerKvMemory memory, core->runner_->kv_memory());
    memory.compatibility.model_fingerprint = options.kv_offload->model_fingerprint;
    SY_ASSIGN_OR_RETURN(
        core->offloader_,
        KvOffloader::Start(*options.kv_offload, std::move(memory.region), limits.block_size,
                           memory.compatibility, [c = core.get()] { c->WakeForKvWork(); }));
    core->PublishTierStats();
  }
  core->thread_ = std::thread([c = core.get()] {
    base::SetCurrentThreadName("sy-engine");
    c->Run();
  });
  return core;
}

EngineCore::EngineCore(const EngineCoreOptions& options, std::unique_ptr<ModelRunner> runner,
                       const text::Tokenizer* tokenizer, std::unique_ptr<KvCacheManager> kv)
    : options_(options),
      runner_(std::move(runner)),
      tokenizer_(tokenizer),
      kv_(std::move(kv)),
      sampler_(runner_->limits().vocab_size),
      logits_(static_cast<size_t>(runner_->limits().max_logit_rows * runner_->limits().vocab_size)),
      eos_ids_([&] {
        std::vector<int32_t> ids = options.extra_eos_ids;
        if (options.eos_token_id.has_value())
          ids.push_back(*options.eos_token_id);
        return ids;
      }()) {
  base::MutexLock lock(&mu_);
  snapshot_.num_blocks = runner_->limits().num_kv_blocks;
  snapshot_.num_free_blocks = kv_->pool().num_free_blocks();
}

EngineCore::~EngineCore() {
  Stop();
}

void EngineCore::WakeForKvWork() {
  {
    base::MutexLock lock(&mu_);
    kv_work_ = true;
  }
  cv_.NotifyAll();
}

void EngineCore::Stop() {
  {
    base::MutexLock lock(&mu_);
    stopping_ = true;
  }
  cv_.NotifyAll();
  if (thread_.joinable())
    thread_.join();
}

absl::Status EngineCore::Validate(const EngineRequest& r) const {
  const int64_t vocab = runner_->limits().vocab_size;
  auto in_vocab = [vocab](int32_t id) { return id >= 0 && id < vocab; };
  if (r.prompt_tokens.empty())
    return absl::InvalidArgumentError("the prompt is empty");
  if (r.n < 1)
    return absl::InvalidArgumentError(fmt::format("n must be >= 1, got {}", r.n));
  for (int32_t id : r.prompt_tokens) {
    if (!in_vocab(id)) {
      return absl::InvalidArgumentError(
          fmt::format("prompt token id {} is outside the vocabulary [0, {})", id, vocab));
    }
  }
  for (const auto& ids : {r.sampling.allowed_token_ids, r.stop.stop_token_ids}) {
    for (int32_t id : ids) {
      if (!in_vocab(id)) {
        return absl::InvalidArgumentError(
            fmt::format("token id {} is outside the vocabulary [0, {})", id, vocab));
      }
    }
  }
  for (const std::vector<int32_t>& word : r.bad_words) {
    for (int32_t id : word) {
      if (!in_vocab(id)) {
        return absl::InvalidArgumentError(
            fmt::format("bad_words token id {} is outside the vocabulary [0, {})", id, vocab));
      }
    }
  }
  for (const auto& [id, bias] : r.sampling.logit_bias) {
    if (!in_vocab(id)) {
      return absl::InvalidArgumentError(
          fmt::format("logit_bias token id {} is outside the vocabulary [0, {})", id, vocab));
    }
  }
  const auto prompt_len = static_cast<int64_t>(r.prompt_tokens.size());
  if (r.stop.max_tokens < 1 || prompt_len + r.stop.max_tokens > options_.max_model_len) {
    return absl::InvalidArgumentError(
        fmt::format("prompt ({} tokens) + max_tokens ({}) must fit the context of {} tokens (and "
                    "max_tokens >= 1)",
                    prompt_len, r.stop.max_tokens, options_.max_model_len));
  }
  if (r.stop.min_tokens < 0 || r.stop.min_tokens > r.stop.max_tokens) {
    return absl::InvalidArgumentError(
        fmt::format("min_tokens must be in [0, max_tokens], got {}", r.stop.min_tokens));
  }
  if (r.prompt_logprobs.has_value()) {
    if (*r.prompt_logprobs < 0) {
      return absl::InvalidArgumentError(
          fmt::format("prompt_logprobs must be >= 0, got {}", *r.prompt_logprobs));
    }
    if (options_.budget.max_prompt_logit_rows <= 0) {
      return absl::UnimplementedError(
          "prompt_logprobs: this engine's runner has no logit rows beyond max_num_seqs");
    }
  }
  return ValidateSamplingParams(r.sampling);
}

absl::Status EngineCore::Submit(EngineRequest request, UpdateCallback callback) {
  SY_RETURN_IF_ERROR(Validate(request));
  {
    base::MutexLock lock(&mu_);
    if (stopping_)
      return StoppingError();
    if (!in_flight_.insert(request.request_id).second) {
      return absl::AlreadyExistsError(
          fmt::format("request id '{}' is already in flight", request.request_id));
    }
    intake_.push_back({std::move(request), std::move(callback)});
  }
  cv_.NotifyOne();
  return absl::OkStatus();
}

void EngineCore::Abort(std::string request_id) {
  {
    base::MutexLock lock(&mu_);
    if (!in_flight_.contains(request_id))
      return;
    aborts_.push_back(std::move(request_id));
  }
  cv_.NotifyOne();
}

void EngineCore::ResetPrefixCache(bool preempt_running, ResetCallback done) {
  {
    base::MutexLock lock(&mu_);
    if (!stopping_) {
      resets_.push_back(Reset{preempt_running, std::move(done)});
      done = nullptr;
    }
  }
  if (done != nullptr) {
    done(StoppingError());
    return;
  }
  cv_.NotifyOne();
}

absl::Status EngineCore::ResetNow(bool preempt_running) {
  if (preempt_running) {
    // Last running first, so that the first ends up at the front of the waiting queue.
    const std::vector<SeqId> running = table_.running();
    for (auto it = running.rbegin(); it != running.rend(); ++it) {
      SY_RETURN_IF_ERROR(kv_->Preempt(*it));
      SY_RETURN_IF_ERROR(table_.MoveToWaitingFront(*it));
    }
    if (options_.metrics != nullptr && !running.empty())
      options_.metrics->AddPreemptions(static_cast<int64_t>(running.size()));
  }
  return kv_->ResetPrefixCache();
}

EngineSnapshot EngineCore::snapshot() const {
  base::MutexLock lock(&mu_);
  return snapshot_;
}

void EngineCore::Run() {
  std::deque<Intake> intake;
  std::vector<std::string> aborts;
  std::vector<Reset> resets;
  for (;;) {
    bool stopping = false;
    {
      base::MutexLock lock(&mu_);
      if (table_.size() == 0 || waiting_for_kv_) {
        auto has_work = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return stopping_ || !intake_.empty() || !aborts_.empty() || !resets_.empty() || kv_work_;
        };
        // Leases end on their own: wake for the earliest.
        const std::optional<Clock::time_point> deadline =
            connector_ != nullptr ? connector_->NextLeaseDeadline() : std::nullopt;
        if (deadline.has_value()) {
          cv_.WaitUntil(&mu_, *deadline, has_work);
        } else {
          cv_.Wait(&mu_, has_work);
        }
      }
      kv_work_ = false;
      waiting_for_kv_ = false;
      intake.swap(intake_);
      aborts.swap(aborts_);
      resets.swap(resets_);
      stopping = stopping_;
    }
    for (Intake& in : intake)
      Admit(std::move(in));
    intake.clear();
    for (const std::string& id : aborts)
      AbortRequest(id, FinishReason::kAbort, absl::OkStatus());
    aborts.clear();
    if (connector_ != nullptr)
      ServiceConnector();
    if (offloader_ != nullptr)
      ServiceOffloader();
    RetryLoads();
    for (Reset& reset : resets) {
      reset.done(stopping ? StoppingError() : ResetNow(reset.preempt_running));
    }
    resets.clear();
    if (stopping) {
      if (connector_ != nullptr)
        connector_->StopLending();
      std::vector<std::string> ids;
      for (const auto& [id, state] : requests_)
        ids.push_back(id);
      for (const std::string& id : ids)
        AbortRequest(id, FinishReason::kAbort, StoppingError());
      Report();
      UpdateGauges();
      PublishEvents();
      return;
    }
    if (table_.size() > 0) {
      absl::Status status = Step();
      if (!status.ok()) {
        SY_LOG_ERROR("engine step failed: {}", std::string(status.message()));
        std::vector<std::string> ids;
        for (const auto& [id, state] : requests_)
          ids.push_back(id);
        for (const std::string& id : ids)
          AbortRequest(id, FinishReason::kError, status);
      }
    }
    // The blocks the step released go to the tier now, while the loop may go idle, and the
    // room the step freed goes to the loads waiting for it.
    if (offloader_ != nullptr)
      ServiceOffloader();
    RetryLoads();
    // Gauges first, so that a client who got its last update sees its blocks freed.
    UpdateGauges();
    PublishEvents();
    Report();
    SendKeepAlives();
  }
}

void EngineCore::SendKeepAlives() {
  const Clock::duration interval = options_.keep_alive_interval;
  if (interval.count() <= 0)
    return;
  const Clock::time_point now = Clock::now();
  if (now < next_keep_alive_sweep_)
    return;
  // A few sweeps per interval: a beat comes at most a quarter interval late.
  next_keep_alive_sweep_ = now + interval / 4;
  for (const auto& [id, state] : requests_) {
    RequestState* req = state.get();
    if (req->num_unfinished == 0 || now - req->last_update < interval)
      continue;
    req->last_update = now;
    RequestUpdate beat;
    beat.num_prompt_tokens = req->pending.num_prompt_tokens;
    beat.num_cached_tokens = req->num_cached_tokens;
    beat.keep_alive = true;
    req->callback(std::move(beat));
  }
}

void EngineCore::Admit(Intake in) {
  auto state = std::make_unique<RequestState>();
  RequestState* req = state.get();
  req->request = std::move(in.request);
  req->callback = std::move(in.callback);
  req->last_update = Clock::now();
  req->pending.num_prompt_tokens = static_cast<int64_t>(req->request.prompt_tokens.size());
  const int32_t n = req->request.n;
  req->pending_slot.assign(static_cast<size_t>(n), -1);
  const int64_t vocab = runner_->limits().vocab_size;
  std::vector<Sequence> seqs;
  for (int32_t i = 0; i < n; ++i) {
    const SeqId id = next_seq_id_++;
    std::optional<uint64_t> seed = req->request.sampling.seed;
    if (seed.has_value())
      *seed += static_cast<uint64_t>(i);
    seqs_.emplace(id, std::make_unique<SeqState>(req, i, vocab, seed, tokenizer_,
                                                 options_.eos_token_id, options_.extra_eos_ids));
    Sequence seq;
    seq.id = id;
    seq.priority = req->request.priority;
    seq.tokens = req->request.prompt_tokens;
    seq.num_prompt_tokens = static_cast<int32_t>(seq.tokens.size());
    seq.extras = req->request.hash_extras;
    // The first sequence computes the prompt logprobs, from every prompt position's logits;
    // the others may start from the blocks it publishes.
    if (i == 0 && req->request.prompt_logprobs.has_value()) {
      seq.prompt_logits_end = seq.num_prompt_tokens - 1;
      seq.skip_prefix_cache = true;
    }
    seqs.push_back(std::move(seq));
    req->seqs.push_back(id);
  }
  req->num_unfinished = n;
  const bool consumes = connector_ != nullptr && connector_->consumes();
  Loading loading{.seqs = std::move(seqs)};
  bool load = true;
  if (consumes && req->request.kv_transfer.has_value() &&
      req->request.kv_transfer->do_remote_prefill) {
    loading.source = LoadSource::kRemotePrefill;
    loading.producer = req->request.kv_transfer;
  } else if (consumes && req->request.kv_source.has_value()) {
    loading.source = LoadSource::kPeer;
    loading.peer = req->request.kv_source;
  } else {
    load = offloader_ != nullptr;
  }
  if (!load || !BeginLoad(loading)) {
    for (Sequence& seq : loading.seqs) {
      absl::Status added = table_.Add(std::move(seq));
      SY_CHECK(added.ok());  // ids are ours and the prompt was validated
    }
  }
  requests_.emplace(req->request.request_id, std::move(state));
}

bool EngineCore::BeginLoad(Loading& loading) {
  const Sequence& first = loading.seqs.front();
  // Prompt logprobs need every position computed; a sliding window's skipped blocks are not
  // loaded from a peer.
  if (first.skip_prefix_cache ||
      (loading.source != LoadSource::kTier && kv_->sliding_window() != 0)) {
    GiveUpLoad(loading);
    return false;
  }
  absl::Status added = kv_->AddSequence(first.id, first.extras, first.lora_id);
  SY_CHECK(added.ok());  // a new id
  const LoadStart start = TryLoad(loading, /*retry=*/false);
  if (start == LoadStart::kNothingToLoad)
    return false;
  const SeqId id = first.id;
  if (start == LoadStart::kNoRoom) {
    loading.queued_since = Clock::now();
    load_queue_.push_back(id);
  }
  loading_.emplace(id, std::move(loading));
  return true;
}

EngineCore::LoadStart EngineCore::TryLoad(const Loading& loading, bool retry) {
  const Sequence& first = loading.seqs.front();
  // Loads start in arrival order: a later prompt does not take the room an earlier one waits
  // for (a tier load checks after its lookup, which counts).
  const bool queued_before = !retry && !load_queue_.empty();
  switch (loading.source) {
    case LoadSource::kRemotePrefill:
      return queued_before ? LoadStart::kNoRoom : TryRemotePrefill(first, *loading.producer);
    case LoadSource::kPeer:
      return queued_before ? LoadStart::kNoRoom : TryPeerPull(first, *loading.peer);
    case LoadSource::kTier:
      return TryTierLoad(first, retry);
  }
  return LoadStart::kNothingToLoad;
}

EngineCore::LoadStart EngineCore::TryRemotePrefill(const Sequence& first,
                                                   const kvx::KvTransferParams& producer) {
  absl::StatusOr<KvCacheManager::LoadTarget> target = kv_->BeginLoad(first.id, first.tokens);
  if (!target.ok())
    return LoadStart::kNoRoom;
  connector_->StartLoad(first.id, producer, target->first_block, std::move(target->blocks));
  return LoadStart::kStarted;
}

EngineCore::LoadStart EngineCore::TryPeerPull(const Sequence& first, const net::HostPort& peer) {
  const KvCacheManager::PrefixProbe probe = kv_->ProbePrefix(first.id, first.tokens);
  if (probe.num_cached_blocks == static_cast<int32_t>(probe.hashes.size()))
    return LoadStart::kNothingToLoad;  // the pool holds every block a hit may cover
  const std::vector<BlockHash> hashes(probe.hashes.begin() + probe.num_cached_blocks,
                                      probe.hashes.end());
  absl::StatusOr<KvCacheManager::LoadTarget> target = kv_->BeginLoad(first.id, first.tokens);
  if (!target.ok())
    return LoadStart::kNoRoom;
  SY_CHECK(target->blocks.size() == hashes.size());
  connector_->StartPeerPull(first.id, peer, hashes, std::move(target->blocks));
  return LoadStart::kStarted;
}

EngineCore::LoadStart EngineCore::TryTierLoad(const Sequence& first, bool retry) {
  const KvCacheManager::PrefixProbe probe = kv_->ProbePrefix(first.id, first.tokens);
  const KvOffloader::LookupResult found =
      retry ? offloader_->Find(probe.hashes, probe.num_cached_blocks)
            : offloader_->Lookup(probe.hashes, probe.num_cached_blocks);
  const int32_t num_blocks = found.local + found.remote;
  if (num_blocks == 0)
    return LoadStart::kNothingToLoad;
  if (!retry && !load_queue_.empty())
    return LoadStart::kNoRoom;
  const std::vector<BlockHash> hashes(probe.hashes.begin() + probe.num_cached_blocks,
                                      probe.hashes.begin() + probe.num_cached_blocks + num_blocks);
  absl::StatusOr<KvCacheManager::LoadTarget> target =
      kv_->BeginLoad(first.id, first.tokens, probe.num_cached_blocks + num_blocks);
  if (!target.ok())
    return LoadStart::kNoRoom;
  SY_CHECK(target->blocks.size() == hashes.size());
  if (!offloader_->StartLoad(first.id, hashes, target->blocks, found.remote)) {
    kv_->FinishLoad(first.id, first.tokens, 0);
    return LoadStart::kNothingToLoad;
  }
  return LoadStart::kStarted;
}

void EngineCore::GiveUpLoad(const Loading& loading) {
  switch (loading.source) {
    case LoadSource::kRemotePrefill:
      SY_LOG_WARN(
          "not pulling a prompt's KV from {}:{} (request {} there): no room in the KV "
          "cache, prompt logprobs asked for, or aborted; computing it",
          loading.producer->remote_host, loading.producer->remote_port,
          loading.producer->remote_request_id);
      // Only releases the producer's blocks.
      connector_->StartLoad(loading.seqs.front().id, *loading.producer, 0, {});
      if (options_.metrics != nullptr)
        options_.metrics->AddKvTransferLoad(/*loaded=*/false);
      return;
    case LoadSource::kPeer:
      if (options_.metrics != nullptr)
        options_.metrics->AddKvPeerPull(KvPeerPullOutcome::kFellBack);
      return;
    case LoadSource::kTier:
      return;
  }
}

void EngineCore::RetryLoads() {
  const Clock::time_point now = Clock::now();
  while (!load_queue_.empty()) {
    const SeqId id = load_queue_.front();
    Loading& loading = loading_.at(id);
    if (loading.abandoned) {
      GiveUpLoad(loading);
      absl::Status freed = kv_->Free(id);
      SY_CHECK(freed.ok());
      loading_.erase(id);
      load_queue_.pop_front();
      continue;
    }
    LoadStart start = TryLoad(loading, /*retry=*/true);
    if (start == LoadStart::kNoRoom) {
      // Room comes back as running sequences finish and copies end; with neither, or after
      // the bound, waiting longer gains nothing.
      const bool room_may_come = !table_.running().empty() ||
                                 (offloader_ != nullptr && offloader_->busy()) ||
                                 loading_.size() > load_queue_.size();
      if (room_may_come && now - *loading.queued_since < kMaxLoadWait)
        return;
      GiveUpLoad(loading);
      start = LoadStart::kNothingToLoad;
    }
    load_queue_.pop_front();
    if (start == LoadStart::kStarted) {
      loading.queued_since.reset();
      continue;
    }
    // Computed instead: the sequences join the scheduler's queue.
    for (Sequence& seq : loading.seqs) {
      absl::Status added = table_.Add(std::move(seq));
      SY_CHECK(added.ok());
    }
    loading_.erase(id);
  }
}

void EngineCore::EndLoad(SeqId seq_id, int32_t num_loaded) {
  auto it = loading_.find(seq_id);
  SY_CHECK(it != loading_.end());
  Loading& loading = it->second;
  kv_->FinishLoad(seq_id, loading.seqs.front().tokens, num_loaded);
  if (loading.abandoned) {
    absl::Status freed = kv_->Free(seq_id);
    SY_CHECK(freed.ok());
  } else {
    RequestState& req = *seqs_.at(seq_id)->request;
    req.num_loaded_tokens = static_cast<int64_t>(num_loaded) * kv_->block_size();
    for (Sequence& seq : loading.seqs) {
      absl::Status added = table_.Add(std::move(seq));
      SY_CHECK(added.ok());
    }
  }
  loading_.erase(it);
}

void EngineCore::ServiceConnector() {
  for (const KvConnector::FinishedLoad& done : connector_->TakeFinishedLoads()) {
    if (!loading_.contains(done.seq))
      continue;  // a release-only job
    if (options_.metrics != nullptr && done.peer_pull) {
      options_.metrics->AddKvPeerPull(!done.status.ok()     ? KvPeerPullOutcome::kFellBack
                                      : done.num_loaded > 0 ? KvPeerPullOutcome::kLoaded
                                                            : KvPeerPullOutcome::kMissed);
    } else if (options_.metrics != nullptr) {
      options_.metrics->AddKvTransferLoad(done.status.ok());
    }
    EndLoad(done.seq, done.num_loaded);
  }
  for (KvConnector::PendingLookup& lookup : connector_->TakeLookups()) {
    const std::vector<BlockId> lent = kv_->PinCachedPrefix(lookup.hashes);
    if (!connector_->AnswerLookup(lookup.id, lent))
      kv_->UnpinBlocks(lent);  // the peer gave up waiting
    if (options_.metrics != nullptr)
      options_.metrics->AddKvPeerLookup(static_cast<int64_t>(lent.size()));
  }
  for (const KvConnector::EndedLease& lease : connector_->TakeEndedLeases(Clock::now())) {
    if (lease.seq.has_value()) {
      absl::Status freed = kv_->Free(*lease.seq);
      SY_CHECK(freed.ok());
    } else {
      kv_->UnpinBlocks(lease.pinned);
    }
    if (options_.metrics != nullptr)
      options_.metrics->AddKvTransferLeaseEnded(lease.expired);
  }
}

bool EngineCore::LeaseForRemoteDecode(RequestState& req, int32_t index, SeqId id) {
  if (connector_ == nullptr || !connector_->produces() || !req.request.kv_transfer.has_value() ||
      !req.request.kv_transfer->do_remote_decode || index != 0 || kv_->sliding_window() != 0 ||
      !kv_->HasSequence(id)) {
    return false;
  }
  req.pending.kv_transfer_params =
      connector_->Lease(req.request.request_id, id, kv_->block_table(id));
  return true;
}

void EngineCore::ServiceOffloader() {
  KvOffloader::Finished finished = offloader_->TakeFinished();
  kv_->UnpinBlocks(finished.unpin);
  for (const KvOffloader::Finished::Load& load : finished.loads)
    EndLoad(load.seq, load.num_loaded);
  const std::vector<BlockId> reading = offloader_->StartStores(kv_->TakeReleasedBlocks());
  kv_->PinBlocks(reading);
}

void EngineCore::AbortRequest(const std::string& request_id, FinishReason reason,
                              absl::Status error) {
  auto it = requests_.find(request_id);
  if (it == requests_.end())
    return;
  RequestState* req = it->second.get();
  req->pending.error = std::move(error);
  for (SeqId id : req->seqs) {
    SeqState& seq = *seqs_.at(id);
    if (seq.finished)
      continue;
    std::string ignored;
    seq.output.Finish(&ignored);
    req->last_finish = reason;
    // Report the finish on this sequence's entry.
    int32_t& slot = req->pending_slot[static_cast<size_t>(seq.index)];
    if (slot < 0) {
      slot = static_cast<int32_t>(req->pending.sequences.size());
      req->pending.sequences.push_back({});
      req->pending.sequences.back().index = seq.index;
    }
    req->pending.sequences[static_cast<size_t>(slot)].finish_reason = reason;
    if (!req->touched) {
      req->touched = true;
      touched_.push_back(req);
    }
    FinishSequence(seq, /*completed=*/false);
  }
}

void EngineCore::FinishSequence(SeqState& seq, bool completed) {
  seq.finished = true;
  RequestState& req = *seq.request;
  --req.num_unfinished;
  if (auto loading = loading_.find(req.seqs.front()); loading != loading_.end()) {
    // Not in the table yet; the load still writes into the first one's blocks.
    loading->second.abandoned = true;
    return;
  }
  const SeqId id = req.seqs[static_cast<size_t>(seq.index)];
  // A lease keeps the blocks for the remote decode; otherwise they are freed now.
  const bool leased = completed && LeaseForRemoteDecode(req, seq.index, id);
  absl::Status removed = table_.Finish(id, leased ? nullptr : kv_.get());
  SY_CHECK(removed.ok());
}

absl::Status EngineCore::Step() {
  KvCacheOracle oracle(*kv_);
  const StepPlan plan = Schedule(table_.View(oracle), options_.budget);
  if (plan.scheduled.empty()) {
    // Nothing runs and the head of the queue cannot start. Blocks that KV traffic holds
    // (loads, a tier's stores, P/D leases) come back: wait for that work. Otherwise it can
    // never fit (Start checked that one sequence's blocks fit an empty cache, so this is a
    // bug guard, not a path).
    const bool kv_holds_blocks =
        !loading_.empty() || (offloader_ != nullptr && offloader_->busy()) ||
        (connector_ != nullptr && connector_->NextLeaseDeadline().has_value());
    if (kv_holds_blocks) {
      waiting_for_kv_ = true;
    } else if (table_.running().empty() && !table_.waiting().empty()) {
      const SeqId head = table_.waiting().front();
      AbortRequest(seqs_.at(head)->request->request.request_id, FinishReason::kError,
                   absl::ResourceExhaustedError("the request does not fit the KV cache"));
    }
    return absl::OkStatus();
  }
  SY_ASSIGN_OR_RETURN(std::vector<ScheduledSeq> committed, ApplyPlan(plan, &table_, kv_.get()));
  if (options_.metrics != nullptr) {
    options_.metrics->AddPreemptions(static_cast<int64_t>(plan.preempted.size()));
    options_.metrics->ObserveIterationTokens(plan.num_scheduled_tokens);
  }

  const int32_t block_size = kv_->block_size();
  batch_tokens_.clear();
  batch_positions_.clear();
  batch_slots_.clear();
  batch_sequences_.clear();
  batch_logit_rows_.clear();
  sampled_.clear();
  prompt_logit_rows_.clear();
  prompt_logit_seqs_.clear();
  const Clock::time_point now = Clock::now();
  for (const ScheduledSeq& s : committed) {
    if (s.num_new_tokens == 0)
      continue;
    const Sequence* seq = table_.Find(s.id);
    SeqState& state = *seqs_.at(s.id);
    RequestState* req = state.request;
    if (!req->first_scheduled.has_value())
      req->first_scheduled = now;
    if (s.admitted && state.index == 0 && state.num_generated == 0)
      req->num_cached_tokens = s.prefix_hit_tokens;
    const std::span<const BlockId> blocks = kv_->block_table(s.id);
    const auto row = static_cast<int64_t>(batch_tokens_.size());
    for (int32_t p = s.num_computed_tokens; p < s.context_len(); ++p) {
      batch_tokens_.push_back(seq->tokens[static_cast<size_t>(p)]);
      batch_positions_.push_back(p);
      batch_slots_.push_back(blocks[static_cast<size_t>(p / block_size)] * block_size +
                             p % block_size);
    }
    batch_sequences_.push_back({row, s.num_new_tokens, s.context_len(), blocks});
    if (s.samples) {
      batch_logit_rows_.push_back(static_cast<int32_t>(batch_tokens_.size() - 1));
      sampled_.push_back(s.id);
    }
    if (s.num_prompt_logits > 0) {
      for (int32_t i = 0; i < s.num_prompt_logits; ++i) {
        prompt_logit_rows_.push_back(
            static_cast<int32_t>(row + s.prompt_logits_begin - s.num_computed_tokens + i));
      }
      prompt_logit_seqs_.push_back(s);
    }
  }
  // Sample rows first, then the prompt positions' rows.
  batch_logit_rows_.insert(batch_logit_rows_.end(), prompt_logit_rows_.begin(),
                           prompt_logit_rows_.end());
  const model::ForwardBatch batch{batch_tokens_, batch_positions_, batch_slots_, batch_sequences_,
                                  batch_logit_rows_};
  const auto vocab = static_cast<size_t>(runner_->limits().vocab_size);
  std::span<float> logits = std::span<float>(logits_).first(batch_logit_rows_.size() * vocab);
  SY_RETURN_IF_ERROR(runner_->Execute(batch, logits));
  // The step has read its windows; what lies wholly before the next ones goes back.
  for (const ScheduledSeq& s : committed)
    kv_->ReleaseSkippedBlocks(s.id);
  ProcessPromptLogprobs(logits.subspan(sampled_.size() * vocab));
  ProcessSamples(sampled_, logits.first(sampled_.size() * vocab));
  {
    base::MutexLock lock(&mu_);
    ++snapshot_.num_steps;
  }
  return absl::OkStatus();
}

void EngineCore::ProcessSamples(std::span<const SeqId> sampled, std::span<float> logits) {
  const auto vocab = static_cast<size_t>(runner_->limits().vocab_size);
  const Clock::time_point now = Clock::now();
  SampleResult result;
  int64_t generated = 0;
  for (size_t row = 0; row < sampled.size(); ++row) {
    const SeqId id = sampled[row];
    SeqState& seq = *seqs_.at(id);
    RequestState* req = seq.request;
    const EngineRequest& r = req->request;
    banned_.clear();
    if (seq.num_generated < r.stop.min_tokens) {
      banned_.assign(eos_ids_.begin(), eos_ids_.end());
      banned_.insert(banned_.end(), r.stop.stop_token_ids.begin(), r.stop.stop_token_ids.end());
    }
    if (!r.bad_words.empty()) {
      const Sequence& s = *table_.Find(id);
      AppendBadWordBans(r.bad_words, std::span(s.tokens).subspan(s.num_prompt_tokens), &banned_);
    }
    std::span<const uint32_t> allowed;
    if (seq.matcher != nullptr) {
      structured::TokenMasker& masker = Masker();
      masker.Fill(seq.matcher.get(), token_mask_);
      allowed = token_mask_;
      // A complete text that cannot go on allows only EOS, whatever min_tokens says.
      if (!seq.matcher->CanContinue())
        banned_.clear();
    }
    sampler_.Sample(logits.subspan(row * vocab, vocab), r.sampling, &seq.sampling, &result, banned_,
                    allowed);
    if (seq.matcher != nullptr && !token_masker_->vocab().is_eos(result.token) &&
        !seq.matcher->AcceptBytes(token_masker_->vocab().bytes(result.token))) {
      // Only possible when no allowed token had a finite logit.
      SY_LOG_WARN("request {}: token {} is outside its structured-output grammar", r.request_id,
                  result.token);
    }
    seq.sampling.AppendOutput(result.token);
    absl::Status appended = table_.AppendToken(id, result.token);
    SY_CHECK(appended.ok());
    ++seq.num_generated;
    ++req->num_generated;
    ++generated;

    if (options_.metrics != nullptr) {
      if (!req->first_token.has_value()) {
        options_.metrics->ObserveTimeToFirstToken(Seconds(now - r.arrival_time));
        options_.metrics->AddPromptTokens(static_cast<int64_t>(r.prompt_tokens.size()),
                                          req->num_cached_tokens, req->num_loaded_tokens);
      } else if (seq.last_token.has_value()) {
        options_.metrics->ObserveInterTokenLatency(Seconds(now - *seq.last_token));
      }
    }
    if (!req->first_token.has_value())
      req->first_token = now;
    req->last_token = now;
    seq.last_token = now;

    int32_t& slot = req->pending_slot[static_cast<size_t>(seq.index)];
    if (slot < 0) {
      slot = static_cast<int32_t>(req->pending.sequences.size());
      req->pending.sequences.push_back({});
      req->pending.sequences.back().index = seq.index;
    }
    SequenceUpdate& update = req->pending.sequences[static_cast<size_t>(slot)];
    update.token_ids.push_back(result.token);
    if (r.sampling.logprobs.has_value())
      update.logprobs.push_back(result);
    const bool context_full = table_.Find(id)->num_tokens() >= options_.max_model_len;
    SequenceStep step =
        seq.output.Append(result.token, seq.num_generated, context_full, &update.text);
    if (!req->touched) {
      req->touched = true;
      touched_.push_back(req);
    }
    if (step.finish_reason.has_value()) {
      update.finish_reason = step.finish_reason;
      update.stop_reason = std::move(step.stop_reason);
      req->last_finish = *step.finish_reason;
      FinishSequence(seq, /*completed=*/true);
    }
  }
  if (options_.metrics != nullptr)
    options_.metrics->AddGenerationTokens(generated);
}

void EngineCore::ProcessPromptLogprobs(std::span<const float> logits) {
  const auto vocab = static_cast<size_t>(runner_->limits().vocab_size);
  size_t row = 0;
  for (const ScheduledSeq& s : prompt_logit_seqs_) {
    RequestState* req = seqs_.at(s.id)->request;
    const EngineRequest& r = req->request;
    for (int32_t i = 0; i < s.num_prompt_logits; ++i, ++row) {
      // Position p's logits predict prompt token p + 1.
      SampleResult& entry = req->pending.prompt_logprobs.emplace_back();
      entry.token = r.prompt_tokens[static_cast<size_t>(s.prompt_logits_begin) + i + 1];
      sampler_.ComputeLogprobs(logits.subspan(row * vocab, vocab), *r.prompt_logprobs, &entry);
    }
    if (!req->touched) {
      req->touched = true;
      touched_.push_back(req);
    }
  }
}

structured::TokenMasker& EngineCore::Masker() {
  if (token_masker_ == nullptr) {
    // Built on first use: most engines never see a structured-output request.
    const int64_t vocab = runner_->limits().vocab_size;
    token_vocab_ = std::make_unique<structured::TokenVocabulary>(*tokenizer_, vocab, eos_ids_);
    token_masker_ = std::make_unique<structured::TokenMasker>(token_vocab_.get());
    token_mask_.assign(structured::MaskWords(vocab), 0);
  }
  return *token_masker_;
}

void EngineCore::Report() {
  std::vector<std::string> done;
  const Clock::time_point now = Clock::now();
  for (RequestState* req : touched_) {
    RequestUpdate update = std::move(req->pending);
    req->pending = RequestUpdate{};
    req->pending.num_prompt_tokens = update.num_prompt_tokens;
    std::fill(req->pending_slot.begin(), req->pending_slot.end(), -1);
    req->touched = false;
    update.num_cached_tokens = req->num_cached_tokens;
    update.finished = req->num_unfinished == 0;
    req->last_update = now;
    if (update.finished) {
      done.push_back(req->request.request_id);
      // The id is free again once its client has the last update.
      base::MutexLock lock(&mu_);
      in_flight_.erase(req->request.request_id);
    }
    req->callback(std::move(update));
  }
  touched_.clear();
  for (const std::string& id : done) {
    auto it = requests_.find(id);
    RequestState* req = it->second.get();
    if (options_.metrics != nullptr) {
      const EngineRequest& r = req->request;
      FinishedRequestStats stats;
      stats.finish_reason = req->last_finish;
      stats.e2e_latency_s = Seconds(now - r.arrival_time);
      if (req->first_scheduled.has_value()) {
        stats.queued_time_s = Seconds(*req->first_scheduled - r.arrival_time);
        stats.inference_time_s = Seconds(req->last_token - *req->first_scheduled);
        if (req->first_token.has_value())
          stats.prefill_time_s = Seconds(*req->first_token - *req->first_scheduled);
      }
      if (req->first_token.has_value()) {
        stats.decode_time_s = Seconds(req->last_token - *req->first_token);
        if (req->num_generated > 1) {
          stats.mean_time_per_output_token_s =
              stats.decode_time_s / static_cast<double>(req->num_generated - 1);
        }
      }
      stats.num_prompt_tokens = static_cast<int64_t>(r.prompt_tokens.size());
      stats.num_generation_tokens = req->num_generated;
      stats.num_cached_tokens = req->num_cached_tokens;
      for (SeqId seq : req->seqs) {
        stats.max_num_generation_tokens =
            std::max(stats.max_num_generation_tokens, seqs_.at(seq)->num_generated);
      }
      stats.max_tokens_param = r.stop.max_tokens;
      stats.n_param = r.n;
      options_.metrics->RecordFinishedRequest(stats);
    }
    for (SeqId seq : req->seqs)
      seqs_.erase(seq);
    requests_.erase(it);
  }
}

void EngineCore::PublishEvents() {
  std::vector<kvx::KvCacheEvent> events = kv_->TakeEvents();
  if (offloader_ != nullptr) {
    for (kvx::KvCacheEvent& event : offloader_->TakeEvents())
      events.push_back(std::move(event));
  }
  if (options_.kv_events == nullptr || events.empty())
    return;
  kvx::KvEventBatch batch;
  batch.ts = UnixSeconds();
  batch.events = std::move(events);
  // vLLM's publisher stamps the data-parallel rank; one engine is rank 0.
  batch.data_parallel_rank = 0;
  options_.kv_events->Publish(std::move(batch));
}

void EngineCore::PublishTierStats() {
  reported_tier_generation_ = offloader_->generation();
  std::vector<KvTierStats> tiers = offloader_->stats();
  if (options_.metrics != nullptr) {
    for (const KvTierStats& tier : tiers)
      options_.metrics->SetKvTier(tier);
  }
  base::MutexLock lock(&mu_);
  snapshot_.kv_tiers = std::move(tiers);
}

void EngineCore::UpdateGauges() {
  const PrefixCacheStats& stats = kv_->prefix_cache_stats();
  if (options_.metrics != nullptr) {
    options_.metrics->SetSchedulerState(static_cast<int64_t>(table_.running().size()),
                                        static_cast<int64_t>(table_.waiting().size()),
                                        kv_->usage());
    options_.metrics->AddPrefixCache(stats.queries - reported_prefix_stats_.queries,
                                     stats.hits - reported_prefix_stats_.hits);
  }
  reported_prefix_stats_ = stats;
  // Tier stats are copied (and a shared index locked) only when something changed.
  if (offloader_ != nullptr && offloader_->generation() != reported_tier_generation_)
    PublishTierStats();
  base::MutexLock lock(&mu_);
  snapshot_.prefix_cache_queries = stats.queries;
  snapshot_.prefix_cache_hits = stats.hits;
  snapshot_.num_running = static_cast<int64_t>(table_.running().size());
  snapshot_.num_waiting = static_cast<int64_t>(table_.waiting().size());
  snapshot_.num_requests = static_cast<int64_t>(requests_.size());
  snapshot_.num_free_blocks = kv_->pool().num_free_blocks();
}

}  // namespace switchyard::engine
