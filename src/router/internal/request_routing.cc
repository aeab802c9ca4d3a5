#include "router/internal/request_routing.h"

#include <algorithm>
#include <utility>

#include "base/logging.h"

namespace switchyard::router::internal {
namespace {

// The longest an endpoint's 503 Retry-After keeps it out of the snapshots.
constexpr std::chrono::seconds kMaxRefusal{30};

}  // namespace

RequestRouting::RequestRouting(const SchedulingProfile* profile, EndpointTable* table,
                               RouterMetrics* metrics, const PluginSet* plugins,
                               std::vector<int32_t> prompt_tokens, Clock::time_point ready,
                               std::unique_ptr<Drain::Ticket> ticket, TenantAccount account)
    : profile_(profile),
      disagg_(plugins->disagg().has_value() ? &*plugins->disagg() : nullptr),
      table_(table),
      metrics_(metrics),
      plugins_(plugins),
      prompt_tokens_(std::move(prompt_tokens)),
      first_start_(ready),
      ticket_(std::move(ticket)),
      account_(std::move(account)) {
  request_.prompt_tokens = prompt_tokens_;
}

RequestRouting::~RequestRouting() {
  if (account_.flow != nullptr && dispatched_)
    account_.flow->Finished(account_.fairness_id, account_.priority, Clock::now());
  if (started_)
    account_.limiter->Finish(*account_.tenant);
}

std::optional<ProxyTarget> RequestRouting::NextTarget(absl::Span<const std::string> tried) {
  thread_local std::mt19937_64 rng(std::random_device{}());
  // The thread's, reused: a pick allocates no list of its own.
  thread_local Candidates candidates;
  Clock::time_point start;
  if (first_start_.has_value()) {
    start = *first_start_;
    first_start_.reset();
  } else {
    start = Clock::now();
  }
  last_pick_ = nullptr;  // they point into the snapshot replaced here
  prefill_pick_ = nullptr;
  snapshot_ = table_->Snapshot(start);
  candidates.clear();
  for (const Endpoint& e : *snapshot_) {
    if (std::find(tried.begin(), tried.end(), e.name) == tried.end())
      candidates.push_back(&e);
  }
  if (candidates.empty())
    return std::nullopt;
  // Each pick is a cycle of its own (a retry's plugins see none of the last one's state).
  cycle_ = CycleState();
  ProfileResult result = profile_->Run(request_, cycle_, candidates, rng);
  metrics_->ObserveSchedule(SecondsSince(start));
  if (result.picked.empty())
    return std::nullopt;
  const Endpoint& picked = *result.picked[0];
  last_pick_ = &picked;
  EndpointRecorder* recorder = picked.load->recorder.load(std::memory_order_acquire);
  if (recorder == nullptr) {
    recorder = &metrics_->Endpoint(picked.name, picked.pool);
    picked.load->recorder.store(recorder, std::memory_order_release);
  }
  if (cycle_.prefix_match.has_value()) {
    recorder->PrefixPrediction(cycle_.prefix_match->prompt_tokens,
                               cycle_.prefix_match->CachedTokens(picked.name));
  }
  ProxyTarget target{picked.name,          picked.address, picked.pool,
                     picked.authorization, recorder,       picked.load.get()};
  if (disagg_ != nullptr)
    target.prefill = PickPrefill(picked, rng);
  kv_source_.clear();
  if (!target.prefill.has_value() && profile_->p2p_source() != nullptr) {
    if (std::optional<std::string> source =
            profile_->p2p_source()->Source(cycle_, *snapshot_, picked)) {
      kv_source_ = *std::move(source);
      target.kv_source = kv_source_;
    }
  }
  return target;
}

void RequestRouting::Picked(const ProxyTarget& target) {
  if (last_pick_ == nullptr || last_pick_->name != target.name)
    return;
  profile_->NotifyPicked(request_, cycle_, *last_pick_);
  if (prefill_pick_ != nullptr && target.prefill.has_value())
    disagg_->prefill->NotifyPicked(request_, prefill_cycle_, *prefill_pick_);
}

std::string RequestRouting::SessionToken(std::string_view endpoint) {
  const SessionTokenCodec* codec = plugins_->session_codec();
  return codec != nullptr ? codec->Issue(endpoint) : std::string();
}

void RequestRouting::AttemptEnded(const ProxyTarget& target, bool failed) {
  if (!failed) {
    EndpointTable::ReportRequestSuccess(target.load);
  } else if (table_->ReportRequestFailure(target.name, target.load, Clock::now())) {
    target.metrics->Ejected();
    SY_LOG_WARN("router: outlier detection ejected {} (requests failing in a row)",
                std::string(target.name));
  }
}

std::optional<ProxyTarget::Prefill> RequestRouting::PickPrefill(const Endpoint& decode,
                                                                std::mt19937_64& rng) {
  if (!disagg_->decider->Disaggregate(request_, cycle_, decode)) {
    metrics_->PdDecision(PdOutcome::kDecodeOnly);
    return std::nullopt;
  }
  thread_local Candidates candidates;
  candidates.clear();
  for (const Endpoint& e : *snapshot_) {
    if (&e != &decode)
      candidates.push_back(&e);
  }
  prefill_cycle_ = CycleState();
  ProfileResult result = disagg_->prefill->Run(request_, prefill_cycle_, candidates, rng);
  if (result.picked.empty()) {
    metrics_->PdDecision(PdOutcome::kFallback);
    return std::nullopt;
  }
  prefill_pick_ = result.picked[0];
  return ProxyTarget::Prefill{prefill_pick_->name, prefill_pick_->address,
                              prefill_pick_->authorization, prefill_pick_->load.get()};
}

void RequestRouting::Refused(const ProxyTarget& target, std::chrono::seconds retry_after) {
  // Bounded: a Retry-After far off must not keep a restarted engine at this address out.
  table_->ReportRefusing(std::string(target.name),
                         Clock::now() + std::min(retry_after, kMaxRefusal));
}

void RequestRouting::Generated(int64_t tokens) {
  account_.limiter->ChargeGenerated(*account_.tenant, tokens, Clock::now());
}

}  // namespace switchyard::router::internal
