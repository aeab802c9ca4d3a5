#include "router/router_server.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <variant>
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
#include "router/extproc/ext_proc_server.h"
#include "router/extproc/routed_request.h"
#include "router/flow/fleet_gate.h"
#include "router/flow/flow_controller.h"
#include "router/flow/flow_metrics.h"
#include "router/flow/tenant_limiter.h"
#include "router/flow/tenant_table.h"
#include "router/internal/drain.h"
#include "router/internal/json_fields_rewrite.h"
#include "router/internal/proxy_call.h"
#include "router/internal/request_routing.h"
#include "router/kube_pool_resolver.h"
#include "router/prefix/block_keys.h"
#include "router/prefix/kv_event_indexer.h"
#include "router/prompt_tokenizer.h"
#include "router/request_id.h"
#include "router/router_metrics.h"
#include "router/scheduling/picker_config.h"
#include "router/shared/replica_sync.h"
#include "router/shared/replica_sync_metrics.h"

namespace switchyard::router {
namespace {

using Clock = std::chrono::steady_clock;
using internal::RequestRouting;
using internal::TenantAccount;
constexpr std::string_view kJson = "application/json";
// How often flow control is pumped without news while requests wait (TTLs; saturation
// between scrapes). With nothing queued the pump sleeps until a request is.
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

// A request admission let through: the routing that will pick for it, and what dispatching
// it needs.
struct Admitted {
  std::unique_ptr<RequestRouting> routing;
  const flow::Tenant* tenant = nullptr;
  int32_t priority = 0;
  std::string fairness_id;
  std::optional<Clock::time_point> slo_deadline;
  int64_t prompt_tokens = 0;
  int64_t cost_tokens = 0;  // prompt plus max_tokens
  int64_t bytes = 0;        // the body's
  bool stream = false;
};

// A request the router answers itself, and how it is counted.
struct Refusal {
  absl::Status error;
  std::string tenant;
  // Counted for `tenant` under it; the x-llm-d-request-dropped-reason of a 429 or a 503.
  // Empty: neither.
  std::string reason;
  std::optional<std::chrono::seconds> retry_after = std::nullopt;
  // The reason is counted elsewhere already (the limiter's refusals), or not at all.
  bool counted = false;
  // Over HTTP, the connection closes after the answer (the drain's).
  bool close = false;
};

// A replica's name among the routers that share state: <hostname>-<pid>-<4 random bytes>
// (a pod's hostname is its name; the random part tells a restarted process apart).
std::string DefaultReplicaId() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  std::string random;
  for (unsigned char c : base::RandomBytes(4))
    random += fmt::format("{:02x}", c);
  return fmt::format("{}-{}-{}", host, getpid(), random);
}

// The refusal of a request the tenant's quotas refused (counted by the limiter).
Refusal OverQuota(const flow::Tenant& tenant, const flow::Refusal& refusal, int64_t prompt_tokens) {
  const std::string_view reason = flow::RefusalReasonName(refusal.reason);
  return Refusal{
      absl::ResourceExhaustedError(
          refusal.reason == flow::RefusalReason::kExceedsTokenQuota
              ? fmt::format("The prompt ({} tokens) is larger than the tenant's token quota "
                            "for a whole minute.",
                            prompt_tokens)
              : fmt::format("Tenant {} is over its quota ({}); retry later.", tenant.id, reason)),
      tenant.id, std::string(reason), refusal.retry_after, /*counted=*/true};
}

class RouterServerImpl final : public RouterServer, public extproc::PickBackend {
 public:
  explicit RouterServerImpl(RouterConfig config)
      : config_(std::move(config)),
        table_(std::chrono::milliseconds(config_.staleness_ms), config_.outlier_detection),
        metrics_(config_.model, PoolNames(config_.pools)),
        routes_(Routes(), &api::TransportErrorBody) {}
  ~RouterServerImpl() override { Stop(); }

