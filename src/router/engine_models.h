// What the engines report on GET /v1/models, and the router's own /v1/models card from it.
// vLLM's ModelCard carries `created`, `owned_by`, `root` and `max_model_len`; a router that
// answered its own zeros there (created 0, max_model_len 0) made clients that size requests
// from max_model_len (guidellm, lm-eval) give up. The scraper fetches each endpoint's list
// now and then (EngineModels::kRefresh), and the router answers with what the engines said.
//
// Thread-safe: one mutex; Report from the scraper's callbacks, Card from handlers.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

#include "api/response_writer.h"
#include "base/mutex.h"

namespace switchyard::router {

// The card for `model` in an OpenAI /v1/models body: the entry whose id is `model`, else
// the first (llama-server names its model by its file, not by the name clients use).
// InvalidArgument when the body is not such a list or has no entry.
absl::StatusOr<api::ModelCard> ParseModelCard(std::string_view body, std::string_view model);

class EngineModels {
 public:
  using Clock = std::chrono::steady_clock;
  // How long a fetched card is kept before it is fetched again.
  static constexpr std::chrono::seconds kRefresh{30};

  // Whether `endpoint`'s list is due (never fetched, or older than kRefresh).
  bool Due(const std::string& endpoint, Clock::time_point now) const;
  // Records what `endpoint` reported (or, on error, that it was asked: it is due again only
  // after kRefresh, so that an engine without the route is not asked at every scrape).
  void Report(const std::string& endpoint, std::optional<api::ModelCard> card,
              Clock::time_point now);
  // Forgets endpoints no longer in `members`.
  void Retain(const std::vector<std::string>& members);

  // The router's card for `model` from the cards of `endpoints` (the healthy ones): the
  // earliest `created`; `owned_by` and `root` of the first endpoint (in name order) that
  // reported them; the smallest max_model_len reported, since a request may land on any
  // of them. Fields no endpoint reported keep their defaults (created and max_model_len 0).
  api::ModelCard Card(const std::string& model, const std::vector<std::string>& endpoints) const;

 private:
  struct Entry {
    std::optional<api::ModelCard> card;
    Clock::time_point fetched_at;
  };
  mutable base::Mutex mu_;
  std::map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace switchyard::router
