#include "router/router_server.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "fmt/format.h"
#include "prometheus/text_serializer.h"

#include "api/error.h"
#include "api/response_writer.h"
#include "base/json.h"
#include "base/logging.h"
#include "base/random_bytes.h"
#include "base/recycling_allocator.h"
#include "base/status_macros.h"
#include "base/thread_name.h"
#include "kvx/kv_event_subscriber.h"
#include "net/http_client.h"
#include "net/http_server.h"
#include "net/route_table.h"
#include "router/dns_pool_resolver.h"
#include "router/endpoint_scraper.h"
#include "router/endpoint_table.h"
#include "router/engine_models.h"
#include "router/flow/fleet_gate.h"
#include "router/flow/flow_controller.h"
#include "router/flow/flow_metrics.h"
#include "router/flow/tenant_limiter.h"
#include "router/flow/tenant_table.h"
#include "router/internal/drain.h"
#include "router/internal/json_fields_rewrite.h"
#include "router/internal/proxy_call.h"
#include "router/kube_pool_resolver.h"
#include "router/prefix/block_keys.h"
#include "router/prefix/kv_event_indexer.h"
#include "router/prompt_tokenizer.h"
#include "router/request_id.h"
#include "router/router_metrics.h"
#include "router/scheduling/picker_config.h"

namespace switchyard::router {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::string_view kJson = "application/json";
// The longest an endpoint's 503 Retry-After keeps it out of the snapshots.
constexpr std::chrono::seconds kMaxRefusal{30};
// How often flow control is pumped without news (TTLs; saturation between scrapes).
constexpr std::chrono::milliseconds kPumpInterval{5};

// Request headers forwarded upstream; the rest (hop-by-hop, routing hints a client must
// not set) stay here. x-request-id goes up once, as the router settled it.
// A client's routing headers (llm-d's x-gateway-destination-endpoint) are never honoured:
// the scheduler picks; x-session-token counts only once a session plugin verified its HMAC.
// Nor do the router's own hints to engines go up as a client sent them
// (x-kv-cache-source-host-port, x-prefiller-host-port): an engine would dial the peer named.
// Authorization goes up apart (ProxyRequest::client_authorization): an endpoint with
// credentials gets its own instead.
bool ForwardRequestHeader(std::string_view name) {
  return name == "content-type" || name == "accept" || name.starts_with("openai-");
}

std::vector<std::string> PoolNames(const std::vector<PoolConfig>& pools) {
  std::vector<std::string> names;
  names.reserve(pools.size());
  for (const PoolConfig& pool : pools)
    names.push_back(pool.name);
  return names;
}

// Whom a request is charged to, and what its end must give back.
struct TenantAccount {
  const flow::Tenant* tenant = nullptr;
  flow::TenantLimiter* limiter = nullptr;
  // Flow control's, when the request goes through it (null: the gate is off).
  flow::FlowController* flow = nullptr;
  std::string fairness_id;
  int32_t priority = 0;
};

// The scheduling of one proxied request: the profile picks from a fresh snapshot per attempt,
// without the endpoints already tried. With a disagg-profile-handler that profile is the
// decode one, and its decider may have the prefill profile pick a prefill endpoint for the
// attempt too (from the whole snapshot but the decode pick). An attempt without a prefill
// endpoint gets a KV source when the profile's p2p-source-producer names one.
class RequestRouting final : public internal::ProxyRouting {
 public:
  // `ready`: when the request was ready to schedule (a clock read just made), the first
  // pick's start.
  // `ticket`: the request counts as in flight for the drain until this routing (and the
  // call that owns it) is gone.
  RequestRouting(const SchedulingProfile* profile, EndpointTable* table, RouterMetrics* metrics,
                 const PluginSet* plugins, std::vector<int32_t> prompt_tokens,
                 Clock::time_point ready, std::unique_ptr<internal::Drain::Ticket> ticket,
                 TenantAccount account)
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
  // The request's end, however it ended: its tenant's concurrency and its flow's in-flight
  // count (when it was dispatched) go down.
  ~RequestRouting() override {
    if (account_.flow != nullptr && dispatched_)
      account_.flow->Finished(account_.fairness_id, account_.priority, Clock::now());
    if (started_)
      account_.limiter->Finish(*account_.tenant);
  }

  // Flow control dispatched the request: its end is the flow's.
  void Dispatched() { dispatched_ = true; }
  // The limiter's TryStart counted it (flow control off): its end is the tenant's.
  void MarkStarted() { started_ = true; }

  // What the plugins see; its prompt_tokens view this object's tokens.
  SchedulingRequest& request() { return request_; }
  internal::Drain::Ticket& ticket() { return *ticket_; }

