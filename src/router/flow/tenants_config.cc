#include "router/flow/tenants_config.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "fmt/format.h"
#include "yaml-cpp/yaml.h"

#include "base/status_macros.h"

namespace switchyard::router::flow {
namespace {

constexpr size_t kMaxTenantIdBytes = 64;
// A Kubernetes object name's limit: llm-d's objectives are InferenceObjective objects.
constexpr size_t kMaxObjectiveNameBytes = 253;
constexpr std::string_view kDigestPrefix = "sha256:";

absl::Status Bad(std::string_view path, std::string_view what) {
  return absl::InvalidArgumentError(fmt::format("{}: {}", path, what));
}

bool IsName(std::string_view s, size_t max_bytes) {
  return !s.empty() && s.size() <= max_bytes && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
  });
}

// `node` must be a mapping whose keys are among `allowed`, each at most once.
absl::Status CheckMapping(const YAML::Node& node, const std::string& path,
                          std::initializer_list<std::string_view> allowed) {
  if (!node.IsMap())
    return Bad(path, "expected a mapping");
  absl::flat_hash_set<std::string> seen;
  for (const auto& kv : node) {
    if (!kv.first.IsScalar())
      return Bad(path, "keys must be plain names");
    const std::string& key = kv.first.Scalar();
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      std::string expected;
      for (std::string_view a : allowed)
        expected += fmt::format("{}{}", expected.empty() ? "" : ", ", a);
      return Bad(path, fmt::format("unknown key \"{}\" (expected {})", key, expected));
    }
    if (!seen.insert(key).second)
      return Bad(fmt::format("{}.{}", path, key), "given twice");
  }
  return absl::OkStatus();
}

bool Present(const YAML::Node& node) {
  return node.IsDefined() && !node.IsNull();
}

// Reads the scalar `map[key]` into *out; leaves *out alone when absent or null.
template <typename T>
absl::Status ReadScalar(const YAML::Node& map, const char* key, const std::string& path,
                        std::string_view expected, T* out) {
  const YAML::Node value = map[key];
  if (!Present(value))
    return absl::OkStatus();
  if (!value.IsScalar() || !YAML::convert<T>::decode(value, *out))
    return Bad(fmt::format("{}.{}", path, key), fmt::format("expected {}", expected));
  return absl::OkStatus();
}

absl::Status ReadLimit(const YAML::Node& map, const char* key, const std::string& path,
                       int64_t* out) {
  SY_RETURN_IF_ERROR(ReadScalar(map, key, path, "an integer", out));
  if (*out < 0)
    return Bad(fmt::format("{}.{}", path, key), "must be >= 0 (0: none)");
  return absl::OkStatus();
}

absl::StatusOr<TenantLimits> ParseLimits(const YAML::Node& node, const std::string& path) {
  SY_RETURN_IF_ERROR(CheckMapping(
      node, path, {"requestsPerSecond", "burst", "tokensPerMinute", "maxConcurrent", "maxQueued"}));
  TenantLimits limits;
  SY_RETURN_IF_ERROR(
      ReadScalar(node, "requestsPerSecond", path, "a number", &limits.requests_per_second));
  if (!std::isfinite(limits.requests_per_second) || limits.requests_per_second < 0)
    return Bad(path + ".requestsPerSecond", "must be a finite number >= 0 (0: none)");
  SY_RETURN_IF_ERROR(ReadLimit(node, "burst", path, &limits.burst));
  if (limits.burst > 0 && limits.requests_per_second == 0)
    return Bad(path + ".burst", "needs requestsPerSecond");
  SY_RETURN_IF_ERROR(ReadLimit(node, "tokensPerMinute", path, &limits.tokens_per_minute));
  SY_RETURN_IF_ERROR(ReadLimit(node, "maxConcurrent", path, &limits.max_concurrent));
  SY_RETURN_IF_ERROR(ReadLimit(node, "maxQueued", path, &limits.max_queued));
  return limits;
}

// "sha256:<64 hex digits>". The text is never echoed: it might be a key pasted by mistake.
absl::StatusOr<KeyDigest> ParseDigest(const YAML::Node& node, const std::string& path) {
  const absl::Status bad =
      Bad(path, fmt::format("expected \"{}\" and 64 hex digits", kDigestPrefix));
  std::string text;
  if (!node.IsScalar() || !YAML::convert<std::string>::decode(node, text))
    return bad;
  const std::string_view view(text);
  if (!view.starts_with(kDigestPrefix) ||
      view.size() != kDigestPrefix.size() + 2 * KeyDigest().size())
    return bad;
  const absl::string_view hex(view.data() + kDigestPrefix.size(), 2 * KeyDigest().size());
  if (!std::all_of(hex.begin(), hex.end(),
                   [](char c) { return absl::ascii_isxdigit(static_cast<unsigned char>(c)); }))
    return bad;
  const std::string bytes = absl::HexStringToBytes(hex);
  KeyDigest digest;
  std::transform(bytes.begin(), bytes.end(), digest.begin(),
                 [](char c) { return static_cast<unsigned char>(c); });
  return digest;
}

