// RouterConfig: `switchyard router --config router.yaml`. Everything but the scheduling
// section is ours; the scheduling section is an llm-d EndpointPickerConfig (inline under
// `scheduling:` or in the file `schedulingConfigFile:` names), so llm-d configs carry over.
//
//   listen: {host: 0.0.0.0, port: 8080, threads: 2,
//            maxConnections: 4096,          # past it the longest-idle/slowest is shed
//            maxConnectionsPerClient: 1024} # per client IP; 0: no limit
//   model: NAME                  # served model name clients use; keys the prefix index
//   tokenizer: PATH              # HF dir (tokenizer.json, chat template) the engines use
//                                # (omit: route without tokens). Not a .gguf: its reader
//                                # is in model/, which router/ may not use (it links runtime/)
//   pools:
//   - name: default
//     credentials: {apiKeyEnv: ENGINE_API_KEY}   # or {apiKeyFile: /run/secrets/engine-key}
//     endpoints:                 # static members
//     - address: 127.0.0.1:8001
//       engine: switchyard       # vllm | switchyard | sglang | llamacpp
//       labels: {llm-d.ai/role: decode}
//       kvEvents: {endpoint: tcp://127.0.0.1:5557, replayEndpoint: ..., topic: kv-events}
//       credentials: {apiKeyFile: ...}          # overrides the pool's for this endpoint
//     dns:                       # members from DNS A/AAAA records, re-resolved
//     - {name: engines.svc, port: 8000, engine: vllm, labels: {}, refreshSeconds: 10}
//   - name: gateway-pool         # members from a Kubernetes InferencePool (kube_pool_resolver.h)
//     inferencePool: {namespace: llm, name: my-pool}  # namespace: default the config's
//     kubeconfig: /path/kubeconfig   # omit: in-cluster (the pod's service account)
//     engine: vllm               # the engine kind of every pod found
//   scraping: {intervalMs: 50, stalenessMs: 2000, timeoutMs: 1000}
//   proxy: {connectTimeoutMs: 2000, firstByteTimeoutMs: 60000, idleTimeoutMs: 60000,
//           requestTimeoutMs: 600000, maxRetries: 2}
//                                # firstByteTimeoutMs: a stream's head (engines send it when
//                                # they queue the request); idleTimeoutMs: between body bytes
//                                # (SSE keep-alive comments count); requestTimeoutMs: a
//                                # non-streamed request's wait for its response, which comes
//                                # whole after any queueing: no liveness check (health is)
//   outlierDetection: {consecutive5xx: 5, intervalMs: 10000, baseEjectionTimeMs: 30000,
//                      maxEjectionTimeMs: 300000, maxEjectionPercent: 10}
//                                # passive health, as Envoy's (outlier_detection.h);
//                                # consecutive5xx: 0 turns it off
//   sessionTokenSecretEnv: SWITCHYARD_SESSION_SECRET
//   extProc: {port: 9002,        # Envoy ext_proc (the Endpoint Picker Protocol) over gRPC
//             healthPort: 9003,  # absent: off (router --ext-proc-port, --grpc-health-port)
//             failureMode: closed,  # on an internal error: closed answers 503; open lets
//                                # the request through without a destination
//             threads: 1}        # the streams' threads (more pay only past a core of picks)
//   sharedState:                 # router replicas that share state through Redis (the
//     redis: 127.0.0.1:6379      # prefix index, sessions, quotas, in-flight load:
//     key: switchyard:router     # shared/replica_sync.h); absent: each replica alone.
//     replicaId: ""              # unique per replica; absent: <hostname>-<pid>-<random>
//     intervalMs: 20, timeoutMs: 200, history: 2000, loadStaleMs: 1000}
//                                # replicas of one fleet give the same redis and key
//   tenants:                     # who may call, with what limits (flow/tenants_config.h);
//                                # absent: no auth, one anonymous tenant, no limits
//     requireApiKey: false       # true: a request without a known key is 401
//     trustFairnessHeader: false # true: x-llm-d-inference-fairness-id, when set, is the
//                                # fairness id in place of the tenant (a trusted gateway sets it)
//     cacheSalt: tenant          # tenant: the request's cache_salt becomes the tenant's own;
//                                # tenant+client: the tenant's, then the client's; client:
//                                # the client's is kept (no isolation between tenants)
//     list:
//     - id: team-a               # [A-Za-z0-9._-], 1-64 characters, unique; not "anonymous"
//       apiKeys: ["sha256:<64 hex digits>"]  # SHA-256 of each key, never the key itself;
//                                # unique across tenants (`printf %s KEY | sha256sum`)
//       weight: 1                # fairness weight, > 0
//       limits: {requestsPerSecond: 5, burst: 10, tokensPerMinute: 60000, maxConcurrent: 4,
//                maxQueued: 32}  # each optional, 0 or absent: none; burst defaults to
//                                # max(1, ceil(requestsPerSecond))
//       objectives: [interactive, batch]  # those it may use; absent: every one
//       defaultObjective: interactive     # without the header; absent: priority 0
//                                # (required when objectives is given)
//   objectives:                  # llm-d's InferenceObjective: a name and an int priority,
//   - {name: interactive, priority: 10}   # chosen per request with the
//   - {name: batch, priority: -1}         # x-llm-d-inference-objective header; negative
//                                         # priorities are sheddable
//
// Credentials: the API key of engines started with --api-key (vLLM's, llama-server's, ours),
// read when the config loads from the environment variable or the file named (the file's
// trailing whitespace dropped); never inline, so that the key stays out of the config file,
// and never printed (errors, logs and /debug/endpoints name only the variable or the file).
// The router sends `Authorization: Bearer <key>` with every request it forwards to such an
// endpoint, in place of the client's own Authorization header (the client's key is for the
// router's front door, not the engines), and with its /metrics and /v1/models scrapes. An
// endpoint without credentials gets the client's Authorization header as before.
//
// Plain values; errors name the offending key.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

