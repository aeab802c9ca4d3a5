#include "router/router_config.h"

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <filesystem>

#include "fmt/format.h"
#include "yaml-cpp/yaml.h"

#include "base/config.h"
#include "base/file.h"
#include "base/status_macros.h"
#include "net/host_port.h"

namespace switchyard::router {
namespace {

absl::Status Bad(std::string_view where, std::string_view what) {
  return absl::InvalidArgumentError(fmt::format("{}: {}", where, what));
}

absl::StatusOr<std::map<std::string, std::string>> ReadLabels(const YAML::Node& node,
                                                              const std::string& where) {
  std::map<std::string, std::string> labels;
  const YAML::Node l = node["labels"];
  if (!l)
    return labels;
  if (!l.IsMap())
    return Bad(where, "labels must be a map of strings");
  for (const auto& kv : l) {
    if (!kv.second.IsScalar())
      return Bad(where, "labels must be a map of strings");
    labels[kv.first.Scalar()] = kv.second.Scalar();
  }
  return labels;
}

absl::StatusOr<EngineKind> ReadEngine(const YAML::Node& node, const std::string& where) {
  SY_ASSIGN_OR_RETURN(std::string engine, base::YamlField<std::string>(node, "engine", "vllm"));
  absl::StatusOr<EngineKind> kind = ParseEngineKind(engine);
  if (!kind.ok())
    return Bad(where, std::string(kind.status().message()));
  return kind;
}

// `credentials: {apiKeyEnv: NAME}` or `{apiKeyFile: PATH}` under `node`, into the
// Authorization value and a description of its source; both empty when absent.
absl::Status ReadCredentials(const YAML::Node& node, const std::string& where,
                             const std::string& base_dir, std::string* authorization,
                             std::string* source) {
  const YAML::Node c = node["credentials"];
  if (!c)
    return absl::OkStatus();
  const std::string cw = where + ".credentials";
  if (!c.IsMap())
    return Bad(cw, "must be a map with apiKeyEnv or apiKeyFile");
  if (c["apiKey"])
    return Bad(cw, "keys are never inline: give apiKeyEnv (a variable) or apiKeyFile (a file)");
  SY_ASSIGN_OR_RETURN(std::string env, base::YamlField<std::string>(c, "apiKeyEnv", ""));
  SY_ASSIGN_OR_RETURN(std::string file, base::YamlField<std::string>(c, "apiKeyFile", ""));
  if (env.empty() == file.empty())
    return Bad(cw, "give one of apiKeyEnv or apiKeyFile");
  std::string key;
  if (!env.empty()) {
    const char* value = std::getenv(env.c_str());
    if (value == nullptr || *value == '\0')
      return Bad(cw, fmt::format("the environment variable {} is not set", env));
    key = value;
    *source = "env " + env;
  } else {
    std::filesystem::path path(file);
    if (path.is_relative())
      path = std::filesystem::path(base_dir) / path;
    absl::StatusOr<std::string> text = base::ReadFile(path.string());
    if (!text.ok())
      return Bad(cw, fmt::format("cannot read apiKeyFile {}", path.string()));
    key = *std::move(text);
    while (!key.empty() && std::isspace(static_cast<unsigned char>(key.back())))
      key.pop_back();
    if (key.empty())
      return Bad(cw, fmt::format("apiKeyFile {} is empty", path.string()));
    *source = "file " + path.string();
  }
  for (char ch : key) {
    if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f)
      return Bad(cw, fmt::format("the key from {} has a control character", *source));
  }
  *authorization = "Bearer " + key;
  return absl::OkStatus();
}

absl::Status ReadPositive(const YAML::Node& node, const std::string& key, const std::string& where,
                          int* out) {
  SY_ASSIGN_OR_RETURN(*out, base::YamlField<int>(node, key, *out));
  if (*out <= 0)
    return Bad(where, fmt::format("{} must be positive", key));
  return absl::OkStatus();
}

absl::Status ReadMs(const YAML::Node& node, const std::string& key, const std::string& where,
                    std::chrono::milliseconds* out) {
  int ms = static_cast<int>(out->count());
  SY_RETURN_IF_ERROR(ReadPositive(node, key, where, &ms));
  *out = std::chrono::milliseconds(ms);
  return absl::OkStatus();
}

absl::Status ReadOutlierDetection(const YAML::Node& node, const std::string& where,
                                  OutlierDetectionConfig* out) {
  if (!node.IsMap())
    return Bad(where, "must be a map");
  SY_ASSIGN_OR_RETURN(out->consecutive_5xx,
                      base::YamlField<int>(node, "consecutive5xx", out->consecutive_5xx));
  if (out->consecutive_5xx < 0)
    return Bad(where, "consecutive5xx must be >= 0 (0: off)");
  SY_RETURN_IF_ERROR(ReadMs(node, "intervalMs", where, &out->interval));
  SY_RETURN_IF_ERROR(ReadMs(node, "baseEjectionTimeMs", where, &out->base_ejection_time));
  SY_RETURN_IF_ERROR(ReadMs(node, "maxEjectionTimeMs", where, &out->max_ejection_time));
  SY_ASSIGN_OR_RETURN(out->max_ejection_percent,
                      base::YamlField<int>(node, "maxEjectionPercent", out->max_ejection_percent));
  if (out->max_ejection_percent < 0 || out->max_ejection_percent > 100)
    return Bad(where, "maxEjectionPercent must be in [0, 100]");
  return absl::OkStatus();
}

absl::Status ReadExtProc(const YAML::Node& node, const std::string& where, RouterConfig* out) {
  if (!node.IsMap())
    return Bad(where, "must be a map");
  SY_ASSIGN_OR_RETURN(out->ext_proc_port, base::YamlField<int>(node, "port", 9002));
  SY_ASSIGN_OR_RETURN(out->grpc_health_port,
                      base::YamlField<int>(node, "healthPort", out->grpc_health_port));
  if (out->ext_proc_port < 0 || out->ext_proc_port > 65535)
    return Bad(where, "port must be in [0, 65535]");
  if (out->grpc_health_port < -1 || out->grpc_health_port > 65535)
    return Bad(where, "healthPort must be in [0, 65535]");
  SY_ASSIGN_OR_RETURN(std::string mode,
                      base::YamlField<std::string>(node, "failureMode", "closed"));
  if (mode != "open" && mode != "closed")
    return Bad(where, "failureMode must be open or closed");
  out->ext_proc_fail_open = mode == "open";
  SY_ASSIGN_OR_RETURN(out->ext_proc_threads,
                      base::YamlField<int>(node, "threads", out->ext_proc_threads));
  if (out->ext_proc_threads < 1 || out->ext_proc_threads > 64)
    return Bad(where, "threads must be in [1, 64]");
  return absl::OkStatus();
}

absl::StatusOr<RouterConfig::SharedState> ReadSharedState(const YAML::Node& node,
                                                          const std::string& where) {
  if (!node.IsMap())
    return Bad(where, "must be a map");
  RouterConfig::SharedState out;
  SY_ASSIGN_OR_RETURN(std::string redis, base::YamlField<std::string>(node, "redis", ""));
  absl::StatusOr<net::HostPort> address = net::ParseHostPort(redis);
  if (!address.ok())
    return Bad(where,
               fmt::format("redis must be host:port: {}", std::string(address.status().message())));
  out.redis_host = address->host;
  out.redis_port = address->port;
  SY_ASSIGN_OR_RETURN(out.key, base::YamlField<std::string>(node, "key", out.key));
  SY_ASSIGN_OR_RETURN(out.replica_id, base::YamlField<std::string>(node, "replicaId", ""));
  if (out.key.empty())
    return Bad(where, "key must not be empty");
  if (out.replica_id.size() > 256)
    return Bad(where, "replicaId must be at most 256 bytes");
  SY_RETURN_IF_ERROR(ReadPositive(node, "intervalMs", where, &out.interval_ms));
  SY_RETURN_IF_ERROR(ReadPositive(node, "timeoutMs", where, &out.timeout_ms));
  SY_RETURN_IF_ERROR(ReadPositive(node, "history", where, &out.history));
  SY_RETURN_IF_ERROR(ReadPositive(node, "loadStaleMs", where, &out.load_stale_ms));
  return out;
}

absl::StatusOr<InferencePoolRefConfig> ReadInferencePoolRef(const YAML::Node& pool,
                                                            const YAML::Node& ref,
                                                            const std::string& where,
                                                            const std::string& base_dir) {
  if (!ref.IsMap())
    return Bad(where, "must be a map {namespace, name}");
  InferencePoolRefConfig c;
  SY_ASSIGN_OR_RETURN(c.name, base::YamlField<std::string>(ref, "name", ""));
  if (c.name.empty())
    return Bad(where, "name is required");
  SY_ASSIGN_OR_RETURN(c.namespace_name, base::YamlField<std::string>(ref, "namespace", ""));
  SY_ASSIGN_OR_RETURN(c.kubeconfig, base::YamlField<std::string>(pool, "kubeconfig", ""));
  if (!c.kubeconfig.empty() && std::filesystem::path(c.kubeconfig).is_relative())
    c.kubeconfig = (std::filesystem::path(base_dir) / c.kubeconfig).string();
  SY_ASSIGN_OR_RETURN(c.engine, ReadEngine(pool, where));
  return c;
}

absl::StatusOr<RouterConfig> Parse(const YAML::Node& root, std::string_view source,
                                   const std::string& base_dir) {
  if (!root.IsMap())
    return Bad(source, "not a YAML map");
  RouterConfig c;
  const std::string src(source);
  if (const YAML::Node listen = root["listen"]) {
    SY_ASSIGN_OR_RETURN(c.host, base::YamlField<std::string>(listen, "host", c.host));
    SY_ASSIGN_OR_RETURN(c.port, base::YamlField<int>(listen, "port", c.port));
    SY_RETURN_IF_ERROR(ReadPositive(listen, "threads", src + ": listen", &c.threads));
    SY_RETURN_IF_ERROR(
        ReadPositive(listen, "maxConnections", src + ": listen", &c.max_connections));
    SY_ASSIGN_OR_RETURN(
        c.max_connections_per_client,
        base::YamlField<int>(listen, "maxConnectionsPerClient", c.max_connections_per_client));
    if (c.max_connections_per_client < 0)
      return Bad(src + ": listen", "maxConnectionsPerClient must be 0 (no limit) or positive");
    if (c.port < 0 || c.port > 65535)
      return Bad(src + ": listen", "port must be in [0, 65535]");
  }
  SY_ASSIGN_OR_RETURN(c.model, base::YamlField<std::string>(root, "model", ""));
  if (c.model.empty())
    return Bad(source, "model (the served model name) is required");
  SY_ASSIGN_OR_RETURN(c.tokenizer, base::YamlField<std::string>(root, "tokenizer", ""));
  if (std::filesystem::path(c.tokenizer).extension() == ".gguf") {
    return Bad(src + ": tokenizer",
               "must be a Hugging Face directory with tokenizer.json; the router does not read "
               ".gguf files (omit it to route without tokens)");
  }
  const YAML::Node pools = root["pools"];
  if (!pools || !pools.IsSequence() || pools.size() == 0)
    return Bad(source, "pools must be a non-empty list");
  for (size_t i = 0; i < pools.size(); ++i) {
    const std::string where = fmt::format("{}: pools[{}]", source, i);
    PoolConfig pool;
    SY_ASSIGN_OR_RETURN(pool.name, base::YamlField<std::string>(pools[i], "name", "default"));
    SY_RETURN_IF_ERROR(
        ReadCredentials(pools[i], where, base_dir, &pool.authorization, &pool.credentials));
    const YAML::Node eps = pools[i]["endpoints"];
    for (size_t j = 0; eps && j < eps.size(); ++j) {
      const std::string ew = fmt::format("{}.endpoints[{}]", where, j);
      StaticEndpointConfig e;
      SY_ASSIGN_OR_RETURN(e.spec.address, base::YamlField<std::string>(eps[j], "address", ""));
      if (e.spec.address.empty() || e.spec.address.find(':') == std::string::npos)
        return Bad(ew, "address must be host:port");
      SY_ASSIGN_OR_RETURN(e.spec.name,
                          base::YamlField<std::string>(eps[j], "name", e.spec.address));
      SY_ASSIGN_OR_RETURN(e.spec.engine, ReadEngine(eps[j], ew));
      SY_ASSIGN_OR_RETURN(e.spec.labels, ReadLabels(eps[j], ew));
      e.spec.pool = pool.name;
      SY_RETURN_IF_ERROR(
          ReadCredentials(eps[j], ew, base_dir, &e.spec.authorization, &e.spec.credentials));
      if (e.spec.authorization.empty()) {
        e.spec.authorization = pool.authorization;
        e.spec.credentials = pool.credentials;
      }
      if (const YAML::Node kv = eps[j]["kvEvents"]) {
        KvEventsSourceConfig k;
        SY_ASSIGN_OR_RETURN(k.endpoint, base::YamlField<std::string>(kv, "endpoint", ""));
        SY_ASSIGN_OR_RETURN(k.replay_endpoint,
                            base::YamlField<std::string>(kv, "replayEndpoint", ""));
        SY_ASSIGN_OR_RETURN(k.topic, base::YamlField<std::string>(kv, "topic", ""));
        if (k.endpoint.empty())
          return Bad(ew, "kvEvents.endpoint is required");
        e.kv_events = std::move(k);
      }
      pool.endpoints.push_back(std::move(e));
    }
    const YAML::Node dns = pools[i]["dns"];
    for (size_t j = 0; dns && j < dns.size(); ++j) {
      const std::string dw = fmt::format("{}.dns[{}]", where, j);
      DnsMembersConfig d;
      SY_ASSIGN_OR_RETURN(d.name, base::YamlField<std::string>(dns[j], "name", ""));
      if (d.name.empty())
        return Bad(dw, "name is required");
      SY_RETURN_IF_ERROR(ReadPositive(dns[j], "port", dw, &d.port));
      SY_RETURN_IF_ERROR(ReadPositive(dns[j], "refreshSeconds", dw, &d.refresh_seconds));
      SY_ASSIGN_OR_RETURN(d.engine, ReadEngine(dns[j], dw));
      SY_ASSIGN_OR_RETURN(d.labels, ReadLabels(dns[j], dw));
      d.authorization = pool.authorization;
      d.credentials = pool.credentials;
      pool.dns.push_back(std::move(d));
    }
    if (const YAML::Node ip = pools[i]["inferencePool"]) {
      SY_ASSIGN_OR_RETURN(pool.inference_pool,
                          ReadInferencePoolRef(pools[i], ip, where + ".inferencePool", base_dir));
    } else if (pools[i]["kubeconfig"]) {
      return Bad(where, "kubeconfig is for an inferencePool pool");
    }
    if (pool.endpoints.empty() && pool.dns.empty() && !pool.inference_pool)
      return Bad(where, "a pool needs endpoints or dns (or an inferencePool)");
    c.pools.push_back(std::move(pool));
  }
  if (const YAML::Node s = root["scraping"]) {
    SY_RETURN_IF_ERROR(ReadPositive(s, "intervalMs", src + ": scraping", &c.scrape_interval_ms));
    SY_RETURN_IF_ERROR(ReadPositive(s, "stalenessMs", src + ": scraping", &c.staleness_ms));
    SY_RETURN_IF_ERROR(ReadPositive(s, "timeoutMs", src + ": scraping", &c.scrape_timeout_ms));
  }
  if (const YAML::Node p = root["proxy"]) {
    SY_RETURN_IF_ERROR(ReadPositive(p, "connectTimeoutMs", src + ": proxy", &c.connect_timeout_ms));
    SY_RETURN_IF_ERROR(
        ReadPositive(p, "firstByteTimeoutMs", src + ": proxy", &c.first_byte_timeout_ms));
    SY_RETURN_IF_ERROR(ReadPositive(p, "idleTimeoutMs", src + ": proxy", &c.idle_timeout_ms));
    SY_RETURN_IF_ERROR(ReadPositive(p, "requestTimeoutMs", src + ": proxy", &c.request_timeout_ms));
    SY_ASSIGN_OR_RETURN(c.max_retries, base::YamlField<int>(p, "maxRetries", c.max_retries));
    if (c.max_retries < 0 || c.max_retries > 16)
      return Bad(src + ": proxy", "maxRetries must be in [0, 16]");
  }
  if (const YAML::Node o = root["outlierDetection"])
    SY_RETURN_IF_ERROR(ReadOutlierDetection(o, src + ": outlierDetection", &c.outlier_detection));
  SY_ASSIGN_OR_RETURN(c.session_token_secret_env,
                      base::YamlField<std::string>(root, "sessionTokenSecretEnv", ""));
  SY_ASSIGN_OR_RETURN(c.tenants, flow::ParseTenantsConfig(root, source));
  if (const YAML::Node e = root["extProc"])
    SY_RETURN_IF_ERROR(ReadExtProc(e, src + ": extProc", &c));
  if (const YAML::Node s = root["sharedState"]) {
    SY_ASSIGN_OR_RETURN(c.shared_state, ReadSharedState(s, src + ": sharedState"));
  }
  const YAML::Node scheduling = root["scheduling"];
  SY_ASSIGN_OR_RETURN(std::string file,
                      base::YamlField<std::string>(root, "schedulingConfigFile", ""));
  if (scheduling && !file.empty())
    return Bad(source, "give scheduling or schedulingConfigFile, not both");
  if (scheduling) {
    YAML::Emitter out;
    out << scheduling;
    c.scheduling_yaml = out.c_str();
  } else if (!file.empty()) {
    std::filesystem::path path(file);
    if (path.is_relative())
      path = std::filesystem::path(base_dir) / path;
    SY_ASSIGN_OR_RETURN(c.scheduling_yaml, base::ReadFile(path.string()));
  } else {
    c.scheduling_yaml = DefaultSchedulingYaml();
  }
  return c;
}

}  // namespace

