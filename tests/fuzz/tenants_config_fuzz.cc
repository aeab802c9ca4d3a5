// Fuzz target: bytes as a router.yaml through the router config parser, so that the tenants
// and objectives parsers see arbitrary YAML, and through ParseTenantsConfig alone (which does
// not need the rest of a router config to be valid). Neither may crash; they must agree; and a
// config they accept must build a TenantTable and a TenantLimiter that answer requests.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "base/config.h"
#include "router/flow/tenant_limiter.h"
#include "router/flow/tenant_table.h"
#include "router/flow/tenants_config.h"
#include "router/router_config.h"

namespace {

namespace flow = switchyard::router::flow;

void Exercise(const flow::TenantsConfig& config) {
  const flow::TenantTable table(config, "fuzz salt secret");
  flow::TenantLimiter limiter(table);
  const flow::Clock::time_point now{};
  for (std::string_view header : {"Bearer key", "bearer  other", "Basic x", ""}) {
    if (!table.Authenticate(header).ok() && table.tenants().size() == 1)
      std::abort();  // without tenants every request is anonymous
  }
  for (const flow::Tenant& tenant : table.tenants()) {
    for (const flow::ObjectiveConfig& objective : config.objectives) {
      const absl::StatusCode code = table.Priority(tenant, objective.name).status().code();
      if (code != absl::StatusCode::kOk && code != absl::StatusCode::kPermissionDenied)
        std::abort();
    }
    if (!table.Priority(tenant, std::nullopt).ok())
      std::abort();  // a tenant's default objective is always one it may use
    (void)table.FairnessId(tenant, "fairness");
    (void)table.CacheSalt(tenant, "client");
    if (limiter.TryStart(tenant))
      limiter.Finish(tenant);
    (void)limiter.Admit(tenant, 1000, now);
    limiter.ChargeGenerated(tenant, 1000, now);
    (void)limiter.Admit(tenant, 1, now);
  }
  (void)limiter.Usage();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  // A base directory that does not exist: relative file names in the config find nothing.
  const auto router = switchyard::router::ParseRouterConfig(text, "fuzz.yaml", "/nonexistent");
  const auto root = switchyard::base::ParseYaml(text, "fuzz.yaml");
  if (!root.ok())
    return 0;
  const auto tenants = flow::ParseTenantsConfig(*root, "fuzz.yaml");
  if (router.ok() && !tenants.ok())
    std::abort();
  if (tenants.ok())
    Exercise(*tenants);
  return 0;
}
