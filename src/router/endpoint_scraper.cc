#include "router/endpoint_scraper.h"

#include <optional>
#include <utility>
#include <vector>

#include "fmt/format.h"

#include "base/logging.h"
#include "base/status_macros.h"
#include "base/thread_name.h"

namespace switchyard::router {
namespace {

using Clock = std::chrono::steady_clock;

net::HttpClientRequest ScrapeRequest(const EndpointSpec& spec, std::string target) {
  net::HttpClientRequest request;
  request.upstream = spec.address;
  request.target = std::move(target);
  if (!spec.authorization.empty())
    request.headers.emplace_back("authorization", spec.authorization);
  return request;
}

}  // namespace

absl::StatusOr<std::unique_ptr<EndpointScraper>> EndpointScraper::Start(
    EndpointScraperOptions options, EndpointTable* table, EngineModels* models) {
  std::unique_ptr<EndpointScraper> scraper(new EndpointScraper(std::move(options), table, models));
  net::HttpClientOptions client_options;
  client_options.num_threads = 1;
  client_options.connect_timeout = scraper->options_.timeout;
  client_options.first_byte_timeout = scraper->options_.timeout;
  client_options.idle_timeout = scraper->options_.timeout;
  SY_ASSIGN_OR_RETURN(scraper->client_, net::HttpClient::Start(client_options));
  EndpointScraper* self = scraper.get();
  scraper->thread_ = std::thread([self] {
    base::SetCurrentThreadName("sy-scrape");
    self->Loop();
  });
  return scraper;
}

void EndpointScraper::Stop() {
  {
    base::MutexLock lock(&mu_);
    if (stopping_)
      return;
    stopping_ = true;
  }
  cv_.NotifyAll();
  if (thread_.joinable())
    thread_.join();
  if (client_ != nullptr)
    client_->Stop();
}

void EndpointScraper::Loop() {
  for (;;) {
    Round();
    if (options_.after_round)
      options_.after_round();
    base::MutexLock lock(&mu_);
    // A timed wait, not a sleep: Stop wakes it at once.
    cv_.WaitUntil(&mu_, Clock::now() + options_.interval,
                  [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; });
    if (stopping_)
      return;
  }
}

void EndpointScraper::Round() {
  const std::vector<EndpointSpec> members = table_->Members();
  std::vector<std::string> names;
  names.reserve(members.size());
  for (const EndpointSpec& spec : members)
    names.push_back(spec.name);
  models_->Retain(names);
  for (const EndpointSpec& spec : members) {
    {
      // One scrape per endpoint at a time: a slow endpoint is not asked again (and again)
      // before it answered, so scrapes cannot pile up behind it.
      base::MutexLock lock(&scrape_mu_);
      if (!scraping_.insert(spec.name).second)
        continue;
    }
    FetchModels(spec);
    ScrapeMetrics(spec);
  }
}

void EndpointScraper::ScrapeDone(const std::string& name) {
  base::MutexLock lock(&scrape_mu_);
  scraping_.erase(name);
}

void EndpointScraper::ScrapeMetrics(const EndpointSpec& spec) {
  client_->Fetch(
      ScrapeRequest(spec, "/metrics"),
      [this, name = spec.name, kind = spec.engine, has_credentials = !spec.authorization.empty()](
          const absl::StatusOr<net::HttpClient::Response>& response) {
        ScrapeDone(name);
        MetricsScraped(name, kind, has_credentials, response);
      });
}

void EndpointScraper::MetricsScraped(const std::string& name, EngineKind kind, bool has_credentials,
                                     const absl::StatusOr<net::HttpClient::Response>& response) {
  if (response.ok() && ServesNoMetrics(kind, response->status)) {
    table_->ReportReachable(name);
    return;
  }
  if (!response.ok()) {
    table_->ReportScrapeFailure(name, std::string(response.status().message()));
    return;
  }
  if (response->status == 401 || response->status == 403) {
    // Not "unhealthy" without a word: the engine wants a key the router lacks or has
    // wrong. Logged once per endpoint (and again should the reason change).
    const std::string error = fmt::format(
        "HTTP {} on /metrics: {}", response->status,
        has_credentials ? "the endpoint refused the configured API key"
                        : "the endpoint wants an API key; give its pool (or it) credentials "
                          "(apiKeyEnv or apiKeyFile)");
    if (table_->ReportScrapeFailure(name, error, response->status))
      SY_LOG_ERROR("router: endpoint {}: {}", name, error);
    return;
  }
  if (response->status != 200) {
    table_->ReportScrapeFailure(name, fmt::format("HTTP {} on /metrics", response->status),
                                response->status);
    return;
  }
  absl::StatusOr<EndpointMetrics> metrics = ParseEndpointMetrics(kind, response->body);
  if (!metrics.ok()) {
    const std::string error(metrics.status().message());
    if (table_->ReportScrapeFailure(name, error))
      SY_LOG_WARN("router: metrics of {}: {}", name, error);
    return;
  }
  if (options_.on_metrics)
    options_.on_metrics(name, *metrics);
  table_->ReportMetrics(name, *metrics, Clock::now());
}

void EndpointScraper::FetchModels(const EndpointSpec& spec) {
  const Clock::time_point now = Clock::now();
  if (!models_->Due(spec.name, now))
    return;
  // Marked as asked now, so that the next rounds do not ask again while this one runs.
  models_->Report(spec.name, std::nullopt, now);
  client_->Fetch(ScrapeRequest(spec, "/v1/models"),
                 [this, name = spec.name](absl::StatusOr<net::HttpClient::Response> response) {
                   std::optional<api::ModelCard> card;
                   if (response.ok() && response->status == 200) {
                     absl::StatusOr<api::ModelCard> parsed =
                         ParseModelCard(response->body, options_.model);
                     if (parsed.ok())
                       card = *std::move(parsed);
                   }
                   models_->Report(name, std::move(card), Clock::now());
                 });
}

}  // namespace switchyard::router