std::string DefaultSchedulingYaml(PrefixScoring prefix,
                                  std::optional<int64_t> p2p_min_extra_tokens) {
  const std::string prefix_params = prefix == PrefixScoring::kPrecise
                                        ? "\n  parameters: {mode: precise, blockSizeTokens: 16}"
                                        : "";
  const std::string p2p_plugin =
      p2p_min_extra_tokens.has_value()
          ? fmt::format("- type: p2p-source-producer\n  parameters: {{minExtraTokens: {}}}\n",
                        *p2p_min_extra_tokens)
          : "";
  const std::string p2p_ref =
      p2p_min_extra_tokens.has_value() ? "  - {pluginRef: p2p-source-producer}\n" : "";
  return fmt::format(R"(apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: prefix-cache-scorer{}
- type: queue-scorer
- type: kv-cache-utilization-scorer
- type: max-score-picker
{}schedulingProfiles:
- name: default
  plugins:
  - {{pluginRef: prefix-cache-scorer, weight: 3}}
  - {{pluginRef: queue-scorer, weight: 2}}
  - {{pluginRef: kv-cache-utilization-scorer, weight: 2}}
  - {{pluginRef: max-score-picker}}
{})",
                     prefix_params, p2p_plugin, p2p_ref);
}

std::string DisaggSchedulingYaml(PrefixScoring prefix, int64_t non_cached_tokens) {
  const std::string prefix_params = prefix == PrefixScoring::kPrecise
                                        ? "\n  parameters: {mode: precise, blockSizeTokens: 16}"
                                        : "";
  constexpr std::string_view kScorers =
      "  - {pluginRef: prefix-cache-scorer, weight: 3}\n"
      "  - {pluginRef: queue-scorer, weight: 2}\n"
      "  - {pluginRef: kv-cache-utilization-scorer, weight: 2}\n"
      "  - {pluginRef: max-score-picker}\n";
  return fmt::format(R"(apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: prefix-cache-scorer{}
- type: queue-scorer
- type: kv-cache-utilization-scorer
- type: max-score-picker
- type: decode-filter
- type: prefill-filter
- type: prefix-based-pd-decider
  parameters: {{nonCachedTokens: {}}}
- type: disagg-profile-handler
  parameters: {{deciders: {{prefill: prefix-based-pd-decider}}}}
schedulingProfiles:
- name: decode
  plugins:
  - {{pluginRef: decode-filter}}
{}- name: prefill
  plugins:
  - {{pluginRef: prefill-filter}}
{})",
                     prefix_params, non_cached_tokens, kScorers, kScorers);
}

absl::StatusOr<RouterConfig> ParseRouterConfig(std::string_view yaml, std::string_view source,
                                               const std::string& base_dir) {
  SY_ASSIGN_OR_RETURN(YAML::Node root, base::ParseYaml(yaml, source));
  try {
    return Parse(root, source, base_dir);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(fmt::format("{}: {}", source, e.what()));
  }
}

absl::StatusOr<RouterConfig> LoadRouterConfig(const std::string& path) {
  SY_ASSIGN_OR_RETURN(std::string text, base::ReadFile(path));
  return ParseRouterConfig(text, path, std::filesystem::path(path).parent_path().string());
}

}  // namespace switchyard::router
