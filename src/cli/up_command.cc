// switchyard up: a local fleet in one process: N engines on the bundled tiny model (or
// --model) and a router in front of them on loopback, with KV events feeding the router's
// precise prefix index; no external services. --sim N runs N simulated engines instead
// (the same engine with the forward pass replaced by the latency model). Prints the
// endpoint and a ready-to-paste curl. Ctrl-C (or SIGTERM) drains the router as `switchyard
// router` does (router_drain.h: requests in flight finish on the engines, up to
// --shutdown-timeout seconds; a second Ctrl-C ends them at once with clean errors), then
// stops the router and the engines, which have nothing of the router's left in flight.
//
// --pd P:D runs P prefill engines (kv_producer, llm-d.ai/role=prefill) and D decode engines
// (kv_consumer, role=decode) instead, sharing a KV secret made for this run (never written
// anywhere), and a router whose disagg-profile-handler moves a prompt's KV from a prefill
// engine to the decode engine when at least kPdNonCachedTokens of it are not cached there.
//
// --kv-p2p runs every engine as kv_both (one KV secret and one block hash seed) and adds
// llm-d's p2p-source-producer to the router: when the router picks an engine while another
// holds at least kP2pMinExtraTokens more of the prompt, the picked engine pulls those blocks
// from it instead of computing them.
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "cli/commands.h"
#include "cli/exit_code.h"
#include "cli/memory_estimate.h"
#include "cli/redis_child.h"
#include "cli/router_drain.h"
#include "cli/runner_factory.h"
#include "cli/tool_flags.h"
#include "fmt/format.h"

#include "base/config.h"
#include "base/file.h"
#include "base/random_bytes.h"
#include "base/status_macros.h"
#include "engine/engine_server.h"
#include "model/model_files.h"
#include "model/model_text.h"
#include "router/endpoint.h"
#include "router/flow/tenants_config.h"
#include "router/router_config.h"
#include "router/router_server.h"

namespace switchyard::cli {
namespace {

struct UpFlags {
  std::string model = "models/tiny-llama3";
  std::string name;
  int engines = 2;
  int sim = 0;
  std::string pd;  // "P:D"
  bool kv_p2p = false;
  std::string tenants;  // a YAML file with router.yaml's tenants: and objectives: sections
  bool flow_control = false;
  std::string host = "127.0.0.1";
  int port = 8080;
  size_t threads = 0;
  int64_t max_model_len = 0;
  int64_t kv_cache_memory_bytes = 0;
  double kv_offloading_size_gib = 0;
  bool kv_shared = false;
  bool kv_redis = false;
  double kv_redis_size_gib = 1;
  double shutdown_timeout_s = kDefaultShutdownTimeoutS;
  ToolFlags tools;  // passed to every engine
};

// Each engine's KV cache: as given, else 64 MiB (thousands of tokens of the bundled models)
// or, when more, what one sequence of max_model_len tokens needs, which the engine requires
// (a real model's full context: SmolLM2's 8192 tokens take 180 MiB).
absl::StatusOr<int64_t> KvCacheBytes(const UpFlags& f, const RunnerFlags& runner,
                                     const model::ModelFiles& files) {
  if (f.kv_cache_memory_bytes > 0)
    return f.kv_cache_memory_bytes;
  MemoryEstimateOptions options;
  options.max_model_len = f.max_model_len;
  options.block_size = runner.block_size;
  options.max_num_batched_tokens = runner.max_num_batched_tokens;
  SY_ASSIGN_OR_RETURN(MemoryEstimate estimate, EstimateMemory(files, options));
  return std::max<int64_t>(int64_t{64} << 20, static_cast<int64_t>(estimate.kv_cache_bytes));
}

// A prompt goes to a prefill engine when at least this many of its tokens (one block) are
// not cached on its decode engine.
constexpr int64_t kPdNonCachedTokens = 16;
// A pull costs a round trip and a lookup: worth it from 16 blocks of 16 tokens on.
constexpr int64_t kP2pMinExtraTokens = 256;

struct PdCounts {
  int prefill = 0;
  int decode = 0;
};

absl::StatusOr<PdCounts> ParsePd(const std::string& pd) {
  const std::vector<std::string> parts = absl::StrSplit(pd, ':');
  PdCounts counts;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &counts.prefill) ||
      !absl::SimpleAtoi(parts[1], &counts.decode) || counts.prefill < 1 || counts.decode < 1) {
    return absl::InvalidArgumentError(
        fmt::format("--pd must be P:D with P, D >= 1 (prefill and decode engines), got '{}'", pd));
  }
  return counts;
}