#include "router/endpoint_table.h"
#include "router/engine_metrics.h"
#include "router/flow/tenants_config.h"
#include "router/outlier_detection.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace switchyard::router {

struct KvEventsSourceConfig {
  std::string endpoint;
  std::string replay_endpoint;
  std::string topic;
};

struct StaticEndpointConfig {
  EndpointSpec spec;
  std::optional<KvEventsSourceConfig> kv_events;
};

struct DnsMembersConfig {
  std::string name;
  int port = 8000;
  EngineKind engine = EngineKind::kVllm;
  std::map<std::string, std::string> labels;
  int refresh_seconds = 10;
  // The pool's credentials, for every member found (EndpointSpec).
  std::string authorization;
  std::string credentials;
};

// `inferencePool:` (with the pool's `kubeconfig:` and `engine:`): the ready pods an
// InferencePool selects, on each of its target ports.
struct InferencePoolRefConfig {
  std::string namespace_name;  // empty: the kubeconfig context's (or in-cluster) namespace
  std::string name;
  std::string kubeconfig;  // a path; empty: the in-cluster config
  EngineKind engine = EngineKind::kVllm;
};

struct PoolConfig {
  std::string name;
  // The pool's credentials (EndpointSpec::authorization and ::credentials), given to its
  // members that have none of their own, static and DNS ones alike.
  std::string authorization;
  std::string credentials;
  std::vector<StaticEndpointConfig> endpoints;
  std::vector<DnsMembersConfig> dns;
  std::optional<InferencePoolRefConfig> inference_pool;
};

struct RouterConfig {
  std::string host = "0.0.0.0";
  int port = 8080;
  int threads = 2;
  int max_connections = 4096;
  int max_connections_per_client = 1024;
  std::string model;
  std::string tokenizer;
  // A tokenizer and chat template the caller has built, used instead of `tokenizer`: what
  // `switchyard up` passes for a .gguf model, which router/ cannot read (it may not use
  // model/). Not set from YAML.
  std::shared_ptr<const text::Tokenizer> built_tokenizer;
  std::optional<text::ModelChatTemplate> built_chat_template;
  std::vector<PoolConfig> pools;
  int scrape_interval_ms = 50;
  int staleness_ms = 2000;
  int scrape_timeout_ms = 1000;
  int connect_timeout_ms = 2000;
  int first_byte_timeout_ms = 60'000;
  int idle_timeout_ms = 60'000;
  int request_timeout_ms = 600'000;
  int max_retries = 2;
  OutlierDetectionConfig outlier_detection;
  std::string session_token_secret_env;
  flow::TenantsConfig tenants;
  // The ext_proc gRPC server's port and its gRPC health service's (-1: off; 0: a free one).
  int ext_proc_port = -1;
  int grpc_health_port = -1;
  bool ext_proc_fail_open = false;
  int ext_proc_threads = 1;
  // `sharedState:` (replica_sync.h's options; the stream is "<key>:replicas").
  struct SharedState {
    std::string redis_host;
    int redis_port = 6379;
    std::string key = "switchyard:router";
    std::string replica_id;
    int interval_ms = 20;
    int timeout_ms = 200;
    int history = 2000;
    int load_stale_ms = 1000;
  };
  std::optional<SharedState> shared_state;
  // The EndpointPickerConfig YAML text (from `scheduling:` or schedulingConfigFile).
  std::string scheduling_yaml;
};

// Parses YAML text; `base_dir` resolves a relative schedulingConfigFile.
absl::StatusOr<RouterConfig> ParseRouterConfig(std::string_view yaml, std::string_view source,
                                               const std::string& base_dir);
absl::StatusOr<RouterConfig> LoadRouterConfig(const std::string& path);

// The scheduling config used when a router config has none: llm-d's Helm default profile
// (prefix 3, queue 2, kv-cache utilization 2) with max-score-picker; the prefix-cache-scorer
// approximate (router-side LRU) or precise (fed by KV events, 16-token blocks). With
// `p2p_min_extra_tokens`, the profile also has a p2p-source-producer of that minExtraTokens
// and no kvPort: each endpoint needs its kKvPortLabel to be a source.
enum class PrefixScoring { kApproximate, kPrecise };
std::string DefaultSchedulingYaml(PrefixScoring prefix = PrefixScoring::kApproximate,
                                  std::optional<int64_t> p2p_min_extra_tokens = std::nullopt);
// The same scorers in a decode and a prefill profile (decode-filter, prefill-filter) under a
// disagg-profile-handler whose prefix-based-pd-decider disaggregates a prompt with at least
// `non_cached_tokens` tokens not cached on its decode endpoint.
std::string DisaggSchedulingYaml(PrefixScoring prefix, int64_t non_cached_tokens);

}  // namespace switchyard::router