  absl::Status Init();
  int port() const override { return server_->port(); }
  int ext_proc_port() const override { return ext_proc_ != nullptr ? ext_proc_->port() : -1; }
  int grpc_health_port() const override {
    return ext_proc_ != nullptr ? ext_proc_->health_port() : -1;
  }
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
  // Every Kubernetes-discovered pool has listed its pods once (true without any).
  bool Discovered() const;
  // The gRPC health service says SERVING exactly when GET /ready is 200: discovered and not
  // draining. Any thread.
  void SyncExtProcHealth();
  void DebugEndpoints(net::HttpRequest& request, std::shared_ptr<net::HttpResponder> responder);
  // GET /debug/flows: flow control's bands and queues ({"enabled": false} when it is off).
  void DebugFlows(net::HttpRequest& request, std::shared_ptr<net::HttpResponder> responder);
  // Admission, shared by the HTTP front and the ext_proc server: the drain, the tenant and
  // its objective, the prompt's tokens, the tenant's quotas and cache salt (which may rewrite
  // `request.body`), then the routing that will pick for it.
  std::variant<Admitted, Refusal> Admit(net::HttpRequest& request, bool chat,
                                        Clock::time_point arrival);
  // Counts a refusal (the router's metrics; flow control's unless `counted`) and makes its
  // answer: an OpenAI error body, x-request-id, x-llm-d-request-dropped-reason with a reason,
  // Retry-After when set.
  extproc::DirectAnswer Answer(const Refusal& refusal, std::string request_id,
                               Clock::time_point arrival);
  // Answers a request the router refuses itself (401, 400, 403, 429, 503) over HTTP.
  void Refuse(net::HttpResponder& responder, const Refusal& refusal, std::string request_id,
              Clock::time_point arrival);
  // Sends an admitted request on its way: `start` runs once it may go to an endpoint (at
  // once with flow control off, after the tenant's concurrency check; or when flow control
  // dispatches it), `refuse` when it may not (never for a request whose client left).
  // Returns flow control's handle of a queued request, for its client's cancel.
  std::optional<flow::FlowController::Handle> Dispatch(const Admitted& admitted,
                                                       RequestRouting* routing,
                                                       std::function<void()> start,
                                                       std::function<void(const Refusal&)> refuse,
                                                       std::string request_id,
                                                       Clock::time_point arrival);
  // extproc::PickBackend: Admit, Dispatch, then one pick (no endpoint: 429, as llm-d).
  std::function<void()> Pick(net::HttpRequest request,
                             std::function<void(extproc::PickOutcome)> done) override;
  // Pumps flow control every kPumpInterval while requests wait (TTLs, and room that ended
  // requests or scrapes made), and sleeps while none does, until Stop.
  void PumpFlows();
  // Ends the pump's idle sleep: a request now waits.
  void WakePump();
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
  std::unique_ptr<ReplicaSync> replicas_;  // with sharedState
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
  bool pump_wanted_ ABSL_GUARDED_BY(pump_mu_) = false;  // a request was queued
  std::thread pump_;
  // The HTTP server and the upstream client share these loops: a request's upstream call
  // runs on the thread that took the request, with no hand-off between threads.
  std::shared_ptr<net::EventLoops> loops_;
  std::unique_ptr<net::HttpClient> client_;
  std::unique_ptr<net::HttpServer> server_;
  std::unique_ptr<EndpointScraper> scraper_;
  // The Endpoint Picker Protocol's front (config extProc); null when off.
  std::unique_ptr<extproc::ExtProcServer> ext_proc_;
  base::Mutex ext_proc_health_mu_;
  bool ext_proc_serving_ ABSL_GUARDED_BY(ext_proc_health_mu_) = false;
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
    flow_options.on_waiting = [this] { WakePump(); };
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
  if (const std::optional<RouterConfig::SharedState>& shared = config_.shared_state) {
    ReplicaSyncOptions options;
    options.redis_host = shared->redis_host;
    options.redis_port = shared->redis_port;
    options.stream_key = shared->key + ":replicas";
    options.replica_id = shared->replica_id.empty() ? DefaultReplicaId() : shared->replica_id;
    options.interval = std::chrono::milliseconds(shared->interval_ms);
    options.timeout = std::chrono::milliseconds(shared->timeout_ms);
    options.history = shared->history;
    options.load_stale = std::chrono::milliseconds(shared->load_stale_ms);
    SY_LOG_INFO("router: sharing state with the other replicas through {}:{} as {}",
                options.redis_host, options.redis_port, options.replica_id);
    replicas_ =
        std::make_unique<ReplicaSync>(std::move(options), plugins_.get(), &table_, limiter_.get());
    replicas_->Start();
    plugins_->observers().Install(replicas_.get());
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
    if (ext_proc_ != nullptr)  // readiness may have changed (pods listed)
      SyncExtProcHealth();
    if (flow_ != nullptr)  // fresh metrics may show room
      flow_->Pump(Clock::now());
  };
  if (config_.ext_proc_port >= 0) {
    extproc::ExtProcServerOptions ext_proc_options;
    ext_proc_options.host = config_.host;
    ext_proc_options.port = config_.ext_proc_port;
    ext_proc_options.health_port = config_.grpc_health_port;
    ext_proc_options.fail_open = config_.ext_proc_fail_open;
    ext_proc_options.threads = config_.ext_proc_threads;
    SY_ASSIGN_OR_RETURN(ext_proc_, extproc::ExtProcServer::Start(ext_proc_options, this));
    SyncExtProcHealth();
  }
  SY_ASSIGN_OR_RETURN(scraper_,
                      EndpointScraper::Start(std::move(scraper_options), &table_, &engine_models_));
  return absl::OkStatus();
}

void RouterServerImpl::StartDrain() {
  drain_.gate().BeginDrain();
  if (ext_proc_ != nullptr)
    SyncExtProcHealth();
  SY_LOG_INFO("router: draining: /health answers 503, new requests get 503 with Retry-After");
}

void RouterServerImpl::Stop() {
  // Its streams end (and release their picks) while what they hold is still here.
  if (ext_proc_ != nullptr)
    ext_proc_->Stop();
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
  if (replicas_ != nullptr) {
    plugins_->observers().Install(nullptr);
    replicas_->Stop();
  }
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

std::variant<Admitted, Refusal> RouterServerImpl::Admit(net::HttpRequest& request, bool chat,
                                                        Clock::time_point arrival) {
  // Counted in flight from here, so that the drain also waits for it while it is tokenized.
  std::unique_ptr<internal::Drain::Ticket> ticket = drain_.Admit();
  if (ticket == nullptr) {
    // Envoy's drain: refused at once, and the connection closed, so that the client (or the
    // load balancer in front) goes to another router.
    return Refusal{absl::UnavailableError("The router is shutting down; retry the request."),
                   "",
                   "",
                   std::chrono::seconds(internal::kRetryAfterSeconds),
                   /*counted=*/true,
                   /*close=*/true};
  }
  // Who sent it, and at which priority.
  absl::StatusOr<const flow::Tenant*> tenant =
      tenants_->Authenticate(request.Header("authorization"));
  if (!tenant.ok())
    return Refusal{tenant.status(), "", "unauthenticated"};
  int32_t priority = 0;
  if (!config_.tenants.objectives.empty()) {
    absl::StatusOr<int32_t> p =
        tenants_->Priority(**tenant, request.Header("x-llm-d-inference-objective"));
    if (!p.ok()) {
      return Refusal{
          p.status(), (*tenant)->id,
          absl::IsPermissionDenied(p.status()) ? "forbidden-objective" : "unknown-objective"};
    }
    priority = *p;
  }
  // A tenant over its request rate is refused before its prompt costs a tokenization.
  if (std::optional<flow::Refusal> refusal = limiter_->CheckRequestRate(**tenant, arrival))
    return OverQuota(**tenant, *refusal, 0);
  absl::StatusOr<TokenizedRequest> tokenized = prompt_tokenizer_->Tokenize(request.body, chat);
  const Clock::time_point tokenized_at = Clock::now();
  metrics_.ObserveTokenize(SecondsBetween(arrival, tokenized_at));
  if (!tokenized.ok())
    return Refusal{tokenized.status(), "", "", std::nullopt, /*counted=*/true};
  const int64_t prompt_tokens = static_cast<int64_t>(tokenized->prompt_tokens.size());
  if (std::optional<flow::Refusal> refusal =
          limiter_->Admit(**tenant, prompt_tokens, tokenized_at)) {
    return OverQuota(**tenant, *refusal, prompt_tokens);
  }
  // Each tenant's own prefix cache: its salt in place of the client's.
  std::string cache_salt = std::move(tokenized->cache_salt);
  if (std::optional<std::string> salt = tenants_->CacheSalt(
          **tenant,
          cache_salt.empty() ? std::nullopt : std::optional<std::string_view>(cache_salt))) {
    absl::StatusOr<std::string> body = internal::WithCacheSalt(request.body, *salt);
    if (!body.ok())  // the tokenizer parsed it: not reached
      return Refusal{body.status(), (*tenant)->id, "bad-request"};
    request.body = *std::move(body);
    cache_salt = *std::move(salt);
  }
  Admitted admitted;
  admitted.tenant = *tenant;
  admitted.priority = priority;
  admitted.fairness_id =
      tenants_->FairnessId(**tenant, request.Header("x-llm-d-inference-fairness-id"));
  if (std::optional<std::string_view> slo = request.Header("x-llm-d-slo-ttft-ms")) {
    int64_t ms = 0;
    if (absl::SimpleAtoi(absl::string_view(slo->data(), slo->size()), &ms) && ms > 0)
      admitted.slo_deadline = arrival + std::chrono::milliseconds(ms);
  }
  admitted.stream = tokenized->stream;
  admitted.prompt_tokens = prompt_tokens;
  admitted.cost_tokens = prompt_tokens + tokenized->max_tokens.value_or(0);
  admitted.bytes = static_cast<int64_t>(request.body.size());
  TenantAccount account{*tenant, limiter_.get(), flow_.get(), admitted.fairness_id, priority};
  admitted.routing = std::make_unique<RequestRouting>(
      profile_, &table_, &metrics_, plugins_.get(), std::move(tokenized->prompt_tokens),
      tokenized_at, std::move(ticket), std::move(account));
  SchedulingRequest& sched = admitted.routing->request();
  sched.model = config_.model;
  sched.cache_salt = std::move(cache_salt);
  if (std::optional<std::string_view> t = request.Header("x-session-token"))
    sched.session_token = std::string(*t);
  if (std::optional<std::string_view> id = request.Header("x-session-id"))
    sched.session_id = std::string(*id);
  return admitted;
}

void RouterServerImpl::Generate(net::HttpRequest& request,
                                std::shared_ptr<net::HttpResponder> responder, bool chat) {
  const Clock::time_point arrival = Clock::now();
  std::string request_id = RequestIdOf(request);
  std::variant<Admitted, Refusal> admission = Admit(request, chat, arrival);
  if (const Refusal* refusal = std::get_if<Refusal>(&admission)) {
    Refuse(*responder, *refusal, std::move(request_id), arrival);
    return;
  }
  Admitted& admitted = std::get<Admitted>(admission);
  RequestRouting* routing = admitted.routing.get();

  internal::ProxyRequest proxy;
  proxy.http.method = std::move(request.method);
  proxy.http.target = std::move(request.target);
  // The client's header list, cut to what goes upstream: no list of its own (it has room for
  // x-request-id unless every header is forwarded). A tenant's key is the router's: it goes
  // no further.
  const bool keyed = !admitted.tenant->anonymous;
  proxy.http.headers = std::move(request.headers);
  std::erase_if(proxy.http.headers, [&proxy, keyed](net::HeaderList::value_type& header) {
    if (header.first == "authorization" && proxy.client_authorization.empty() && !keyed)
      proxy.client_authorization = std::move(header.second);
    return !ForwardRequestHeader(header.first);
  });
  proxy.request_id_header = proxy.http.headers.size();
  proxy.http.headers.emplace_back("x-request-id", request_id);
  proxy.http.body = std::move(request.body);
  proxy.arrival = arrival;
  proxy.prompt_tokens = admitted.prompt_tokens;
  proxy.stream = admitted.stream;
  proxy.prefill_timeout = std::chrono::milliseconds(config_.request_timeout_ms);
  // A buffered response's head comes with its whole completion, after however long the
  // request queues in a healthy engine: its wait is bounded by the request timeout, and a
  // dead or frozen engine is found by health checks (which wake the request to retry it).
  if (!admitted.stream)
    proxy.http.first_byte_timeout = std::chrono::milliseconds(config_.request_timeout_ms);
  internal::Drain::Ticket& ticket = routing->ticket();
  auto call = std::allocate_shared<internal::ProxyCall>(
      base::RecyclingAllocator<internal::ProxyCall>(), std::move(proxy), responder, client_.get(),
      &metrics_, config_.max_retries, std::move(admitted.routing));
  ticket.Attach(call);
  // Queued: the client's disconnect takes it out of the queue (the call's own close handler
  // replaces this one once it starts).
  auto handle = std::make_shared<std::atomic<int64_t>>(-1);
  if (flow_ != nullptr) {
    responder->OnClose([flow = flow_.get(), handle] {
      if (const int64_t h = handle->load(); h >= 0)
        flow->Cancel(static_cast<flow::FlowController::Handle>(h));
    });
  }
  // The call is never started when refused: dropping it releases its drain ticket.
  std::optional<flow::FlowController::Handle> queued = Dispatch(
      admitted, routing, [call] { call->Start(); },
      [this, call, responder, request_id, arrival](const Refusal& refusal) {
        Refuse(*responder, refusal, request_id, arrival);
      },
      request_id, arrival);
  if (queued.has_value()) {
    handle->store(static_cast<int64_t>(*queued));
    if (responder->closed())  // it left before the handle was there to cancel
      flow_->Cancel(*queued);
  }
}

std::function<void()> RouterServerImpl::Pick(net::HttpRequest request,
                                             std::function<void(extproc::PickOutcome)> done) {
  const Clock::time_point arrival = Clock::now();
  std::string request_id = RequestIdOf(request);
  const bool chat = request.path == "/v1/chat/completions";
  if (!chat && request.path != "/v1/completions") {
    done(Answer(Refusal{absl::NotFoundError(fmt::format("No generation route for {} {}.",
                                                        request.method, request.path)),
                        "", "", std::nullopt, /*counted=*/true},
                std::move(request_id), arrival));
    return nullptr;
  }
  std::variant<Admitted, Refusal> admission = Admit(request, chat, arrival);
  if (const Refusal* refusal = std::get_if<Refusal>(&admission)) {
    done(Answer(*refusal, std::move(request_id), arrival));
    return nullptr;
  }
  Admitted& admitted = std::get<Admitted>(admission);
  RequestRouting* routing = admitted.routing.get();
  // What the pick needs once dispatched (flow control may hold it a while).
  struct Pending {
    std::unique_ptr<RequestRouting> routing;
    std::string body;
    std::function<void(extproc::PickOutcome)> done;
  };
  auto pending = std::make_shared<Pending>(
      Pending{std::move(admitted.routing), std::move(request.body), std::move(done)});
  auto start = [this, pending, request_id, arrival] {
    std::optional<internal::ProxyTarget> target = pending->routing->NextTarget({});
    if (!target.has_value()) {
      pending->done(Answer(
          Refusal{absl::ResourceExhaustedError("No endpoint can take the request; retry later."),
                  "", "no-endpoint", std::nullopt, /*counted=*/true},
          request_id, arrival));
      return;
    }
    pending->routing->Picked(*target);
    pending->done(std::make_unique<extproc::RoutedRequest>(std::move(pending->routing), *target,
                                                           std::move(pending->body)));
  };
  auto refuse = [this, pending, request_id, arrival](const Refusal& refusal) {
    pending->done(Answer(refusal, request_id, arrival));
  };
  std::optional<flow::FlowController::Handle> queued =
      Dispatch(admitted, routing, std::move(start), std::move(refuse), request_id, arrival);
  if (!queued.has_value())
    return nullptr;
  return [flow = flow_.get(), handle = *queued] { flow->Cancel(handle); };
}

std::optional<flow::FlowController::Handle> RouterServerImpl::Dispatch(
    const Admitted& admitted, RequestRouting* routing, std::function<void()> start,
    std::function<void(const Refusal&)> refuse, std::string request_id, Clock::time_point arrival) {
  const flow::Tenant& tenant = *admitted.tenant;
  if (flow_ == nullptr) {
    if (!limiter_->TryStart(tenant)) {
      refuse(Refusal{absl::ResourceExhaustedError(
                         fmt::format("Tenant {} has {} requests running, its limit; retry later.",
                                     tenant.id, tenant.limits.max_concurrent)),
                     tenant.id, "max-concurrent",
                     std::chrono::seconds(internal::kRetryAfterSeconds)});
      return std::nullopt;
    }
    routing->MarkStarted();
    start();
    return std::nullopt;
  }
  flow::FlowItem item;
  item.flow_id = admitted.fairness_id;
  item.priority = admitted.priority;
  item.bytes = admitted.bytes;
  item.cost_tokens = admitted.cost_tokens;
  item.received = arrival;
  item.slo_deadline = admitted.slo_deadline;
  item.limits = {tenant.limits.max_concurrent, tenant.limits.max_queued};
  item.weight = tenant.weight;
  item.dispatch = [start = std::move(start), routing] {
    routing->Dispatched();
    start();
  };
  item.reject = [this, refuse = std::move(refuse), tenant_id = tenant.id,
                 fairness_id = admitted.fairness_id, priority = admitted.priority,
                 request_id = std::move(request_id), arrival](flow::DropReason reason) {
    const std::string_view name = flow::DropReasonName(reason);
    flow_metrics_.QueueTime(fairness_id, priority, name, SecondsSince(arrival));
    if (reason == flow::DropReason::kContextCancelled) {
      metrics_.Unrouted().RequestFinished(499, SecondsSince(arrival));
      flow_metrics_.Rejected(tenant_id, name);
      return;  // nobody to answer
    }
    const bool unavailable = reason == flow::DropReason::kShuttingDown || !gate_->HasEndpoints();
    refuse(Refusal{
        unavailable
            ? absl::UnavailableError(
                  fmt::format("No endpoint could take the request in time ({}).", name))
            : absl::ResourceExhaustedError(fmt::format(
                  "The fleet is saturated and the request was shed ({}); retry later.", name)),
        tenant_id, std::string(name), std::chrono::seconds(internal::kRetryAfterSeconds)});
  };
  return flow_->Enqueue(std::move(item), Clock::now());
}

extproc::DirectAnswer RouterServerImpl::Answer(const Refusal& refusal, std::string request_id,
                                               Clock::time_point arrival) {
  const int http_status = api::HttpErrorFor(refusal.error).http_status;
  metrics_.Unrouted().RequestFinished(http_status, SecondsSince(arrival));
  if (!refusal.counted)
    flow_metrics_.Rejected(refusal.tenant, refusal.reason);
  net::HeaderList headers = {{"x-request-id", std::move(request_id)}};
  if (!refusal.reason.empty() && (http_status == 429 || http_status == 503))
    headers.emplace_back("x-llm-d-request-dropped-reason", refusal.reason);
  if (refusal.retry_after.has_value())
    headers.emplace_back("retry-after", std::to_string(refusal.retry_after->count()));
  return {http_status, std::move(headers), api::ErrorBody(refusal.error)};
}

void RouterServerImpl::Refuse(net::HttpResponder& responder, const Refusal& refusal,
                              std::string request_id, Clock::time_point arrival) {
  extproc::DirectAnswer answer = Answer(refusal, std::move(request_id), arrival);
  if (refusal.close)
    answer.headers.emplace_back("connection", "close");
  responder.Send(answer.http_status, kJson, std::move(answer.body), std::move(answer.headers));
}

void RouterServerImpl::PumpFlows() {
  base::SetCurrentThreadName("sy-flow-pump");
  while (true) {
    // An Enqueue whose request waits after this Pump sets pump_wanted_ (under pump_mu_),
    // so the wait below cannot miss it.
    const bool idle = !flow_->Pump(Clock::now());
    base::MutexLock lock(&pump_mu_);
    const auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(pump_mu_) {
      return stopping_ || pump_wanted_;
    };
    if (idle) {
      pump_cv_.Wait(&pump_mu_, woken);
    } else {
      pump_cv_.WaitUntil(&pump_mu_, Clock::now() + kPumpInterval, woken);
    }
    if (stopping_)
      return;
    pump_wanted_ = false;
  }
}

void RouterServerImpl::WakePump() {
  {
    base::MutexLock lock(&pump_mu_);
    if (pump_wanted_)
      return;
    pump_wanted_ = true;
  }
  pump_cv_.NotifyAll();
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

bool RouterServerImpl::Discovered() const {
  return kube_ == nullptr || kube_->synced();
}

void RouterServerImpl::SyncExtProcHealth() {
  base::MutexLock lock(&ext_proc_health_mu_);  // a drain and a scrape may race
  const bool serving = Discovered() && !drain_.gate().draining();
  if (ext_proc_serving_ != serving)
    ext_proc_->SetServing(serving);
  ext_proc_serving_ = serving;
}

void RouterServerImpl::Ready(net::HttpRequest& request,
                             std::shared_ptr<net::HttpResponder> responder) {
  if (!Discovered() && !drain_.gate().draining()) {
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
  if (replicas_ != nullptr)
    text += prometheus::TextSerializer().Serialize(ReplicaSyncMetrics(replicas_->Stats()));
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
