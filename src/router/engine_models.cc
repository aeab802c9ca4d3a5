#include "router/engine_models.h"

#include <algorithm>
#include <set>

#include "simdjson.h"

namespace switchyard::router {

absl::StatusOr<api::ModelCard> ParseModelCard(std::string_view body, std::string_view model) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (parser.parse(body.data(), body.size()).get(root) != simdjson::SUCCESS)
    return absl::InvalidArgumentError("/v1/models: not JSON");
  simdjson::dom::array data;
  if (root["data"].get_array().get(data) != simdjson::SUCCESS)
    return absl::InvalidArgumentError("/v1/models: no data list");
  std::optional<simdjson::dom::object> chosen;
  for (simdjson::dom::element e : data) {
    simdjson::dom::object o;
    if (e.get_object().get(o) != simdjson::SUCCESS)
      continue;
    std::string_view id;
    if (o["id"].get_string().get(id) == simdjson::SUCCESS && id == model) {
      chosen = o;
      break;
    }
    if (!chosen.has_value())
      chosen = o;
  }
  if (!chosen.has_value())
    return absl::InvalidArgumentError("/v1/models: no model listed");
  api::ModelCard card;
  std::string_view text;
  if ((*chosen)["id"].get_string().get(text) == simdjson::SUCCESS)
    card.id = std::string(text);
  if ((*chosen)["owned_by"].get_string().get(text) == simdjson::SUCCESS)
    card.owned_by = std::string(text);
  if ((*chosen)["root"].get_string().get(text) == simdjson::SUCCESS)
    card.root = std::string(text);
  int64_t number = 0;
  if ((*chosen)["created"].get_int64().get(number) == simdjson::SUCCESS)
    card.created = number;
  if ((*chosen)["max_model_len"].get_int64().get(number) == simdjson::SUCCESS)
    card.max_model_len = number;
  return card;
}

bool EngineModels::Due(const std::string& endpoint, Clock::time_point now) const {
  base::MutexLock lock(&mu_);
  auto it = entries_.find(endpoint);
  return it == entries_.end() || now - it->second.fetched_at >= kRefresh;
}

void EngineModels::Report(const std::string& endpoint, std::optional<api::ModelCard> card,
                          Clock::time_point now) {
  base::MutexLock lock(&mu_);
  Entry& e = entries_[endpoint];
  e.fetched_at = now;
  if (card.has_value())
    e.card = std::move(card);  // a failed refresh keeps what the engine said before
}

void EngineModels::Retain(const std::vector<std::string>& members) {
  const std::set<std::string> keep(members.begin(), members.end());
  base::MutexLock lock(&mu_);
  std::erase_if(entries_, [&](const auto& entry) { return !keep.contains(entry.first); });
}

api::ModelCard EngineModels::Card(const std::string& model,
                                  const std::vector<std::string>& endpoints) const {
  api::ModelCard out;
  out.id = model;
  base::MutexLock lock(&mu_);
  for (const std::string& name : endpoints) {
    auto it = entries_.find(name);
    if (it == entries_.end() || !it->second.card.has_value())
      continue;
    const api::ModelCard& c = *it->second.card;
    if (c.created > 0 && (out.created == 0 || c.created < out.created))
      out.created = c.created;
    if (c.max_model_len > 0 && (out.max_model_len == 0 || c.max_model_len < out.max_model_len))
      out.max_model_len = c.max_model_len;
    if (out.root.empty() && !c.root.empty())
      out.root = c.root;
    if (out.owned_by == api::ModelCard().owned_by && !c.owned_by.empty())
      out.owned_by = c.owned_by;
  }
  return out;
}

}  // namespace switchyard::router