  std::optional<internal::ProxyTarget> NextTarget(absl::Span<const std::string> tried) override {
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
    internal::ProxyTarget target{picked.name,          picked.address, picked.pool,
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

  void Picked(const internal::ProxyTarget& target) override {
    if (last_pick_ == nullptr || last_pick_->name != target.name)
      return;
    profile_->NotifyPicked(request_, cycle_, *last_pick_);
    if (prefill_pick_ != nullptr && target.prefill.has_value())
      disagg_->prefill->NotifyPicked(request_, prefill_cycle_, *prefill_pick_);
  }

  std::string SessionToken(std::string_view endpoint) override {
    const SessionTokenCodec* codec = plugins_->session_codec();
    return codec != nullptr ? codec->Issue(endpoint) : std::string();
  }

  void AttemptEnded(const internal::ProxyTarget& target, bool failed) override {
    if (!failed) {
      EndpointTable::ReportRequestSuccess(target.load);
    } else if (table_->ReportRequestFailure(target.name, target.load, Clock::now())) {
      target.metrics->Ejected();
      SY_LOG_WARN("router: outlier detection ejected {} (requests failing in a row)",
                  std::string(target.name));
    }
  }

  // The disagg-profile-handler's second step, after the decode profile picked `decode`:
  // nullopt when the decider keeps the prompt on it or no prefill endpoint is found.
  std::optional<internal::ProxyTarget::Prefill> PickPrefill(const Endpoint& decode,
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
    return internal::ProxyTarget::Prefill{prefill_pick_->name, prefill_pick_->address,
                                          prefill_pick_->authorization, prefill_pick_->load.get()};
  }

  void Refused(const internal::ProxyTarget& target, std::chrono::seconds retry_after) override {
    // Bounded: a Retry-After far off must not keep a restarted engine at this address out.
    table_->ReportRefusing(std::string(target.name),
                           Clock::now() + std::min(retry_after, kMaxRefusal));
  }

  void Generated(int64_t tokens) override {
    account_.limiter->ChargeGenerated(*account_.tenant, tokens, Clock::now());
  }

 private:
  const SchedulingProfile* const profile_;
  const DisaggProfiles* const disagg_;  // null: no prefill/decode disaggregation
  EndpointTable* const table_;
  RouterMetrics* const metrics_;
  const PluginSet* const plugins_;
  const std::vector<int32_t> prompt_tokens_;
  SchedulingRequest request_;
  // The state of the last pick's cycle, the snapshot it picked from and its pick, for Picked.
  CycleState cycle_;
  std::shared_ptr<const std::vector<Endpoint>> snapshot_;
  const Endpoint* last_pick_ = nullptr;
  // The prefill profile's cycle and pick, when the last pick has one.
  CycleState prefill_cycle_;
  const Endpoint* prefill_pick_ = nullptr;
  // The last pick's KV source (ProxyTarget::kv_source views it); empty: none.
  std::string kv_source_;
  std::optional<Clock::time_point> first_start_;  // until the first pick
  const std::unique_ptr<internal::Drain::Ticket> ticket_;
  const TenantAccount account_;
  bool dispatched_ = false;
  bool started_ = false;
};

class RouterServerImpl final : public RouterServer {
 public:
  explicit RouterServerImpl(RouterConfig config)
      : config_(std::move(config)),
        table_(std::chrono::milliseconds(config_.staleness_ms), config_.outlier_detection),
        metrics_(config_.model, PoolNames(config_.pools)),
        routes_(Routes(), &api::TransportErrorBody) {}
  ~RouterServerImpl() override { Stop(); }

  absl::Status Init();
  int port() const override { return server_->port(); }
  void StartDrain() override;
  bool WaitDrained(Clock::time_point deadline) override {
    return drain_.gate().AwaitIdle(deadline, true);
  }
  void InterruptDrain() override { drain_.gate().Interrupt(); }
  void AbortInFlight() override {
    // Queued requests first (503 rejected-shutting-down), so that none is dispatched into a
    // router that is stopping; then those in flight.
    if (flow_ != nullptr)
      flow_->Shutdown();
    drain_.AbortAll();
  }
  void Stop() override;

 private:
  // The handlers take the request apart (its strings move out): by reference, so that it is
  // not moved whole again on the way (seven strings and the header list a move).
  using Handler = void (RouterServerImpl::*)(net::HttpRequest& request,
                                             std::shared_ptr<net::HttpResponder> responder);
  // The routes, each bound to this server.
  std::vector<net::RouteTable::Route> Routes();
  void Completion(net::HttpRequest& request, std::shared_ptr<net::HttpResponder> responder) {
    Generate(request, std::move(responder), false);
  }
  void ChatCompletion(net::HttpRequest& request, std::shared_ptr<net::HttpResponder> responder) {
    Generate(request, std::move(responder), true);
  }
  void Generate(net::HttpRequest& request, std::shared_ptr<net::HttpResponder> responder,
                bool chat);
  void Health(net::HttpRequest& request, std::shared_ptr<net::HttpResponder> responder);
  // GET /ready: /health's answer, or 503 while a Kubernetes-discovered pool has not listed
  // its pods yet (its members are not known).
  void Ready(net::HttpRequest& request, std::shared_ptr<net::HttpResponder> responder);
  void DebugEndpoints(net::HttpRequest& request, std::shared_ptr<net::HttpResponder> responder);
  // GET /debug/flows: flow control's bands and queues ({"enabled": false} when it is off).
  void DebugFlows(net::HttpRequest& request, std::shared_ptr<net::HttpResponder> responder);
  // Answers a request the router refuses itself (401, 400, 403, 429, 503) and counts it for
  // `tenant` under `reason` (also the x-llm-d-request-dropped-reason header of a 429 or a
  // 503), with a Retry-After when `retry_after` is set. `counted`: the reason is counted
  // elsewhere already (the limiter's refusals).
  void Refuse(net::HttpResponder& responder, const absl::Status& error, std::string_view tenant,
              std::string_view reason, std::optional<std::chrono::seconds> retry_after,
              std::string request_id, Clock::time_point arrival, bool counted = false);
  // Sends the request on its way: to the engines at once (flow control off, after the
  // tenant's concurrency check), or into flow control's queues.
  void Dispatch(std::shared_ptr<internal::ProxyCall> call, RequestRouting* routing,
                std::shared_ptr<net::HttpResponder> responder, const flow::Tenant& tenant,
                int32_t priority, std::string fairness_id, std::string request_id,
                int64_t cost_tokens, int64_t bytes, std::optional<Clock::time_point> slo_deadline,
                Clock::time_point arrival);
  // Pumps flow control every kPumpInterval (TTLs, and room that ended requests or scrapes
  // made) until Stop.
  void PumpFlows();
  // GET /v1/models: the configured model with what the healthy engines report of it.
  void Models(net::HttpRequest& request, std::shared_ptr<net::HttpResponder> responder);
  void Metrics(net::HttpRequest& request, std::shared_ptr<net::HttpResponder> responder);
  // The KV event streams' state into the table (and the index's view of them).
  void ReportKvEvents();

  const RouterConfig config_;
  EndpointTable table_;
  RouterMetrics metrics_;
  // 405 with Allow for a known path with another method, 404 for an unknown path (both with
  // OpenAI error bodies, as the engine answers).
  const net::RouteTable routes_;
  // Before the loops and clients: calls in flight (whose tickets it counts) and scrape
  // callbacks end before it does.
  internal::Drain drain_;
  EngineModels engine_models_;
  std::unique_ptr<DnsPoolResolver> dns_;
  std::unique_ptr<KubePoolResolver> kube_;
  std::unique_ptr<PluginSet> plugins_;
  const SchedulingProfile* profile_ = nullptr;
  std::unique_ptr<PromptTokenizer> prompt_tokenizer_;
  std::unique_ptr<KvEventIndexer> indexer_;
  std::unique_ptr<kvx::KvEventSubscriber> subscriber_;
  // Tenants (router_config.h `tenants:`): every request has one, the anonymous one without
  // a tenants section.
  std::unique_ptr<flow::TenantTable> tenants_;
  std::unique_ptr<flow::TenantLimiter> limiter_;
  flow::FlowMetrics flow_metrics_;
  // Flow control (the flowControl feature gate); null when off.
  std::unique_ptr<flow::FleetGate> gate_;
  std::unique_ptr<flow::FlowController> flow_;
  base::Mutex pump_mu_;
  base::CondVar pump_cv_;
  bool stopping_ ABSL_GUARDED_BY(pump_mu_) = false;
  std::thread pump_;
  // The HTTP server and the upstream client share these loops: a request's upstream call
  // runs on the thread that took the request, with no hand-off between threads.
  std::shared_ptr<net::EventLoops> loops_;
  std::unique_ptr<net::HttpClient> client_;
  std::unique_ptr<net::HttpServer> server_;
  std::unique_ptr<EndpointScraper> scraper_;
};

std::vector<net::RouteTable::Route> RouterServerImpl::Routes() {
  auto route = [this](std::string method, std::string path, Handler handler) {
    return net::RouteTable::Route{
        std::move(method), std::move(path),
        [this, handler](net::HttpRequest& request, std::shared_ptr<net::HttpResponder> r) {
          (this->*handler)(request, std::move(r));
        }};
  };
  return {route("POST", "/v1/completions", &RouterServerImpl::Completion),
          route("POST", "/v1/chat/completions", &RouterServerImpl::ChatCompletion),
          route("GET", "/health", &RouterServerImpl::Health),
          route("GET", "/ready", &RouterServerImpl::Ready),
          route("GET", "/debug/endpoints", &RouterServerImpl::DebugEndpoints),
          route("GET", "/debug/flows", &RouterServerImpl::DebugFlows),
          route("GET", "/v1/models", &RouterServerImpl::Models),
          route("GET", "/metrics", &RouterServerImpl::Metrics)};
}

absl::Status RouterServerImpl::Init() {
  PluginSetOptions plugin_options;
  if (!config_.session_token_secret_env.empty()) {
    if (const char* secret = std::getenv(config_.session_token_secret_env.c_str()))
      plugin_options.session_token_secret = secret;
  }
  SY_ASSIGN_OR_RETURN(plugins_,
                      PluginSet::FromYaml(config_.scheduling_yaml, "scheduling", plugin_options));
  profile_ = plugins_->primary_profile();
  // The router's secret keys the tenants' cache salts too (domain-separated from the session
  // tokens'): replicas with one secret give a tenant one salt.
  const std::string salt_secret = plugin_options.session_token_secret.empty()
                                      ? base::RandomBytes(32)
                                      : plugin_options.session_token_secret;
  tenants_ = std::make_unique<flow::TenantTable>(config_.tenants, salt_secret);
  limiter_ = std::make_unique<flow::TenantLimiter>(*tenants_);
  if (const flow::FlowControlConfig& fc = plugins_->flow_control(); fc.enabled) {
    gate_ = std::make_unique<flow::FleetGate>(
        &table_, plugins_->saturation_detector(fc.saturation_detector));
    flow::FlowControllerOptions flow_options;
    flow_options.on_dispatched = [this](std::string_view flow_id, int32_t priority,
                                        double seconds) {
      flow_metrics_.QueueTime(flow_id, priority, "dispatched", seconds);
    };
    flow_ = std::make_unique<flow::FlowController>(fc, gate_.get(), std::move(flow_options));
    pump_ = std::thread([this] { PumpFlows(); });
  }
  SY_ASSIGN_OR_RETURN(prompt_tokenizer_, PromptTokenizer::FromConfig(config_));
  bool any_dns = false;
  bool any_kube = false;
  for (const PoolConfig& pool : config_.pools) {
    any_dns = any_dns || !pool.dns.empty();
    any_kube = any_kube || pool.inference_pool.has_value();
    std::vector<EndpointSpec> specs;
    for (const StaticEndpointConfig& e : pool.endpoints)
      specs.push_back(e.spec);
    table_.SetPoolMembers(pool.name, specs);
  }
  if (any_dns) {
    dns_ = std::make_unique<DnsPoolResolver>(config_.pools, &table_);
    dns_->Start();
  }
  if (any_kube) {
    kube_ = std::make_unique<KubePoolResolver>(config_.pools, &table_);
    SY_RETURN_IF_ERROR(kube_->Start());
  }
  if (plugins_->precise_index() != nullptr) {
    indexer_ =
        std::make_unique<KvEventIndexer>(plugins_->precise_index(), PrefixSeed(config_.model, ""));
    SY_ASSIGN_OR_RETURN(subscriber_,
                        kvx::KvEventSubscriber::Start(
                            [this](const std::string& source, const kvx::KvEventBatch& batch) {
                              indexer_->Apply(source, batch);
                            }));
    for (const PoolConfig& pool : config_.pools) {
      for (const StaticEndpointConfig& e : pool.endpoints) {
        if (e.kv_events.has_value()) {
          subscriber_->AddSource({e.spec.name, e.kv_events->endpoint, e.kv_events->replay_endpoint,
                                  e.kv_events->topic});
        }
      }
    }
  }
  SY_ASSIGN_OR_RETURN(loops_, net::EventLoops::Start(config_.threads, "sy-http"));
  net::HttpClientOptions client_options;
  client_options.connect_timeout = std::chrono::milliseconds(config_.connect_timeout_ms);
  client_options.first_byte_timeout = std::chrono::milliseconds(config_.first_byte_timeout_ms);
  client_options.idle_timeout = std::chrono::milliseconds(config_.idle_timeout_ms);
  SY_ASSIGN_OR_RETURN(client_, net::HttpClient::Start(client_options, loops_));
  net::HttpServerOptions server_options;
  server_options.host = config_.host;
  server_options.port = config_.port;
  server_options.max_connections = static_cast<size_t>(config_.max_connections);
  server_options.max_connections_per_client =
      static_cast<size_t>(config_.max_connections_per_client);
  server_options.error_body = &api::TransportErrorBody;
  SY_ASSIGN_OR_RETURN(
      server_, net::HttpServer::Start(
                   server_options,
                   [this](net::HttpRequest&& request, std::shared_ptr<net::HttpResponder> r) {
                     routes_.Dispatch(request, std::move(r));
                   },
                   loops_));
  EndpointScraperOptions scraper_options;
  scraper_options.model = config_.model;
  scraper_options.interval = std::chrono::milliseconds(config_.scrape_interval_ms);
  scraper_options.timeout = std::chrono::milliseconds(config_.scrape_timeout_ms);
  scraper_options.on_metrics = [this](const std::string& endpoint, const EndpointMetrics& m) {
    plugins_->SetEndpointKvCache(endpoint, m.num_gpu_blocks, m.block_size);
  };
  scraper_options.after_round = [this] {
    ReportKvEvents();
    if (flow_ != nullptr)  // fresh metrics may show room
      flow_->Pump(Clock::now());
  };
  SY_ASSIGN_OR_RETURN(scraper_,
                      EndpointScraper::Start(std::move(scraper_options), &table_, &engine_models_));
  return absl::OkStatus();
}

void RouterServerImpl::StartDrain() {
  drain_.gate().BeginDrain();
  SY_LOG_INFO("router: draining: /health answers 503, new requests get 503 with Retry-After");
}

void RouterServerImpl::Stop() {
  if (pump_.joinable()) {
    {
      base::MutexLock lock(&pump_mu_);
      stopping_ = true;
    }
    pump_cv_.NotifyAll();
    pump_.join();
    flow_->Shutdown();  // what still waits gets its 503 while the server can send it
  }
  if (scraper_ != nullptr)
    scraper_->Stop();
  if (dns_ != nullptr)
    dns_->Stop();
  if (kube_ != nullptr)
    kube_->Stop();
  if (server_ != nullptr)
    server_->Stop();
  if (client_ != nullptr)
    client_->Stop();
  if (loops_ != nullptr)
    loops_->Stop();
  if (subscriber_ != nullptr)
    subscriber_->Stop();
}

void RouterServerImpl::ReportKvEvents() {
  if (subscriber_ == nullptr)
    return;
  for (const PoolConfig& pool : config_.pools) {
    for (const StaticEndpointConfig& e : pool.endpoints) {
      if (e.kv_events.has_value())
        table_.ReportKvEvents(e.spec.name, subscriber_->stats(e.spec.name));
    }
  }
  metrics_.SetKvEventSubscriberRestarts(subscriber_->restarts());
}

void RouterServerImpl::Generate(net::HttpRequest& request,
                                std::shared_ptr<net::HttpResponder> responder, bool chat) {
  const Clock::time_point arrival = Clock::now();
  std::string request_id = RequestIdOf(request);
  // Counted in flight from here, so that the drain also waits for it while it is tokenized.
  std::unique_ptr<internal::Drain::Ticket> admitted = drain_.Admit();
  if (admitted == nullptr) {
    // Envoy's drain: refused at once, and the connection closed, so that the client (or the
    // load balancer in front) goes to another router.
    metrics_.Unrouted().RequestFinished(503, SecondsSince(arrival));
    responder->Send(
        503, kJson,
        api::ErrorBody(absl::UnavailableError("The router is shutting down; retry the request.")),
        {{"retry-after", std::to_string(internal::kRetryAfterSeconds)},
         {"connection", "close"},
         {"x-request-id", std::move(request_id)}});
    return;
  }
  // Who sent it, and at which priority.
  absl::StatusOr<const flow::Tenant*> tenant =
      tenants_->Authenticate(request.Header("authorization"));
  if (!tenant.ok()) {
    Refuse(*responder, tenant.status(), "", "unauthenticated", std::nullopt, std::move(request_id),
           arrival);
    return;
  }
  int32_t priority = 0;
  if (!config_.tenants.objectives.empty()) {
    absl::StatusOr<int32_t> p =
        tenants_->Priority(**tenant, request.Header("x-llm-d-inference-objective"));
    if (!p.ok()) {
      Refuse(*responder, p.status(), (*tenant)->id,
             absl::IsPermissionDenied(p.status()) ? "forbidden-objective" : "unknown-objective",
             std::nullopt, std::move(request_id), arrival);
      return;
    }
    priority = *p;
  }
  absl::StatusOr<TokenizedRequest> tokenized = prompt_tokenizer_->Tokenize(request.body, chat);
  const Clock::time_point tokenized_at = Clock::now();
  metrics_.ObserveTokenize(SecondsBetween(arrival, tokenized_at));
  if (!tokenized.ok()) {
    const int http_status = api::HttpErrorFor(tokenized.status()).http_status;
    metrics_.Unrouted().RequestFinished(http_status, SecondsBetween(arrival, tokenized_at));
    responder->Send(http_status, kJson, api::ErrorBody(tokenized.status()),
                    {{"x-request-id", std::move(request_id)}});
    return;
  }
  const int64_t prompt_tokens = static_cast<int64_t>(tokenized->prompt_tokens.size());
  if (std::optional<flow::Refusal> refusal =
          limiter_->Admit(**tenant, prompt_tokens, tokenized_at)) {
    const std::string_view reason = flow::RefusalReasonName(refusal->reason);
    Refuse(*responder,
           absl::ResourceExhaustedError(
               refusal->reason == flow::RefusalReason::kExceedsTokenQuota
                   ? fmt::format("The prompt ({} tokens) is larger than the tenant's token quota "
                                 "for a whole minute.",
                                 prompt_tokens)
                   : fmt::format("Tenant {} is over its quota ({}); retry later.", (*tenant)->id,
                                 reason)),
           (*tenant)->id, reason, refusal->retry_after, std::move(request_id), arrival,
           /*counted=*/true);
    return;
  }
  // Each tenant's own prefix cache: its salt in place of the client's.
  std::string cache_salt = std::move(tokenized->cache_salt);
  if (std::optional<std::string> salt = tenants_->CacheSalt(
          **tenant,
          cache_salt.empty() ? std::nullopt : std::optional<std::string_view>(cache_salt))) {
    absl::StatusOr<std::string> body = internal::WithCacheSalt(request.body, *salt);
    if (!body.ok()) {  // the tokenizer parsed it: not reached
      Refuse(*responder, body.status(), (*tenant)->id, "bad-request", std::nullopt,
             std::move(request_id), arrival);
      return;
    }
    request.body = *std::move(body);
    cache_salt = *std::move(salt);
  }
  std::string fairness_id =
      tenants_->FairnessId(**tenant, request.Header("x-llm-d-inference-fairness-id"));
  std::optional<Clock::time_point> slo_deadline;
  if (std::optional<std::string_view> slo = request.Header("x-llm-d-slo-ttft-ms")) {
    int64_t ms = 0;
    if (absl::SimpleAtoi(absl::string_view(slo->data(), slo->size()), &ms) && ms > 0)
      slo_deadline = arrival + std::chrono::milliseconds(ms);
  }
  const bool stream = tokenized->stream;
  const int64_t cost_tokens = prompt_tokens + tokenized->max_tokens.value_or(0);
  TenantAccount account{*tenant, limiter_.get(), flow_.get(), fairness_id, priority};
  auto routing = std::make_unique<RequestRouting>(profile_, &table_, &metrics_, plugins_.get(),
                                                  std::move(tokenized->prompt_tokens), tokenized_at,
                                                  std::move(admitted), std::move(account));
  RequestRouting* routing_view = routing.get();
  SchedulingRequest& sched = routing->request();
  sched.model = config_.model;
  sched.cache_salt = std::move(cache_salt);
  if (std::optional<std::string_view> t = request.Header("x-session-token"))
    sched.session_token = std::string(*t);
  if (std::optional<std::string_view> id = request.Header("x-session-id"))
    sched.session_id = std::string(*id);

  internal::ProxyRequest proxy;
  proxy.http.method = std::move(request.method);
  proxy.http.target = std::move(request.target);
  // The client's header list, cut to what goes upstream: no list of its own (it has room for
  // x-request-id unless every header is forwarded). A tenant's key is the router's: it goes
  // no further.
  const bool keyed = !(*tenant)->anonymous;
  proxy.http.headers = std::move(request.headers);
  std::erase_if(proxy.http.headers, [&proxy, keyed](net::HeaderList::value_type& header) {
    if (header.first == "authorization" && proxy.client_authorization.empty() && !keyed)
      proxy.client_authorization = std::move(header.second);
    return !ForwardRequestHeader(header.first);
  });
  proxy.request_id_header = proxy.http.headers.size();
  proxy.http.headers.emplace_back("x-request-id", request_id);
  const int64_t bytes = static_cast<int64_t>(request.body.size());
  proxy.http.body = std::move(request.body);
  proxy.arrival = arrival;
  proxy.prompt_tokens = prompt_tokens;
  proxy.stream = stream;
  proxy.prefill_timeout = std::chrono::milliseconds(config_.request_timeout_ms);
  // A buffered response's head comes with its whole completion, after however long the
  // request queues in a healthy engine: its wait is bounded by the request timeout, and a
  // dead or frozen engine is found by health checks (which wake the request to retry it).
  if (!stream)
    proxy.http.first_byte_timeout = std::chrono::milliseconds(config_.request_timeout_ms);
  internal::Drain::Ticket& ticket = routing->ticket();
  auto call = std::allocate_shared<internal::ProxyCall>(
      base::RecyclingAllocator<internal::ProxyCall>(), std::move(proxy), responder, client_.get(),
      &metrics_, config_.max_retries, std::move(routing));
  ticket.Attach(call);
  Dispatch(std::move(call), routing_view, std::move(responder), **tenant, priority,
           std::move(fairness_id), std::move(request_id), cost_tokens, bytes, slo_deadline,
           arrival);
}

void RouterServerImpl::Dispatch(std::shared_ptr<internal::ProxyCall> call, RequestRouting* routing,
                                std::shared_ptr<net::HttpResponder> responder,
                                const flow::Tenant& tenant, int32_t priority,
                                std::string fairness_id, std::string request_id,
                                int64_t cost_tokens, int64_t bytes,
                                std::optional<Clock::time_point> slo_deadline,
                                Clock::time_point arrival) {
  if (flow_ == nullptr) {
    if (!limiter_->TryStart(tenant)) {
      Refuse(*responder,
             absl::ResourceExhaustedError(
                 fmt::format("Tenant {} has {} requests running, its limit; retry later.",
                             tenant.id, tenant.limits.max_concurrent)),
             tenant.id, "max-concurrent", std::chrono::seconds(internal::kRetryAfterSeconds),
             std::move(request_id), arrival);
      return;
    }
    routing->MarkStarted();
    call->Start();
    return;
  }
  // Queued: the client's disconnect takes it out of the queue (the call's own close handler
  // replaces this one once it starts).
  auto handle = std::make_shared<std::atomic<int64_t>>(-1);
  responder->OnClose([flow = flow_.get(), handle] {
    if (const int64_t h = handle->load(); h >= 0)
      flow->Cancel(static_cast<flow::FlowController::Handle>(h));
  });
  flow::FlowItem item;
  item.flow_id = fairness_id;
  item.priority = priority;
  item.bytes = bytes;
  item.cost_tokens = cost_tokens;
  item.received = arrival;
  item.slo_deadline = slo_deadline;
  item.limits = {tenant.limits.max_concurrent, tenant.limits.max_queued};
  item.weight = tenant.weight;
  item.dispatch = [call, routing] {
    routing->Dispatched();
    call->Start();
  };
  // The call is never started: dropping it releases its drain ticket.
  item.reject = [this, call, responder, tenant_id = tenant.id, fairness_id = std::move(fairness_id),
                 priority, request_id = std::move(request_id), arrival](flow::DropReason reason) {
    const std::string_view name = flow::DropReasonName(reason);
    flow_metrics_.QueueTime(fairness_id, priority, name, SecondsSince(arrival));
    if (reason == flow::DropReason::kContextCancelled) {
      metrics_.Unrouted().RequestFinished(499, SecondsSince(arrival));
      flow_metrics_.Rejected(tenant_id, name);
      return;  // nobody to answer
    }
    const bool unavailable = reason == flow::DropReason::kShuttingDown || !gate_->HasEndpoints();
    Refuse(*responder,
           unavailable
               ? absl::UnavailableError(
                     fmt::format("No endpoint could take the request in time ({}).", name))
               : absl::ResourceExhaustedError(fmt::format(
                     "The fleet is saturated and the request was shed ({}); retry later.", name)),
           tenant_id, name, std::chrono::seconds(internal::kRetryAfterSeconds), request_id,
           arrival);
  };
  handle->store(static_cast<int64_t>(flow_->Enqueue(std::move(item), Clock::now())));
  if (responder->closed())  // it left before the handle was there to cancel
    flow_->Cancel(static_cast<flow::FlowController::Handle>(handle->load()));
}

void RouterServerImpl::Refuse(net::HttpResponder& responder, const absl::Status& error,
                              std::string_view tenant, std::string_view reason,
                              std::optional<std::chrono::seconds> retry_after,
                              std::string request_id, Clock::time_point arrival, bool counted) {
  const int http_status = api::HttpErrorFor(error).http_status;
  metrics_.Unrouted().RequestFinished(http_status, SecondsSince(arrival));
  if (!counted)
    flow_metrics_.Rejected(tenant, reason);
  net::HeaderList headers = {{"x-request-id", std::move(request_id)}};
  if (http_status == 429 || http_status == 503)
    headers.emplace_back("x-llm-d-request-dropped-reason", reason);
  if (retry_after.has_value())
    headers.emplace_back("retry-after", std::to_string(retry_after->count()));
  responder.Send(http_status, kJson, api::ErrorBody(error), std::move(headers));
}

void RouterServerImpl::PumpFlows() {
  base::SetCurrentThreadName("sy-flow-pump");
  while (true) {
    flow_->Pump(Clock::now());
    base::MutexLock lock(&pump_mu_);
    if (pump_cv_.WaitUntil(&pump_mu_, Clock::now() + kPumpInterval,
                           [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(pump_mu_) { return stopping_; }))
      return;
  }
}

void RouterServerImpl::Health(net::HttpRequest&, std::shared_ptr<net::HttpResponder> responder) {
  // Not ready while draining: whoever routes here stops at once.
  if (drain_.gate().draining()) {
    responder->Send(503, kJson,
                    api::ErrorBody(absl::UnavailableError("The router is shutting down.")),
                    {{"retry-after", std::to_string(internal::kRetryAfterSeconds)}});
  } else {
    responder->Send(200, kJson, "");
  }
}

void RouterServerImpl::Ready(net::HttpRequest& request,
                             std::shared_ptr<net::HttpResponder> responder) {
  if (kube_ != nullptr && !kube_->synced() && !drain_.gate().draining()) {
    responder->Send(503, kJson,
                    api::ErrorBody(absl::UnavailableError(
                        "The router has not listed its Kubernetes-discovered pools' pods yet.")));
    return;
  }
  Health(request, std::move(responder));
}

void RouterServerImpl::DebugEndpoints(net::HttpRequest&,
                                      std::shared_ptr<net::HttpResponder> responder) {
  responder->Send(200, kJson, table_.DebugJson(Clock::now()));
}

void RouterServerImpl::Models(net::HttpRequest&, std::shared_ptr<net::HttpResponder> responder) {
  std::vector<std::string> healthy;
  for (const EndpointStatus& status : table_.Statuses(Clock::now())) {
    if (status.healthy)
      healthy.push_back(status.endpoint.name);
  }
  responder->Send(200, kJson, api::ModelList({engine_models_.Card(config_.model, healthy)}));
}

void RouterServerImpl::Metrics(net::HttpRequest&, std::shared_ptr<net::HttpResponder> responder) {
  const Clock::time_point now = Clock::now();
  metrics_.UpdateEndpoints(table_.Statuses(now));
  if (kube_ != nullptr) {
    for (const KubeWatchStats& s : kube_->stats())
      metrics_.SetKubeWatchCounts(s.pool, s.resource, s.stats.lists, s.stats.watch_restarts,
                                  s.stats.errors);
  }
  std::string text = metrics_.Serialize();
  std::optional<flow::FlowControlSnapshot> flows;
  if (flow_ != nullptr)
    flows = flow_->Snapshot(now);
  text += prometheus::TextSerializer().Serialize(
      flow_metrics_.Collect(flows.has_value() ? &*flows : nullptr,
                            gate_ != nullptr ? gate_->Saturation(now) : 0, limiter_->Usage()));
  responder->Send(200, "text/plain; version=0.0.4", std::move(text));
}

void RouterServerImpl::DebugFlows(net::HttpRequest&,
                                  std::shared_ptr<net::HttpResponder> responder) {
  if (flow_ == nullptr) {
    responder->Send(200, kJson, R"({"enabled":false})");
    return;
  }
  const Clock::time_point now = Clock::now();
  const flow::FlowControlSnapshot s = flow_->Snapshot(now);
  std::string out = fmt::format(
      R"({{"enabled":true,"saturation":{:.4f},"queued":{},"queued_bytes":{},"dispatched_total":{},"rejected_total":{{)",
      gate_->Saturation(now), s.queued, s.queued_bytes, s.dispatched_total);
  for (size_t r = 0; r < flow::kDropReasonCount; ++r) {
    const auto reason = static_cast<flow::DropReason>(r);
    out += fmt::format(R"({}{}:{})", r == 0 ? "" : ",",
                       base::JsonString(flow::DropReasonName(reason)), s.rejected(reason));
  }
  out += R"(},"bands":[)";
  for (size_t i = 0; i < s.bands.size(); ++i) {
    const flow::FlowControlSnapshot::Band& b = s.bands[i];
    out += fmt::format(
        R"({}{{"priority":{},"queued":{},"queued_bytes":{},"in_flight":{},"max_requests":{},"max_bytes":{},"fairness_policy":{},"ordering_policy":{}}})",
        i == 0 ? "" : ",", b.priority, b.queued, b.queued_bytes, b.in_flight, b.max_requests,
        b.max_bytes, base::JsonString(b.fairness_policy), base::JsonString(b.ordering_policy));
  }
  out += R"(],"flows":[)";
  for (size_t i = 0; i < s.flows.size(); ++i) {
    const flow::FlowControlSnapshot::Flow& f = s.flows[i];
    out += fmt::format(
        R"({}{{"fairness_id":{},"priority":{},"queued":{},"queued_bytes":{},"in_flight":{},"oldest_wait_s":{:.4f}}})",
        i == 0 ? "" : ",", base::JsonString(f.flow_id), f.priority, f.queued, f.queued_bytes,
        f.in_flight, f.oldest_wait_seconds);
  }
  out += "]}";
  responder->Send(200, kJson, std::move(out));
}

}  // namespace

absl::StatusOr<std::unique_ptr<RouterServer>> RouterServer::Start(const RouterConfig& config) {
  auto server = std::make_unique<RouterServerImpl>(config);
  SY_RETURN_IF_ERROR(server->Init());
  return server;
}

}  // namespace switchyard::router