// 32 random bytes, hex: the KV peers' shared secret of one `up`.
std::string RandomSecret() {
  const std::string bytes = base::RandomBytes(32);
  return absl::BytesToHexString(absl::string_view(bytes.data(), bytes.size()));
}

absl::Status RunUp(const UpFlags& f) {
  const bool sim = f.sim > 0;
  const bool pd = !f.pd.empty();
  PdCounts pd_counts;
  if (pd) {
    if (sim)
      return absl::InvalidArgumentError("--pd runs CPU engines; it does not go with --sim");
    SY_ASSIGN_OR_RETURN(pd_counts, ParsePd(f.pd));
  }
  if (f.kv_p2p && (sim || pd)) {
    return absl::InvalidArgumentError(
        "--kv-p2p runs CPU engines that lend each other KV; it does not go with --sim or --pd");
  }
  const int n = pd ? pd_counts.prefill + pd_counts.decode : sim ? f.sim : f.engines;
  if (n < 1 || n > 64)
    return absl::InvalidArgumentError("--engines / --sim / --pd must make [1, 64] engines");
  const std::string kv_secret = pd || f.kv_p2p ? RandomSecret() : "";
  if (f.shutdown_timeout_s < 0)
    return absl::InvalidArgumentError("--shutdown-timeout must be >= 0");
  if (f.kv_offloading_size_gib < 0 || f.kv_redis_size_gib <= 0)
    return absl::InvalidArgumentError("--kv-offloading-size and --kv-redis-size must be >= 0");
  if ((f.kv_redis || f.kv_shared) && (sim || f.kv_offloading_size_gib <= 0)) {
    return absl::InvalidArgumentError(
        "--kv-redis and --kv-offloading-shared need CPU engines with a host KV tier "
        "(--kv-offloading-size)");
  }
  // One host tier for every engine: this run's own, removed when it ends.
  const std::string shared_tier = f.kv_shared ? fmt::format("up-{}", getpid()) : "";
  struct SharedTierRemover {
    std::string name;
    ~SharedTierRemover() {
      if (!name.empty())
        shm_unlink(("/switchyard-kv-" + name).c_str());
    }
  } remove_shared_tier{shared_tier};
  std::unique_ptr<RedisChild> redis;
  if (f.kv_redis) {
    SY_ASSIGN_OR_RETURN(redis,
                        RedisChild::Start(static_cast<int64_t>(f.kv_redis_size_gib * (1LL << 30))));
    std::printf("switchyard up: redis-server on 127.0.0.1:%d, the engines' shared KV tier\n",
                redis->port());
  }
  // Engines find each other's blocks (in a shared tier, or by a P2P lookup) only when their
  // block hashes agree:
  // one seed for all of them (PYTHONHASHSEED when set).
  const std::optional<std::string> hash_seed =
      (redis != nullptr || f.kv_shared || f.kv_p2p) &&
              !engine::BlockHasher::SeedFromEnvironment().has_value()
          ? std::optional<std::string>(RandomSecret())
          : engine::BlockHasher::SeedFromEnvironment();
  const std::string name =
      f.name.empty() ? std::filesystem::path(f.model).filename().string() : f.name;
  RunnerFlags runner;
  runner.backend = sim ? "sim" : "cpu";
  runner.sim_latency = "";  // the calibrated defaults
  const size_t cores = std::max(1u, std::thread::hardware_concurrency());
  runner.threads = f.threads > 0 ? f.threads : std::max<size_t>(1, cores / static_cast<size_t>(n));
  runner.max_num_batched_tokens = 512;
  runner.max_num_seqs = 32;
  SY_ASSIGN_OR_RETURN(std::unique_ptr<model::ModelFiles> files, model::ModelFiles::Open(f.model));
  if (!sim) {
    SY_ASSIGN_OR_RETURN(runner.kv_cache_memory_bytes, KvCacheBytes(f, runner, *files));
  }

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  std::vector<std::unique_ptr<engine::EngineServer>> engines;
  router::RouterConfig rc;
  rc.host = f.host;
  rc.port = f.port;
  rc.model = name;
  if (files->gguf() != nullptr) {
    // The router tokenizes with the GGUF's own vocabulary and template, as the engines do, so
    // its prefix scoring sees the engines' tokens.
    SY_ASSIGN_OR_RETURN(rc.built_tokenizer, model::LoadModelTokenizer(*files));
    if (auto tmpl = model::LoadModelChatTemplate(*files, *rc.built_tokenizer); tmpl.ok())
      rc.built_chat_template = *std::move(tmpl);
  } else if (std::filesystem::exists(std::filesystem::path(f.model) / "tokenizer.json")) {
    rc.tokenizer = f.model;
  }
  rc.scheduling_yaml =
      pd ? router::DisaggSchedulingYaml(router::PrefixScoring::kPrecise, kPdNonCachedTokens)
         : router::DefaultSchedulingYaml(
               router::PrefixScoring::kPrecise,
               f.kv_p2p ? std::optional<int64_t>(kP2pMinExtraTokens) : std::nullopt);
  if (f.flow_control)
    rc.scheduling_yaml += "featureGates: [flowControl]\n";
  if (!f.tenants.empty()) {
    SY_ASSIGN_OR_RETURN(std::string text, base::ReadFile(f.tenants));
    SY_ASSIGN_OR_RETURN(YAML::Node root, base::ParseYaml(text, f.tenants));
    SY_ASSIGN_OR_RETURN(rc.tenants, router::flow::ParseTenantsConfig(root, f.tenants));
  }
  router::PoolConfig pool;
  pool.name = "local";
  for (int i = 0; i < n; ++i) {
    engine::EngineServerOptions o;
    o.model = f.model;
    o.served_model_name = name;
    o.max_model_len = f.max_model_len;
    o.budget.max_num_seqs = runner.max_num_seqs;
    o.budget.max_num_batched_tokens = runner.max_num_batched_tokens;
    o.hash_seed = hash_seed;
    if (!sim && f.kv_offloading_size_gib > 0) {
      engine::KvOffloadOptions offload;
      offload.capacity_bytes = static_cast<int64_t>(f.kv_offloading_size_gib * (1LL << 30));
      offload.shared_host_tier = shared_tier;
      if (redis != nullptr) {
        offload.redis_host = "127.0.0.1";
        offload.redis_port = redis->port();
      }
      o.kv_offload = offload;
    }
    kvx::KvEventPublisherOptions events;
    events.endpoint = "tcp://127.0.0.1:*";
    events.replay_endpoint = "tcp://127.0.0.1:*";
    events.topic = "kv-events";
    events.thread_name = fmt::format("kv-events-{}", i);
    o.kv_events = events;
    o.api.http.host = "127.0.0.1";
    o.api.http.port = 0;
    o.version = SWITCHYARD_VERSION;
    const bool prefill = pd && i < pd_counts.prefill;
    if (pd) {
      kvx::KvTransferConfig kv;
      kv.role = prefill ? kvx::KvRole::kProducer : kvx::KvRole::kConsumer;
      // The engines share this process: each needs an id of its own.
      kv.engine_id = fmt::format("{}-{}-{}", name, prefill ? "prefill" : "decode", i);
      o.kv_transfer = kv;
      o.kv_secret = kv_secret;
    } else if (f.kv_p2p) {
      kvx::KvTransferConfig kv;
      kv.role = kvx::KvRole::kBoth;
      kv.engine_id = fmt::format("{}-{}", name, i);
      o.kv_transfer = kv;
      o.kv_secret = kv_secret;
    }
    SY_RETURN_IF_ERROR(ApplyToolFlags(f.tools, &o));
    SY_ASSIGN_OR_RETURN(o.make_runner, MakeRunnerFactory(runner));
    SY_ASSIGN_OR_RETURN(std::unique_ptr<engine::EngineServer> server,
                        engine::EngineServer::Start(std::move(o)));
    router::StaticEndpointConfig e;
    e.spec.address = fmt::format("127.0.0.1:{}", server->port());
    e.spec.name = e.spec.address;
    e.spec.engine = router::EngineKind::kVllm;
    e.spec.pool = pool.name;
    if (pd)
      e.spec.labels[router::kRoleLabel] = prefill ? "prefill" : "decode";
    if (f.kv_p2p) {
      e.spec.labels[router::kKvPortLabel] = std::to_string(server->core().kv_connector()->port());
    }
    e.kv_events = router::KvEventsSourceConfig{server->kv_events_endpoint(),
                                               server->kv_events_replay_endpoint(), "kv-events"};
    std::printf(
        "switchyard up: engine %d (%s%s) on http://%s%s\n", i, sim ? "sim" : "cpu",
        !pd       ? ""
        : prefill ? ", prefill"
                  : ", decode",
        e.spec.address.c_str(),
        f.kv_p2p ? fmt::format(", lending KV on {}", server->kv_transfer_address()).c_str() : "");
    pool.endpoints.push_back(std::move(e));
    engines.push_back(std::move(server));
  }
  rc.pools.push_back(std::move(pool));
  SY_ASSIGN_OR_RETURN(std::unique_ptr<router::RouterServer> router,
                      router::RouterServer::Start(rc));
  std::printf(
      "switchyard up: router serving %s on http://%s:%d\n\n"
      "  curl http://%s:%d/v1/chat/completions -H 'content-type: application/json' \\\n"
      "    -d '{\"model\": \"%s\", \"messages\": [{\"role\": \"user\", \"content\": \"Hello\"}], "
      "\"max_tokens\": 16}'\n\n"
      "Ctrl-C stops everything.\n",
      name.c_str(), f.host.c_str(), router->port(), f.host.c_str(), router->port(), name.c_str());
  std::fflush(stdout);
  DrainRouterOnSignal(signals, std::chrono::duration<double>(f.shutdown_timeout_s), router.get(),
                      "switchyard up");
  router->Stop();
  for (auto& e : engines)
    e->Stop();
  std::printf("switchyard up: stopped\n");
  return absl::OkStatus();
}

}  // namespace

