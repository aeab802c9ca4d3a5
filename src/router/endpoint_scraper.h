// EndpointScraper: the router's active health checks. One owned thread ("sy-scrape") starts
// a round every `interval`; a round sends, to every member of the EndpointTable:
//   GET /metrics     read in the member's engine dialect (engine_metrics.h) into the table
//                    (ReportMetrics), after `on_metrics` saw them. A llama.cpp server that
//                    serves none (ServesNoMetrics: 404 or 501) is reachable (ReportReachable).
//                    Anything else is a failed scrape with its reason (ReportScrapeFailure;
//                    three in a row take the endpoint out of the snapshots): no answer within
//                    `timeout`, a refused connection, any other status than 200, unreadable
//                    text. A 401 or 403 is a failure of credentials, logged once per reason.
//   GET /v1/models   when EngineModels says the member's card is due: its card for `model`
//                    into EngineModels (an error counts as asked, so it is not asked again
//                    at once).
// Both carry the member's credentials (EndpointSpec::authorization) when it has any. A member
// still answering its last /metrics scrape is skipped in the next rounds, so that scrapes do
// not pile up behind a slow endpoint. EngineModels forgets departed members each round.
//
// The scrapes run on a client loop of their own with the scraping timeouts, so that proxied
// traffic does not delay them nor they it.
//
// Threads: Start and Stop from one controlling thread; `on_metrics` and the reports run on
// the scrape client's loop, `after_round` on the scraper thread. Borrows the table and the
// models, which must outlive it.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

#include "base/mutex.h"
#include "net/http_client.h"
#include "router/endpoint_table.h"
#include "router/engine_models.h"

namespace switchyard::router {

struct EndpointScraperOptions {
  std::string model;  // the served model: its card is read from each /v1/models
  std::chrono::milliseconds interval{50};
  std::chrono::milliseconds timeout{1000};  // connect, first byte and idle, per scrape
  // An endpoint's metrics, before the table has them: the router sizes its prefix indexes to
  // the endpoint's KV cache here, so that whoever sees the metrics sees the indexes sized.
  std::function<void(const std::string& endpoint, const EndpointMetrics& metrics)> on_metrics;
  // After each round's requests went out: the router copies its KV event streams' state into
  // the table here, at the scraping interval.
  std::function<void()> after_round;
};

class EndpointScraper {
 public:
  // Starts the client and the thread; the first round starts at once.
  static absl::StatusOr<std::unique_ptr<EndpointScraper>> Start(EndpointScraperOptions options,
                                                                EndpointTable* table,
                                                                EngineModels* models);
  ~EndpointScraper() { Stop(); }
  EndpointScraper(const EndpointScraper&) = delete;
  EndpointScraper& operator=(const EndpointScraper&) = delete;

  // Ends the rounds at once (not after the interval), then cancels the scrapes in flight
  // (reported as failed); no callback runs once it returned. Idempotent.
  void Stop();

 private:
  EndpointScraper(EndpointScraperOptions options, EndpointTable* table, EngineModels* models)
      : options_(std::move(options)), table_(table), models_(models) {}
  void Loop();
  void Round();
  void ScrapeMetrics(const EndpointSpec& spec);
  void ScrapeDone(const std::string& name);
  // `name`'s /metrics answer (or the error) into the table.
  void MetricsScraped(const std::string& name, EngineKind kind, bool has_credentials,
                      const absl::StatusOr<net::HttpClient::Response>& response);
  // Fetches `spec`'s /v1/models into the models when it is due.
  void FetchModels(const EndpointSpec& spec);

  const EndpointScraperOptions options_;
  EndpointTable* const table_;
  EngineModels* const models_;
  std::unique_ptr<net::HttpClient> client_;
  base::Mutex scrape_mu_;
  std::set<std::string> scraping_ ABSL_GUARDED_BY(scrape_mu_);  // /metrics scrapes in flight
  base::Mutex mu_;
  base::CondVar cv_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace switchyard::router
