// switchyard engine --model PATH [vLLM's serving flags]: the OpenAI-compatible model
// server. Flags carry vLLM's names where vLLM has the flag. --backend sim replaces the
// forward pass by the simulated runner (sim/), keeping everything else.
//
// SIGINT and SIGTERM are blocked before any thread starts and taken by sigwait on the main
// thread, which then shuts down as vLLM does with --shutdown-timeout: with 0 (vLLM's
// default) what is in flight ends at once with clean errors; with N seconds the engine
// drains first (new generation requests and /health get 503, accepted ones go on for up to
// N seconds, and the engine exits as soon as they are done). A second signal during the
// drain ends it at once. Either way the process exits 0.
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "CLI/CLI.hpp"
#include "cli/commands.h"
#include "cli/compilation_flags.h"
#include "cli/exit_code.h"
#include "cli/runner_factory.h"
#include "cli/second_signal.h"
#include "cli/tool_flags.h"
#include "fmt/format.h"

#include "base/logging.h"
#include "base/status_macros.h"
#include "engine/engine_server.h"
#include "kvx/kv_events_config.h"
#include "kvx/kv_transfer_config.h"
#include "net/host_port.h"

namespace switchyard::cli {
namespace {

struct EngineFlags {
  RunnerFlags runner;
  std::string model;
  std::string served_model_name;
  std::string host = "0.0.0.0";
  int port = 8000;
  int64_t max_model_len = 0;
  int32_t long_prefill_token_threshold = 0;
  bool enable_prefix_caching = true;
  std::string scheduling_policy = "fcfs";
  std::string kv_events_config;
  std::string kv_transfer_config;
  double kv_offloading_size_gib = 0;
  std::string kv_offloading_backend = "native";
  int32_t kv_offloading_store_threshold = 1;
  std::string kv_offloading_disk_path;
  double kv_offloading_disk_size_gib = 0;
  std::string kv_offloading_redis;
  std::string kv_offloading_shared;
  std::string api_key;
  int http_threads = 2;
  double timeout_keep_alive_s = 5;  // uvicorn's default, as vLLM serves
  double header_timeout_s = 10;
  int64_t max_request_body_bytes = 4 << 20;
  int max_logprobs = 20;
  std::string generation_config = "auto";
  double shutdown_timeout_s = 0;  // vLLM's default: no drain
  double sse_keepalive_interval_s = 5;
  ToolFlags tools;
};

// After the first signal: the drain, for up to `timeout_s`, which a second signal ends.
// `signals` are blocked in every thread.
void Drain(engine::EngineServer& server, const sigset_t& signals, double timeout_s) {
  server.BeginDrain();
  if (timeout_s <= 0)
    return;
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::microseconds(static_cast<int64_t>(timeout_s * 1e6));
  const bool drained = AwaitUnlessSignalled(
      signals, deadline,
      [&server](std::chrono::steady_clock::time_point until) { return server.AwaitDrained(until); },
      [&server](int signal) {
        SY_LOG_INFO("engine: signal {} during the drain, ending it now", signal);
        server.InterruptDrain();
      });
  if (drained)
    SY_LOG_INFO("engine: drained");
  else
    SY_LOG_INFO("engine: drain ended with requests in flight; ending them");
}

absl::Status RunEngine(const EngineFlags& f) {
  engine::EngineServerOptions o;
  o.model = f.model;
  o.served_model_name = f.served_model_name;
  o.max_model_len = f.max_model_len;
  o.budget.max_num_seqs = f.runner.max_num_seqs;
  o.budget.max_num_batched_tokens = f.runner.max_num_batched_tokens;
  o.budget.long_prefill_token_threshold = f.long_prefill_token_threshold;
  if (f.scheduling_policy == "priority") {
    o.budget.policy = engine::SchedulingPolicy::kPriority;
  } else if (f.scheduling_policy != "fcfs") {
    return absl::InvalidArgumentError("--scheduling-policy must be fcfs or priority");
  }
  o.enable_prefix_caching = f.enable_prefix_caching;
  o.hash_seed = engine::BlockHasher::SeedFromEnvironment();
  if (!f.kv_events_config.empty()) {
    SY_ASSIGN_OR_RETURN(o.kv_events, kvx::ParseKvEventsConfig(f.kv_events_config));
  }
  if (!f.kv_transfer_config.empty()) {
    SY_ASSIGN_OR_RETURN(o.kv_transfer, kvx::ParseKvTransferConfig(f.kv_transfer_config));
    const char* secret = std::getenv("SWITCHYARD_KV_SECRET");
    if (secret == nullptr || *secret == '\0') {
      return absl::InvalidArgumentError(
          "--kv-transfer-config needs the KV peers' shared secret in SWITCHYARD_KV_SECRET "
          "(the same on every engine that exchanges KV)");
    }
    o.kv_secret = secret;
  }
  if (f.kv_offloading_size_gib < 0 || f.kv_offloading_store_threshold < 1) {
    return absl::InvalidArgumentError(
        "--kv-offloading-size must be >= 0 and --kv-offloading-store-threshold >= 1");
  }
  if (f.kv_offloading_size_gib > 0) {
    if (f.kv_offloading_backend != "native") {
      return absl::InvalidArgumentError(fmt::format(
          "--kv-offloading-backend {} is not supported (native is)", f.kv_offloading_backend));
    }
    engine::KvOffloadOptions offload;
    offload.capacity_bytes = static_cast<int64_t>(f.kv_offloading_size_gib * (1LL << 30));
    offload.store_threshold = f.kv_offloading_store_threshold;
    offload.disk_path = f.kv_offloading_disk_path;
    offload.shared_host_tier = f.kv_offloading_shared;
    offload.disk_capacity_bytes = static_cast<int64_t>(f.kv_offloading_disk_size_gib * (1LL << 30));
    if (!f.kv_offloading_redis.empty()) {
      absl::StatusOr<net::HostPort> redis = net::ParseHostPort(f.kv_offloading_redis);
      if (!redis.ok())
        return absl::InvalidArgumentError(
            fmt::format("--kv-offloading-redis: {}", std::string(redis.status().message())));
      offload.redis_host = std::move(redis->host);
      offload.redis_port = redis->port;
    }
    o.kv_offload = offload;
  } else if (!f.kv_offloading_disk_path.empty() || !f.kv_offloading_redis.empty() ||
             !f.kv_offloading_shared.empty()) {
    return absl::InvalidArgumentError(
        "--kv-offloading-disk-path, --kv-offloading-redis and --kv-offloading-shared need the "
        "host tier (--kv-offloading-size)");
  }
  o.api.http.host = f.host;
  o.api.http.port = f.port;
  o.api.http.num_threads = f.http_threads;
  if (f.timeout_keep_alive_s <= 0 || f.header_timeout_s <= 0 || f.max_request_body_bytes <= 0) {
    return absl::InvalidArgumentError(
        "--timeout-keep-alive, --http-header-timeout and --max-request-body-bytes must be "
        "positive");
  }
  auto ms = [](double s) { return std::chrono::milliseconds(static_cast<int64_t>(s * 1000)); };
  o.api.http.keep_alive_timeout = ms(f.timeout_keep_alive_s);
  o.api.http.header_timeout = ms(f.header_timeout_s);
  o.api.http.body_idle_timeout = ms(f.header_timeout_s);
  o.api.http.max_body_bytes = static_cast<size_t>(f.max_request_body_bytes);
  o.limits.max_body_bytes = static_cast<size_t>(f.max_request_body_bytes);
  o.api.api_key = f.api_key;
  if (o.api.api_key.empty()) {
    if (const char* key = std::getenv("VLLM_API_KEY"); key != nullptr)
      o.api.api_key = key;
  }
  if (const char* dev = std::getenv("VLLM_SERVER_DEV_MODE"); dev != nullptr)
    o.api.dev_mode = std::string_view(dev) == "1";
  o.limits.max_logprobs = f.max_logprobs;
  if (f.generation_config != "auto" && f.generation_config != "vllm")
    return absl::InvalidArgumentError("--generation-config must be auto or vllm");
  o.use_generation_config = f.generation_config == "auto";
  SY_RETURN_IF_ERROR(ApplyToolFlags(f.tools, &o));
  o.version = SWITCHYARD_VERSION;
  o.cache_dtype = f.runner.kv_cache_dtype;
  if (f.shutdown_timeout_s < 0 || f.sse_keepalive_interval_s < 0)
    return absl::InvalidArgumentError(
        "--shutdown-timeout and --sse-keepalive-interval must be >= 0");
  o.sse_keep_alive_interval = ms(f.sse_keepalive_interval_s);
  SY_ASSIGN_OR_RETURN(o.make_runner, MakeRunnerFactory(f.runner));

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  SY_ASSIGN_OR_RETURN(std::unique_ptr<engine::EngineServer> server,
                      engine::EngineServer::Start(std::move(o)));
  // One line on stdout that scripts and tests wait for.
  std::printf("switchyard engine: serving %s on http://%s:%d\n",
              server->context().served_model_name.c_str(), f.host.c_str(), server->port());
  if (!server->kv_events_endpoint().empty()) {
    std::printf(
        "switchyard engine: KV events on %s (replay %s)\n", server->kv_events_endpoint().c_str(),
        server->kv_events_replay_endpoint().empty() ? "off"
                                                    : server->kv_events_replay_endpoint().c_str());
  }
  if (!server->kv_transfer_address().empty()) {
    std::printf("switchyard engine: KV blocks lent on %s\n", server->kv_transfer_address().c_str());
  }
  std::fflush(stdout);
  int signal = 0;
  sigwait(&signals, &signal);
  SY_LOG_INFO("engine: signal {}, shutting down (--shutdown-timeout {} s)", signal,
              f.shutdown_timeout_s);
  Drain(*server, signals, f.shutdown_timeout_s);
  server->Stop();
  return absl::OkStatus();
}

}  // namespace

void RegisterEngineCommand(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<EngineFlags>();
  CLI::App* cmd = app.add_subcommand("engine", "Serve a model over the OpenAI API");
  cmd->add_option("--model", f->model, "model directory (HF layout) or .gguf file")->required();
  cmd->add_option("--served-model-name", f->served_model_name,
                  "name in the API (default: --model)");
  cmd->add_option("--host", f->host)->capture_default_str();
  cmd->add_option("--port", f->port, "0 picks a free port")->capture_default_str();
  cmd->add_option("--max-model-len", f->max_model_len, "context length; 0 = the model's")
      ->capture_default_str();
  cmd->add_option("--block-size", f->runner.block_size)->capture_default_str();
  cmd->add_option("--max-num-seqs", f->runner.max_num_seqs)->capture_default_str();
  cmd->add_option("--max-num-batched-tokens", f->runner.max_num_batched_tokens)
      ->capture_default_str();
  AddCompilationFlags(cmd, &f->runner.compilation);
  cmd->add_option("--long-prefill-token-threshold", f->long_prefill_token_threshold)
      ->capture_default_str();
  cmd->add_flag("--enable-prefix-caching,!--no-enable-prefix-caching", f->enable_prefix_caching,
                "automatic prefix caching (on by default)");
  cmd->add_option("--scheduling-policy", f->scheduling_policy, "fcfs or priority")
      ->capture_default_str();
  cmd->add_option("--kv-events-config", f->kv_events_config,
                  "JSON as vLLM's KVEventsConfig, e.g. '{\"enable_kv_cache_events\": true, "
                  "\"endpoint\": \"tcp://*:5557\"}'");
  cmd->add_option("--kv-transfer-config", f->kv_transfer_config,
                  "JSON as vLLM's KVTransferConfig for prefill/decode disaggregation, e.g. "
                  "'{\"kv_connector\": \"SwitchyardConnector\", \"kv_role\": "
                  "\"kv_producer\"}'; peers share the secret in SWITCHYARD_KV_SECRET");
  cmd->add_option("--kv-offloading-size", f->kv_offloading_size_gib,
                  "GiB of host memory for a KV tier under the pool: blocks leaving the pool are "
                  "kept there and loaded back on a prefix hit (0: none)")
      ->capture_default_str();
  cmd->add_option("--kv-offloading-backend", f->kv_offloading_backend,
                  "the KV tier's implementation: native")
      ->capture_default_str();
  cmd->add_option("--kv-offloading-store-threshold", f->kv_offloading_store_threshold,
                  "store a block in the KV tier only once prompts looked it up this many times")
      ->capture_default_str();
  cmd->add_option("--kv-offloading-disk-path", f->kv_offloading_disk_path,
                  "directory for a disk KV tier beside the host tier (the engine keeps its "
                  "entries in a folder of its own there, removed when it exits)");
  cmd->add_option("--kv-offloading-disk-size", f->kv_offloading_disk_size_gib,
                  "GiB of disk for that tier")
      ->capture_default_str();
  cmd->add_option("--kv-offloading-shared", f->kv_offloading_shared,
                  "NAME: share the host KV tier with every engine on this host given the same "
                  "NAME (same model, --kv-offloading-size and PYTHONHASHSEED), in "
                  "/dev/shm/switchyard-kv-NAME");
  cmd->add_option("--kv-offloading-redis", f->kv_offloading_redis,
                  "HOST:PORT of a Redis server for a remote KV tier shared by every engine "
                  "pointed at it (same model and PYTHONHASHSEED); bound its memory with "
                  "Redis's maxmemory and an LRU policy");
  cmd->add_option("--api-key", f->api_key, "require 'Authorization: Bearer KEY' (or VLLM_API_KEY)");
  cmd->add_option("--dtype", f->runner.dtype,
                  "weight dtype: auto (as stored), float32, float16 or bfloat16 (also float, "
                  "half, f32, f16, bf16)")
      ->capture_default_str();
  cmd->add_option("--kv-cache-dtype", f->runner.kv_cache_dtype,
                  "KV cache dtype: auto (f32 for f32 weights, else f16), float32, float16 or "
                  "bfloat16 (also float, half, f32, f16, bf16)")
      ->capture_default_str();
  cmd->add_option("--threads", f->runner.threads, "compute threads; 0 = one per core")
      ->capture_default_str();
  cmd->add_option("--http-threads", f->http_threads, "HTTP event loops")->capture_default_str();
  cmd->add_option("--timeout-keep-alive", f->timeout_keep_alive_s,
                  "seconds an idle keep-alive connection stays open")
      ->capture_default_str();
  cmd->add_option("--http-header-timeout", f->header_timeout_s,
                  "seconds a client may take to send the headers (and between body bytes); "
                  "slower clients get 408")
      ->capture_default_str();
  cmd->add_option("--max-request-body-bytes", f->max_request_body_bytes,
                  "larger request bodies get 413")
      ->capture_default_str();
  cmd->add_option("--kv-cache-memory-bytes", f->runner.kv_cache_memory_bytes,
                  "KV cache size when --num-gpu-blocks-override is 0")
      ->capture_default_str();
  cmd->add_option("--num-gpu-blocks-override", f->runner.num_gpu_blocks_override,
                  "KV cache blocks; 0 = from --kv-cache-memory-bytes")
      ->capture_default_str();
  cmd->add_option("--max-logprobs", f->max_logprobs)->capture_default_str();
  cmd->add_option("--generation-config", f->generation_config,
                  "auto: sampling defaults from generation_config.json; vllm: vLLM's")
      ->capture_default_str();
  AddToolFlags(cmd, &f->tools);
  cmd->add_option("--shutdown-timeout", f->shutdown_timeout_s,
                  "seconds that requests in flight may take to finish after SIGTERM/SIGINT "
                  "(new ones get 503, /health 503); what is left then ends with an error. "
                  "0 ends everything at once (vLLM's flag and default)")
      ->capture_default_str();
  cmd->add_option("--sse-keepalive-interval", f->sse_keepalive_interval_s,
                  "seconds of silence after which a stream gets an SSE comment "
                  "(': keep-alive'), e.g. while queued; 0 = never")
      ->capture_default_str();
  cmd->add_option("--backend", f->runner.backend, "cpu, or sim for the simulated forward pass")
      ->capture_default_str();
  cmd->add_flag("--sim-kv-memory", f->runner.sim_kv_memory,
                "sim: hold real KV bytes of the model's size, which KV transfers (tiers, P/D, "
                "P2P) move; the cache holds --num-gpu-blocks-override blocks, or as many as "
                "--kv-cache-memory-bytes holds");
  cmd->add_option("--sim-latency", f->runner.sim_latency,
                  "sim latency model, e.g. 'overhead_ms=2,prefill_us_per_token=100' or 'zero'");
  cmd->footer(
      "Environment: VLLM_API_KEY (as --api-key), PYTHONHASHSEED (block hash seed, as vLLM), "
      "VLLM_SERVER_DEV_MODE=1 (serves vLLM's development route POST /reset_prefix_cache).");
  cmd->callback([f, exit_code] { *exit_code = ExitCode(RunEngine(*f)); });
}

}  // namespace switchyard::cli