void RegisterUpCommand(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<UpFlags>();
  CLI::App* cmd = app.add_subcommand("up", "Run a local fleet: engines and a router in front");
  cmd->add_option("--model", f->model, "model directory or .gguf")->capture_default_str();
  cmd->add_option("--served-model-name", f->name, "default: the model's directory name");
  cmd->add_option("--engines", f->engines, "CPU engines")->capture_default_str();
  cmd->add_option("--sim", f->sim, "run N simulated engines instead");
  cmd->add_option("--pd", f->pd,
                  "P:D: run P prefill and D decode engines instead, with prefill/decode "
                  "disaggregation in the router");
  cmd->add_flag("--kv-p2p", f->kv_p2p,
                "engines lend each other KV: the router names the engine holding more of a "
                "prompt, and the picked engine pulls those blocks instead of computing them");
  cmd->add_option("--tenants", f->tenants,
                  "YAML file with the router's tenants: and objectives: sections (API keys as "
                  "SHA-256 digests, limits, priorities; see router_config.h)")
      ->check(CLI::ExistingFile);
  cmd->add_flag("--flow-control", f->flow_control,
                "hold requests in the router while the engines are saturated (llm-d's "
                "flowControl feature gate, utilization-detector), by priority and tenant");
  cmd->add_option("--host", f->host)->capture_default_str();
  cmd->add_option("--port", f->port, "router port (0 picks a free one)")->capture_default_str();
  cmd->add_option("--threads", f->threads, "compute threads per engine; 0 = cores / engines");
  cmd->add_option("--max-model-len", f->max_model_len, "context length; 0 = the model's")
      ->capture_default_str();
  cmd->add_option("--kv-cache-memory-bytes", f->kv_cache_memory_bytes,
                  "KV cache per engine; 0 = 64 MiB, or one max-model-len sequence if more")
      ->capture_default_str();
  cmd->add_option("--kv-offloading-size", f->kv_offloading_size_gib,
                  "GiB of host memory per engine for a KV tier under its pool (0: none)")
      ->capture_default_str();
  cmd->add_flag("--kv-offloading-shared", f->kv_shared,
                "one host KV tier shared by all the engines (in /dev/shm, removed on exit)");
  cmd->add_flag("--kv-redis", f->kv_redis,
                "run a redis-server as a KV tier all engines share (needs Debian's "
                "redis-server and --kv-offloading-size)");
  cmd->add_option("--kv-redis-size", f->kv_redis_size_gib,
                  "GiB the shared Redis tier holds before it evicts old blocks")
      ->capture_default_str();
  cmd->add_option("--shutdown-timeout", f->shutdown_timeout_s,
                  "seconds requests in flight may take to finish after SIGTERM/Ctrl-C")
      ->capture_default_str();
  AddToolFlags(cmd, &f->tools);
  cmd->callback([f, exit_code] { *exit_code = ExitCode(RunUp(*f)); });
}

}  // namespace switchyard::cli
