#include "engine/engine_server.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <utility>

#include "fmt/format.h"

#include "base/logging.h"
#include "base/status_macros.h"
#include "engine/startup_report.h"
#include "model/model_text.h"

namespace switchyard::engine {
namespace {

// How long Stop lets the last answers (the clean errors) reach their sockets before it
// closes the connections: enough for any client that reads.
constexpr std::chrono::seconds kFinalWriteTimeout{2};

}  // namespace

absl::StatusOr<std::unique_ptr<EngineServer>> EngineServer::Start(EngineServerOptions o) {
  if (!o.make_runner)
    return absl::InvalidArgumentError("no model runner factory");
  std::unique_ptr<EngineServer> s(new EngineServer());
  SY_ASSIGN_OR_RETURN(std::unique_ptr<model::ModelFiles> files, model::ModelFiles::Open(o.model));
  const model::ModelConfig config = files->config();
  SY_ASSIGN_OR_RETURN(s->tokenizer_, model::LoadModelTokenizer(*files));
  absl::StatusOr<text::ModelChatTemplate> tmpl =
      model::LoadModelChatTemplate(*files, *s->tokenizer_);
  if (tmpl.ok()) {
    SY_ASSIGN_OR_RETURN(s->chat_template_, text::ChatTemplate::Compile(tmpl->source));
    s->ctx_.chat_special_tokens = *tmpl;
  } else if (!absl::IsNotFound(tmpl.status())) {
    return tmpl.status();
  }
  GenerationDefaults defaults;
  if (o.use_generation_config) {
    SY_ASSIGN_OR_RETURN(defaults, LoadGenerationDefaults(files->generation_config_path()));
  }
  const std::string model_root = files->path();
  SY_ASSIGN_OR_RETURN(std::unique_ptr<ModelRunner> runner,
                      o.make_runner(std::move(files), *s->tokenizer_));
  const RunnerLimits limits = runner->limits();
  const std::string backend = runner->backend_name();
  RunnerStartup startup = runner->startup();

  const int64_t max_model_len =
      o.max_model_len > 0 ? o.max_model_len : config.max_position_embeddings;
  if (max_model_len > config.max_position_embeddings) {
    return absl::InvalidArgumentError(
        fmt::format("--max-model-len {} exceeds the model's max_position_embeddings {}",
                    max_model_len, config.max_position_embeddings));
  }
  const std::string name = o.served_model_name.empty() ? o.model : o.served_model_name;

  EngineMetricsOptions metrics_options;
  metrics_options.model_name = name;
  metrics_options.max_model_len = max_model_len;
  metrics_options.block_size = limits.block_size;
  metrics_options.num_gpu_blocks = limits.num_kv_blocks;
  metrics_options.enable_prefix_caching = o.enable_prefix_caching;
  metrics_options.cache_dtype = o.cache_dtype;
  if (o.kv_offload.has_value()) {
    metrics_options.kv_tier_media.emplace_back(kvx::kMediumCpu);
    if (!o.kv_offload->disk_path.empty())
      metrics_options.kv_tier_media.emplace_back(kvx::kMediumDisk);
    if (!o.kv_offload->redis_host.empty())
      metrics_options.kv_tier_media.emplace_back(kvx::kMediumRedis);
  }
  s->metrics_ = std::make_unique<EngineMetrics>(metrics_options);
  s->metrics_->SetStartup(StartupNumbersOf(startup));

  if (o.kv_events.has_value()) {
    SY_ASSIGN_OR_RETURN(s->publisher_, kvx::KvEventPublisher::Start(*o.kv_events));
  }

  EngineCoreOptions core;
  core.budget = o.budget;
  core.max_model_len = max_model_len;
  core.enable_prefix_caching = o.enable_prefix_caching;
  core.hash_seed = o.hash_seed;
  core.eos_token_id = s->tokenizer_->eos_id();
  for (int64_t id : config.eos_token_ids)
    core.extra_eos_ids.push_back(static_cast<int32_t>(id));
  core.keep_alive_interval = o.sse_keep_alive_interval;
  core.metrics = s->metrics_.get();
  core.kv_events = s->publisher_.get();
  // KV moved between engines or kept outside the process must come from the same weights:
  // the file's name and the shapes that a different model would change (a re-quantised file
  // of the same name is not caught).
  const std::string model_fingerprint =
      fmt::format("{}|{}|hidden={}|vocab={}", std::filesystem::path(model_root).filename().string(),
                  config.architecture, config.hidden_size, config.vocab_size);
  if (o.kv_transfer.has_value()) {
    KvConnectorOptions connector;
    connector.config = *o.kv_transfer;
    if (connector.config.engine_id.empty())
      connector.config.engine_id = fmt::format("{}-{}", name, getpid());
    connector.secret = o.kv_secret;
    connector.compatibility.model_fingerprint = model_fingerprint;
    core.kv_connector = std::move(connector);
  }
  core.kv_offload = o.kv_offload;
  if (core.kv_offload.has_value())
    core.kv_offload->model_fingerprint = model_fingerprint;
  SY_ASSIGN_OR_RETURN(s->core_, EngineCore::Start(core, std::move(runner), s->tokenizer_.get()));
  for (const KvTierStats& tier : s->core_->snapshot().kv_tiers) {
    const std::string_view medium = tier.medium;
    if (medium == kvx::kMediumRedis) {
      SY_LOG_INFO(
          "engine: KV tier {} (redis {}:{}, shared; its size is Redis's maxmemory), "
          "store threshold {}",
          medium, o.kv_offload->redis_host, o.kv_offload->redis_port,
          o.kv_offload->store_threshold);
      continue;
    }
    SY_LOG_INFO("engine: KV tier {} ({}): {} blocks of {} bytes ({:.2f} GiB), store threshold {}",
                medium, medium == kvx::kMediumCpu ? "host memory" : o.kv_offload->disk_path,
                tier.capacity_blocks, tier.block_bytes,
                static_cast<double>(tier.capacity_blocks * tier.block_bytes) / (1 << 30),
                o.kv_offload->store_threshold);
  }
  if (const KvConnector* kv = s->core_->kv_connector(); kv != nullptr) {
    SY_LOG_INFO("engine: KV transfer as {} (engine id {}), {}",
                kv->produces() && kv->consumes() ? "kv_both"
                : kv->produces()                 ? "kv_producer"
                                                 : "kv_consumer",
                core.kv_connector->config.engine_id,
                kv->produces() ? fmt::format("lending blocks on {}:{}",
                                             core.kv_connector->config.kv_ip, kv->port())
                               : std::string("pulling blocks from producers"));
  }

  ServingContext& ctx = s->ctx_;
  ctx.engine = s->core_.get();
  ctx.tokenizer = s->tokenizer_.get();
  ctx.chat_template = s->chat_template_.get();
  ctx.metrics = s->metrics_.get();
  ctx.served_model_name = name;
  ctx.model_root = model_root;
  ctx.max_model_len = max_model_len;
  ctx.created = std::chrono::duration_cast<std::chrono::seconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();
  ctx.limits = o.limits;
  ctx.defaults = defaults;
  ctx.priority_scheduling = o.budget.policy == SchedulingPolicy::kPriority;
  ctx.grammars = &s->grammars_;
  ctx.enable_auto_tool_choice = o.enable_auto_tool_choice;
  if (!o.tool_call_parser.empty()) {
    SY_ASSIGN_OR_RETURN(ctx.tool_parser, api::MakeToolParser(o.tool_call_parser));
  }
  if (!o.reasoning_parser.empty()) {
    SY_ASSIGN_OR_RETURN(ctx.reasoning_parser, api::MakeReasoningParser(o.reasoning_parser));
  }
  ctx.exclude_tools_when_tool_choice_none = o.exclude_tools_when_tool_choice_none;
  ctx.version = o.version;
  ctx.drain = &s->drain_;
  ctx.runner_limits = limits;
  ctx.startup = std::move(startup);
  SY_ASSIGN_OR_RETURN(s->api_, ApiServer::Start(o.api, &s->ctx_));
  SY_LOG_INFO("engine: serving {} on port {} ({} backend, {} KV blocks of {} tokens)", name,
              s->api_->port(), backend, limits.num_kv_blocks, limits.block_size);
  LogStartupReport(ctx.startup, limits);
  return s;
}

EngineServer::~EngineServer() {
  Stop();
}

void EngineServer::BeginDrain() {
  drain_.BeginDrain();
}

bool EngineServer::AwaitDrained(std::chrono::steady_clock::time_point deadline) {
  return drain_.AwaitIdle(deadline, true);
}

void EngineServer::InterruptDrain() {
  drain_.Interrupt();
}

void EngineServer::Stop() {
  drain_.BeginDrain();
  // The engine first, with the HTTP front still up: what is in flight ends with clean errors,
  // and requests arriving meanwhile are refused, not cut.
  if (core_ != nullptr)
    core_->Stop();
  if (!drain_.AwaitIdle(std::chrono::steady_clock::now() + kFinalWriteTimeout, false))
    SY_LOG_WARN("engine: {} answers not fully written at shutdown", drain_.num_in_flight());
  if (api_ != nullptr)
    api_->Stop();
  if (publisher_ != nullptr)
    publisher_->Stop();
}

std::string EngineServer::kv_events_endpoint() const {
  return publisher_ != nullptr ? publisher_->endpoint() : std::string();
}

std::string EngineServer::kv_events_replay_endpoint() const {
  return publisher_ != nullptr ? publisher_->replay_endpoint() : std::string();
}

std::string EngineServer::kv_transfer_address() const {
  const KvConnector* kv = core_->kv_connector();
  return kv != nullptr ? kv->lending_address() : std::string();
}

}  // namespace switchyard::engine