absl::StatusOr<std::vector<ObjectiveConfig>> ParseObjectives(const YAML::Node& node,
                                                             const std::string& path) {
  if (!node.IsSequence())
    return Bad(path, "expected a list of {name, priority}");
  std::vector<ObjectiveConfig> objectives;
  absl::flat_hash_map<std::string, size_t> index;
  for (size_t i = 0; i < node.size(); ++i) {
    const std::string where = fmt::format("{}[{}]", path, i);
    SY_RETURN_IF_ERROR(CheckMapping(node[i], where, {"name", "priority"}));
    ObjectiveConfig objective;
    SY_RETURN_IF_ERROR(ReadScalar(node[i], "name", where, "a name", &objective.name));
    if (!IsName(objective.name, kMaxObjectiveNameBytes)) {
      return Bad(where + ".name", fmt::format("expected 1 to {} characters of [A-Za-z0-9._-]",
                                              kMaxObjectiveNameBytes));
    }
    SY_RETURN_IF_ERROR(
        ReadScalar(node[i], "priority", where, "a 32-bit integer", &objective.priority));
    if (const auto [it, inserted] = index.try_emplace(objective.name, i); !inserted) {
      return Bad(where + ".name",
                 fmt::format("\"{}\" is also {}[{}]'s name", objective.name, path, it->second));
    }
    objectives.push_back(std::move(objective));
  }
  return objectives;
}

// `objectives` are the parsed objectives section's names; `key_paths` the path of every API
// key digest read so far (keys are unique across tenants).
absl::StatusOr<TenantConfig> ParseTenant(const YAML::Node& node, const std::string& path,
                                         const absl::flat_hash_set<std::string>& objectives,
                                         absl::flat_hash_map<KeyDigest, std::string>* key_paths) {
  SY_RETURN_IF_ERROR(CheckMapping(
      node, path, {"id", "apiKeys", "weight", "limits", "objectives", "defaultObjective"}));
  TenantConfig tenant;
  SY_RETURN_IF_ERROR(ReadScalar(node, "id", path, "an id", &tenant.id));
  if (!IsName(tenant.id, kMaxTenantIdBytes)) {
    return Bad(path + ".id",
               fmt::format("expected 1 to {} characters of [A-Za-z0-9._-]", kMaxTenantIdBytes));
  }
  if (tenant.id == kAnonymousTenantId)
    return Bad(path + ".id", "\"anonymous\" is reserved for requests without a key");

  const YAML::Node keys = node["apiKeys"];
  if (!Present(keys) || !keys.IsSequence() || keys.size() == 0)
    return Bad(path + ".apiKeys", "expected a non-empty list of \"sha256:<64 hex digits>\"");
  for (size_t i = 0; i < keys.size(); ++i) {
    const std::string where = fmt::format("{}.apiKeys[{}]", path, i);
    SY_ASSIGN_OR_RETURN(KeyDigest digest, ParseDigest(keys[i], where));
    if (const auto [it, inserted] = key_paths->try_emplace(digest, where); !inserted)
      return Bad(where, fmt::format("the same key as {}", it->second));
    tenant.api_key_digests.push_back(digest);
  }

  SY_RETURN_IF_ERROR(ReadScalar(node, "weight", path, "a number", &tenant.weight));
  if (!std::isfinite(tenant.weight) || tenant.weight <= 0)
    return Bad(path + ".weight", "must be a finite number > 0");

  if (const YAML::Node limits = node["limits"]; Present(limits)) {
    SY_ASSIGN_OR_RETURN(tenant.limits, ParseLimits(limits, path + ".limits"));
  }

  const auto check_defined = [&](const std::string& name, const std::string& where) {
    if (!objectives.contains(name))
      return Bad(where, fmt::format("no objective named \"{}\" in objectives", name));
    return absl::OkStatus();
  };
  if (const YAML::Node allowed = node["objectives"]; Present(allowed)) {
    const std::string where = path + ".objectives";
    if (!allowed.IsSequence())
      return Bad(where, "expected a list of objective names");
    if (allowed.size() == 0)
      return Bad(where, "name at least one objective (omit the key for every one)");
    std::vector<std::string>& names = tenant.objectives.emplace();
    for (size_t i = 0; i < allowed.size(); ++i) {
      const std::string item = fmt::format("{}[{}]", where, i);
      std::string name;
      if (!allowed[i].IsScalar() || !YAML::convert<std::string>::decode(allowed[i], name))
        return Bad(item, "expected an objective name");
      SY_RETURN_IF_ERROR(check_defined(name, item));
      if (std::find(names.begin(), names.end(), name) != names.end())
        return Bad(item, fmt::format("\"{}\" is listed twice", name));
      names.push_back(std::move(name));
    }
  }
  const std::string default_path = path + ".defaultObjective";
  if (!Present(node["defaultObjective"])) {
    // Otherwise a request without the header would get priority 0, which the list may forbid.
    if (tenant.objectives.has_value())
      return Bad(default_path, "required when objectives limits the tenant");
    return tenant;
  }
  std::string name;
  SY_RETURN_IF_ERROR(ReadScalar(node, "defaultObjective", path, "an objective name", &name));
  SY_RETURN_IF_ERROR(check_defined(name, default_path));
  if (tenant.objectives.has_value() &&
      std::find(tenant.objectives->begin(), tenant.objectives->end(), name) ==
          tenant.objectives->end()) {
    return Bad(default_path, fmt::format("\"{}\" is not in the tenant's objectives", name));
  }
  tenant.default_objective = std::move(name);
  return tenant;
}

