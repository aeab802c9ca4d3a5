#include "router/flow/tenant_table.h"

#include <array>
#include <cstring>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "fmt/format.h"
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include "base/logging.h"

namespace switchyard::router::flow {
namespace {

// Domain separation: the salt secret may be shared with other uses of an HMAC key.
constexpr std::string_view kSaltLabel = "switchyard cache salt";
// Longest objective name quoted back in an error (a configured one is at most this long).
constexpr size_t kMaxQuotedObjectiveBytes = 253;

std::string CacheSaltOf(std::string_view secret, std::string_view tenant_id) {
  std::string message(kSaltLabel);
  message.push_back('\0');
  message.append(tenant_id);
  std::array<unsigned char, EVP_MAX_MD_SIZE> mac{};
  unsigned int size = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac.data(), &size);
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(mac.data()), size));
}

uint64_t LookupPrefix(const KeyDigest& digest) {
  uint64_t prefix = 0;
  std::memcpy(&prefix, digest.data(), sizeof(prefix));
  return prefix;
}

// The credentials of "Bearer <token>" (RFC 6750: the scheme in any case, then one or more
// spaces); nullopt for another scheme or shape.
std::optional<std::string_view> BearerToken(std::string_view header) {
  const size_t space = header.find(' ');
  if (space == std::string_view::npos ||
      !absl::EqualsIgnoreCase(absl::string_view(header.data(), space), "bearer"))
    return std::nullopt;
  std::string_view token = header.substr(space + 1);
  while (!token.empty() && token.front() == ' ')
    token.remove_prefix(1);
  if (token.empty() || token.find_first_of(" \t") != std::string_view::npos)
    return std::nullopt;
  return token;
}

}  // namespace

KeyDigest ApiKeyDigest(std::string_view key) {
  KeyDigest digest;
  static_assert(SHA256_DIGEST_LENGTH == sizeof(KeyDigest));
  SHA256(reinterpret_cast<const unsigned char*>(key.data()), key.size(), digest.data());
  return digest;
}

TenantTable::TenantTable(const TenantsConfig& config, std::string_view salt_secret)
    : require_api_key_(config.require_api_key),
      trust_fairness_header_(config.trust_fairness_header),
      cache_salt_mode_(config.cache_salt) {
  SY_CHECK(!salt_secret.empty());
  for (const ObjectiveConfig& objective : config.objectives)
    objective_priorities_.try_emplace(objective.name, objective.priority);
  tenants_.reserve(config.tenants.size() + 1);
  Tenant& anonymous = tenants_.emplace_back();
  anonymous.id = kAnonymousTenantId;
  anonymous.anonymous = true;
  for (const TenantConfig& c : config.tenants) {
    Tenant& tenant = tenants_.emplace_back();
    tenant.id = c.id;
    tenant.weight = c.weight;
    tenant.limits = c.limits;
    if (c.objectives.has_value())
      tenant.objectives.emplace(c.objectives->begin(), c.objectives->end());
    if (c.default_objective.has_value()) {
      const auto it = objective_priorities_.find(*c.default_objective);
      SY_CHECK(it != objective_priorities_.end());
      tenant.default_priority = it->second;
    }
    tenant.cache_salt = CacheSaltOf(salt_secret, c.id);
  }
  // tenants_ is complete: its elements no longer move.
  for (size_t i = 0; i < config.tenants.size(); ++i) {
    for (const KeyDigest& digest : config.tenants[i].api_key_digests)
      keys_[LookupPrefix(digest)].push_back(KeyEntry{digest, &tenants_[i + 1]});
  }
}

absl::StatusOr<const Tenant*> TenantTable::Authenticate(
    std::optional<std::string_view> authorization) const {
  if (tenants_.size() == 1)
    return &anonymous();
  if (!authorization.has_value()) {
    if (require_api_key_) {
      return absl::UnauthenticatedError(
          "No API key provided: send one in an Authorization header (Authorization: Bearer "
          "<key>)");
    }
    return &anonymous();
  }
  const std::optional<std::string_view> token = BearerToken(*authorization);
  if (!token.has_value()) {
    return absl::UnauthenticatedError("Malformed Authorization header: expected \"Bearer <key>\"");
  }
  const KeyDigest digest = ApiKeyDigest(*token);
  if (const auto it = keys_.find(LookupPrefix(digest)); it != keys_.end()) {
    for (const KeyEntry& entry : it->second) {
      if (CRYPTO_memcmp(entry.digest.data(), digest.data(), digest.size()) == 0)
        return entry.tenant;
    }
  }
  return absl::UnauthenticatedError("Incorrect API key provided");
}

absl::StatusOr<int32_t> TenantTable::Priority(const Tenant& tenant,
                                              std::optional<std::string_view> objective) const {
  if (!objective.has_value() || objective->empty())
    return tenant.default_priority;
  // Debian's absl::string_view is not std::string_view: the heterogeneous lookup needs it.
  const absl::string_view name(objective->data(), objective->size());
  const auto it = objective_priorities_.find(name);
  if (it == objective_priorities_.end()) {
    return absl::InvalidArgumentError(
        fmt::format("x-llm-d-inference-objective: unknown objective {:?}",
                    objective->substr(0, kMaxQuotedObjectiveBytes)));
  }
  if (tenant.objectives.has_value() && !tenant.objectives->contains(name)) {
    return absl::PermissionDeniedError(
        fmt::format("tenant {} may not use objective {}", tenant.id, it->first));
  }
  return it->second;
}

std::string TenantTable::FairnessId(const Tenant& tenant,
                                    std::optional<std::string_view> header) const {
  if (trust_fairness_header_ && header.has_value() && !header->empty() &&
      header->size() <= kMaxFairnessIdBytes) {
    return std::string(*header);
  }
  return tenant.id;
}

std::optional<std::string> TenantTable::CacheSalt(
    const Tenant& tenant, std::optional<std::string_view> client_salt) const {
  if (tenant.anonymous)
    return std::nullopt;
  switch (cache_salt_mode_) {
    case CacheSaltMode::kClient:
      return std::nullopt;
    case CacheSaltMode::kTenant:
      return tenant.cache_salt;
    case CacheSaltMode::kTenantAndClient:
      if (!client_salt.has_value() || client_salt->empty())
        return tenant.cache_salt;
      // The tenant's salt has a fixed length, so no client's salt can make another tenant's.
      return fmt::format("{}.{}", tenant.cache_salt, *client_salt);
  }
  return std::nullopt;
}

}  // namespace switchyard::router::flow
