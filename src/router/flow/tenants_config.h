// TenantsConfig: who may call the router, under which limits, and at which priorities: the
// `tenants:` and `objectives:` sections of router.yaml (documented in router_config.h).
// Objectives are llm-d's InferenceObjective (a name a request selects with the
// x-llm-d-inference-objective header, and an int priority: higher first, negative
// sheddable). API keys appear only as SHA-256 digests, so the file holds no secret.
//
// Plain values; the parser checks everything the TenantTable and the TenantLimiter rely on.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace YAML {
class Node;
}  // namespace YAML

namespace switchyard::router::flow {

// The tenant of requests that carry no key (when keys are not required); reserved.
inline constexpr std::string_view kAnonymousTenantId = "anonymous";

// What the router does with a request's cache_salt (the prefix-cache isolation key).
enum class CacheSaltMode {
  kTenant,           // `tenant`: replaced by the tenant's salt
  kTenantAndClient,  // `tenant+client`: the tenant's salt, then the client's, combined
  kClient,           // `client`: left as the client sent it (no isolation)
};

using KeyDigest = std::array<unsigned char, 32>;  // SHA-256 of an API key

// Each limit 0: none.
struct TenantLimits {
  double requests_per_second = 0;
  int64_t burst = 0;  // requests at once above the rate; 0: max(1, ceil(requests_per_second))
  int64_t tokens_per_minute = 0;  // prompt tokens at admission, generated ones as they stream
  int64_t max_concurrent = 0;     // requests dispatched and not finished
  int64_t max_queued = 0;         // requests waiting in flow control
};

struct TenantConfig {
  std::string id;  // [A-Za-z0-9._-], 1 to 64 characters
  std::vector<KeyDigest> api_key_digests;
  double weight = 1;  // fairness weight, > 0
  TenantLimits limits;
  std::optional<std::vector<std::string>> objectives;  // may use; nullopt: every one
  std::optional<std::string> default_objective;        // without the header; nullopt: priority 0
};

struct ObjectiveConfig {
  std::string name;
  int32_t priority = 0;
};

struct TenantsConfig {
  bool require_api_key = false;
  bool trust_fairness_header = false;  // x-llm-d-inference-fairness-id overrides the tenant
  CacheSaltMode cache_salt = CacheSaltMode::kTenant;
  std::vector<TenantConfig> tenants;  // empty: every request is the anonymous tenant's
  std::vector<ObjectiveConfig> objectives;
};

// Reads the `tenants` and `objectives` sections of a router config's root mapping (either may
// be absent). Errors are InvalidArgument naming `source` and the field's path, e.g.
// `router.yaml: tenants.list[1].apiKeys[0]: expected "sha256:" and 64 hex digits`.
absl::StatusOr<TenantsConfig> ParseTenantsConfig(const YAML::Node& root, std::string_view source);

}  // namespace switchyard::router::flow