absl::StatusOr<CacheSaltMode> ParseCacheSalt(const YAML::Node& node, const std::string& path) {
  std::string mode = "tenant";
  SY_RETURN_IF_ERROR(ReadScalar(node, "cacheSalt", path, "tenant, tenant+client or client", &mode));
  if (mode == "tenant")
    return CacheSaltMode::kTenant;
  if (mode == "tenant+client")
    return CacheSaltMode::kTenantAndClient;
  if (mode == "client")
    return CacheSaltMode::kClient;
  return Bad(path + ".cacheSalt", "expected tenant, tenant+client or client");
}

// Errors name the field's path from the root; the caller adds the source.
absl::StatusOr<TenantsConfig> Parse(const YAML::Node& root) {
  TenantsConfig config;
  absl::flat_hash_set<std::string> objective_names;
  if (const YAML::Node objectives = root["objectives"]; Present(objectives)) {
    SY_ASSIGN_OR_RETURN(config.objectives, ParseObjectives(objectives, "objectives"));
    for (const ObjectiveConfig& o : config.objectives)
      objective_names.insert(o.name);
  }
  const YAML::Node tenants = root["tenants"];
  if (!Present(tenants))
    return config;
  const std::string path = "tenants";
  SY_RETURN_IF_ERROR(
      CheckMapping(tenants, path, {"requireApiKey", "trustFairnessHeader", "cacheSalt", "list"}));
  SY_RETURN_IF_ERROR(
      ReadScalar(tenants, "requireApiKey", path, "true or false", &config.require_api_key));
  SY_RETURN_IF_ERROR(ReadScalar(tenants, "trustFairnessHeader", path, "true or false",
                                &config.trust_fairness_header));
  SY_ASSIGN_OR_RETURN(config.cache_salt, ParseCacheSalt(tenants, path));
  if (const YAML::Node list = tenants["list"]; Present(list)) {
    if (!list.IsSequence())
      return Bad(path + ".list", "expected a list of tenants");
    absl::flat_hash_map<std::string, size_t> ids;
    absl::flat_hash_map<KeyDigest, std::string> key_paths;
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string where = fmt::format("{}.list[{}]", path, i);
      SY_ASSIGN_OR_RETURN(TenantConfig tenant,
                          ParseTenant(list[i], where, objective_names, &key_paths));
      if (const auto [it, inserted] = ids.try_emplace(tenant.id, i); !inserted) {
        return Bad(where + ".id",
                   fmt::format("\"{}\" is also {}.list[{}]'s id", tenant.id, path, it->second));
      }
      config.tenants.push_back(std::move(tenant));
    }
  }
  if (config.require_api_key && config.tenants.empty())
    return Bad(path + ".requireApiKey", "no tenant has a key: tenants.list is empty");
  return config;
}

}  // namespace

absl::StatusOr<TenantsConfig> ParseTenantsConfig(const YAML::Node& root, std::string_view source) {
  if (!root.IsMap())
    return Bad(source, "not a YAML map");
  absl::StatusOr<TenantsConfig> config;
  try {
    config = Parse(root);
  } catch (const YAML::Exception& e) {
    config = absl::InvalidArgumentError(e.what());
  }
  if (!config.ok())
    return Bad(source, std::string(config.status().message()));
  return config;
}

}  // namespace switchyard::router::flow
