// TenantTable: the tenants of a TenantsConfig, and what a request's headers mean for them:
// who sent it (Authorization), at which priority (x-llm-d-inference-objective), under which
// fairness id (x-llm-d-inference-fairness-id) and with which cache_salt.
//
// Authentication. `Authorization: Bearer KEY` (the scheme in any case, as RFC 6750) names the
// tenant one of whose key digests is SHA-256(KEY). The digest is looked up by its first 8
// bytes (the digest of a secret: the lookup's timing tells nothing about the key), and the
// candidate's whole digest is then compared in constant time. Anything else is
// Unauthenticated: an unknown key, another scheme, a malformed header, and no header at all
// when keys are required (without requireApiKey a request with no header is the anonymous
// tenant's). With no tenants configured nothing is checked: every request is anonymous and
// its Authorization header is the engines' business, as before tenants existed.
// The caller answers Unauthenticated with 401. OpenAI answers 401 with type
// "invalid_request_error" and code "invalid_api_key" ("Incorrect API key provided: ..."), and
// vLLM's --api-key middleware with the bare body {"error": "Unauthorized"}; api/error.h's
// table gives ours ("AuthenticationError", as every other error body of ours names its type).
// The messages here never repeat the key.
//
// Cache salt. A tenant's salt is HMAC-SHA256(salt secret, "switchyard cache salt" | id) in
// hex: without the router's secret, knowing a tenant's id does not give its salt, so no other
// tenant can share its prefix-cache entries (or time them). The anonymous tenant has no salt:
// its requests keep the client's (anonymous clients are one tenant; they cannot be told
// apart to isolate them).
//
// Immutable once built: every method may be called from any thread. Tenant pointers it hands
// out live as long as the table; it is neither copied nor moved.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

#include "router/flow/tenants_config.h"

namespace switchyard::router::flow {

// A request's fairness id from the header is used only up to this size (else the tenant's id).
inline constexpr size_t kMaxFairnessIdBytes = 128;

// SHA-256 of an API key, as a config's `apiKeys` entries give it.
KeyDigest ApiKeyDigest(std::string_view key);

struct Tenant {
  std::string id;
  double weight = 1;
  TenantLimits limits;
  // The objectives it may name; nullopt: every one.
  std::optional<absl::flat_hash_set<std::string>> objectives;
  int32_t default_priority = 0;  // of its default objective; 0 without one
  std::string cache_salt;        // 64 hex digits; empty for the anonymous tenant
  bool anonymous = false;        // the tenant of requests without a key
};

class TenantTable {
 public:
  // REQUIRES: `config` came from ParseTenantsConfig (it is valid); `salt_secret` is not empty
  // (32 random bytes, or a secret shared by the router's replicas so that they agree on
  // salts).
  TenantTable(const TenantsConfig& config, std::string_view salt_secret);
  TenantTable(const TenantTable&) = delete;
  TenantTable& operator=(const TenantTable&) = delete;

  // The tenant `authorization` (the header's value; nullopt: no header) names. Unauthenticated
  // as the header comment says.
  absl::StatusOr<const Tenant*> Authenticate(std::optional<std::string_view> authorization) const;

  // The priority of a request of `tenant` that names `objective` (the header; nullopt or
  // empty: none): without one, the tenant's default. InvalidArgument for an objective not
  // configured (400), PermissionDenied for one the tenant may not use (403).
  absl::StatusOr<int32_t> Priority(const Tenant& tenant,
                                   std::optional<std::string_view> objective) const;

  // The fairness id of a request of `tenant`: the x-llm-d-inference-fairness-id header when
  // trustFairnessHeader is set and the header is 1 to kMaxFairnessIdBytes bytes; else the
  // tenant's id.
  std::string FairnessId(const Tenant& tenant, std::optional<std::string_view> header) const;

  // What the request's cache_salt must become, given the client's (nullopt: none); nullopt:
  // leave the body as it is. cacheSalt tenant: the tenant's salt; tenant+client: the tenant's
  // salt, then "." and the client's when it sent a non-empty one; client: nullopt. Always
  // nullopt for the anonymous tenant.
  std::optional<std::string> CacheSalt(const Tenant& tenant,
                                       std::optional<std::string_view> client_salt) const;

  const Tenant& anonymous() const { return tenants_.front(); }
  // Every tenant, the anonymous one first.
  absl::Span<const Tenant> tenants() const { return tenants_; }

 private:
  struct KeyEntry {
    KeyDigest digest;
    const Tenant* tenant;
  };

  const bool require_api_key_;
  const bool trust_fairness_header_;
  const CacheSaltMode cache_salt_mode_;
  std::vector<Tenant> tenants_;  // never resized after construction: Tenant* stay valid
  absl::flat_hash_map<std::string, int32_t> objective_priorities_;
  // By the digest's first 8 bytes; more than one entry only if two keys share them.
  absl::flat_hash_map<uint64_t, std::vector<KeyEntry>> keys_;
};

}  // namespace switchyard::router::flow
