#include "router/router_server.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/error.h"
#include "api/response_writer.h"
#include "base/logging.h"
#include "base/recycling_allocator.h"
#include "base/status_macros.h"
#include "kvx/kv_event_subscriber.h"
#include "net/http_client.h"
#include "net/http_server.h"
#include "net/route_table.h"
#include "router/dns_pool_resolver.h"
#include "router/endpoint_scraper.h"
#include "router/endpoint_table.h"
#include "router/engine_models.h"
#include "router/internal/drain.h"
#include "router/internal/proxy_call.h"
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
                 Clock::time_point ready, std::unique_ptr<internal::Drain::Ticket> ticket)
      : profile_(profile),
        disagg_(plugins->disagg().has_value() ? &*plugins->disagg() : nullptr),
        table_(table),
        metrics_(metrics),
        plugins_(plugins),
        prompt_tokens_(std::move(prompt_tokens)),
        first_start_(ready),
        ticket_(std::move(ticket)) {
    request_.prompt_tokens = prompt_tokens_;
  }

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

  void Generated(int64_t /*tokens*/) override {}

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
  void AbortInFlight() override { drain_.AbortAll(); }
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
  void DebugEndpoints(net::HttpRequest& request, std::shared_ptr<net::HttpResponder> responder);
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
  std::unique_ptr<PluginSet> plugins_;
  const SchedulingProfile* profile_ = nullptr;
  std::unique_ptr<PromptTokenizer> prompt_tokenizer_;
  std::unique_ptr<KvEventIndexer> indexer_;
  std::unique_ptr<kvx::KvEventSubscriber> subscriber_;
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
          route("GET", "/debug/endpoints", &RouterServerImpl::DebugEndpoints),
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
  SY_ASSIGN_OR_RETURN(prompt_tokenizer_, PromptTokenizer::FromConfig(config_));
  bool any_dns = false;
  for (const PoolConfig& pool : config_.pools) {
    any_dns = any_dns || !pool.dns.empty();
    std::vector<EndpointSpec> specs;
    for (const StaticEndpointConfig& e : pool.endpoints)
      specs.push_back(e.spec);
    table_.SetPoolMembers(pool.name, specs);
  }
  if (any_dns) {
    dns_ = std::make_unique<DnsPoolResolver>(config_.pools, &table_);
    dns_->Start();
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
  scraper_options.after_round = [this] { ReportKvEvents(); };
  SY_ASSIGN_OR_RETURN(scraper_,
                      EndpointScraper::Start(std::move(scraper_options), &table_, &engine_models_));
  return absl::OkStatus();
}

void RouterServerImpl::StartDrain() {
  drain_.gate().BeginDrain();
  SY_LOG_INFO("router: draining: /health answers 503, new requests get 503 with Retry-After");
}

void RouterServerImpl::Stop() {
  if (scraper_ != nullptr)
    scraper_->Stop();
  if (dns_ != nullptr)
    dns_->Stop();
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
  const bool stream = tokenized->stream;
  auto routing = std::make_unique<RequestRouting>(profile_, &table_, &metrics_, plugins_.get(),
                                                  std::move(tokenized->prompt_tokens), tokenized_at,
                                                  std::move(admitted));
  SchedulingRequest& sched = routing->request();
  sched.model = config_.model;
  sched.cache_salt = std::move(tokenized->cache_salt);
  if (std::optional<std::string_view> t = request.Header("x-session-token"))
    sched.session_token = std::string(*t);
  if (std::optional<std::string_view> id = request.Header("x-session-id"))
    sched.session_id = std::string(*id);

  internal::ProxyRequest proxy;
  proxy.http.method = std::move(request.method);
  proxy.http.target = std::move(request.target);
  // The client's header list, cut to what goes upstream: no list of its own (it has room for
  // x-request-id unless every header is forwarded).
  proxy.http.headers = std::move(request.headers);
  std::erase_if(proxy.http.headers, [&proxy](net::HeaderList::value_type& header) {
    if (header.first == "authorization" && proxy.client_authorization.empty())
      proxy.client_authorization = std::move(header.second);
    return !ForwardRequestHeader(header.first);
  });
  proxy.request_id_header = proxy.http.headers.size();
  proxy.http.headers.emplace_back("x-request-id", std::move(request_id));
  proxy.http.body = std::move(request.body);
  proxy.arrival = arrival;
  proxy.prompt_tokens = static_cast<int64_t>(sched.prompt_tokens.size());
  proxy.stream = stream;
  proxy.prefill_timeout = std::chrono::milliseconds(config_.request_timeout_ms);
  // A buffered response's head comes with its whole completion, after however long the
  // request queues in a healthy engine: its wait is bounded by the request timeout, and a
  // dead or frozen engine is found by health checks (which wake the request to retry it).
  if (!stream)
    proxy.http.first_byte_timeout = std::chrono::milliseconds(config_.request_timeout_ms);
  internal::Drain::Ticket& ticket = routing->ticket();
  auto call = std::allocate_shared<internal::ProxyCall>(
      base::RecyclingAllocator<internal::ProxyCall>(), std::move(proxy), std::move(responder),
      client_.get(), &metrics_, config_.max_retries, std::move(routing));
  ticket.Attach(call);
  call->Start();
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
  metrics_.UpdateEndpoints(table_.Statuses(Clock::now()));
  responder->Send(200, "text/plain; version=0.0.4", metrics_.Serialize());
}

}  // namespace

absl::StatusOr<std::unique_ptr<RouterServer>> RouterServer::Start(const RouterConfig& config) {
  auto server = std::make_unique<RouterServerImpl>(config);
  SY_RETURN_IF_ERROR(server->Init());
  return server;
}

}  // namespace switchyard::router
