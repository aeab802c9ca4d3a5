// switchyard kv-events-demo --endpoint E [--replay-endpoint R] [--topic T] [--count N]
// [--layout array|map] [--hashes int|bytes] [--hash-seed S]: drives a small KV cache manager
// through admissions, evictions and a prefix-cache reset and publishes its events the way a
// vLLM engine does, for subscribers to test against (tests/e2e/test_kv_events.py).
//
// Line protocol: prints {"endpoint": .., "replay_endpoint": ..} once the sockets are bound,
// then reads commands from stdin: "probe" publishes an empty batch (so a subscriber can tell
// its subscription is live), "run" publishes one batch per engine step and prints
// {"published": K}. Stops at end of input.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "cli/commands.h"
#include "cli/exit_code.h"
#include "fmt/format.h"

#include "base/json.h"
#include "base/status_macros.h"
#include "engine/kv_cache_manager.h"
#include "kvx/kv_event_publisher.h"

namespace switchyard::cli {
namespace {

struct DemoOptions {
  std::string endpoint = "tcp://*:5557";
  std::string replay_endpoint;
  std::string topic;
  int count = 3;
  std::string layout = "map";
  std::string hashes = "int";
  std::string hash_seed = "0";
};

double Now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Sequence i has a 9-token prompt (two full blocks of 4) and is freed at once; 4 blocks
// hold two sequences' caches, so from the third on each admission evicts. Returns the
// number of batches published.
absl::StatusOr<int> RunScenario(const DemoOptions& options, kvx::KvEventPublisher& publisher) {
  engine::KvCacheOptions cache;
  cache.num_blocks = 4;
  cache.block_size = 4;
  cache.hash_seed = options.hash_seed;
  cache.enable_events = true;
  SY_ASSIGN_OR_RETURN(auto manager, engine::KvCacheManager::Create(cache));
  int published = 0;
  auto step = [&] {
    kvx::KvEventBatch batch{Now(), manager->TakeEvents(), 0};
    if (!batch.events.empty() && publisher.Publish(std::move(batch)))
      ++published;
  };
  for (int i = 0; i < options.count; ++i) {
    std::vector<int32_t> tokens;
    tokens.reserve(9);
    for (int32_t t = 0; t < 9; ++t)
      tokens.push_back(i * 100 + t);
    SY_RETURN_IF_ERROR(manager->AddSequence(i, {}, std::nullopt));
    SY_ASSIGN_OR_RETURN(engine::PrefixHit hit, manager->GetComputedBlocks(i, tokens));
    SY_ASSIGN_OR_RETURN(
        engine::AllocationPlan plan,
        manager->Plan(i, tokens, static_cast<int32_t>(tokens.size()) - hit.num_tokens, hit));
    manager->Commit(plan, tokens);
    step();
    SY_RETURN_IF_ERROR(manager->Free(i));
  }
  SY_RETURN_IF_ERROR(manager->ResetPrefixCache());
  step();
  return published;
}

absl::Status Run(const DemoOptions& options) {
  kvx::KvEventPublisherOptions pub_options;
  pub_options.endpoint = options.endpoint;
  pub_options.replay_endpoint = options.replay_endpoint;
  pub_options.topic = options.topic;
  SY_ASSIGN_OR_RETURN(pub_options.encoding.layout, kvx::ParseEventLayout(options.layout));
  pub_options.encoding.hashes =
      options.hashes == "bytes" ? kvx::HashForm::kBytes : kvx::HashForm::kInt;
  SY_ASSIGN_OR_RETURN(std::unique_ptr<kvx::KvEventPublisher> publisher,
                      kvx::KvEventPublisher::Start(pub_options));
  fmt::print("{{\"endpoint\": {}, \"replay_endpoint\": {}}}\n",
             base::JsonString(publisher->endpoint()),
             base::JsonString(publisher->replay_endpoint()));
  std::fflush(stdout);
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line == "probe") {
      publisher->Publish({Now(), {}, 0});
    } else if (line == "run") {
      SY_ASSIGN_OR_RETURN(int published, RunScenario(options, *publisher));
      fmt::print("{{\"published\": {}}}\n", published);
      std::fflush(stdout);
    } else {
      return absl::InvalidArgumentError(fmt::format("unknown command \"{}\" (probe or run)", line));
    }
  }
  publisher->Stop();
  return absl::OkStatus();
}

}  // namespace

void RegisterKvEventsDemoCommand(CLI::App& app, int* exit_code) {
  auto options = std::make_shared<DemoOptions>();
  CLI::App* cmd = app.add_subcommand(
      "kv-events-demo", "Publish a scripted engine's KV events over ZeroMQ, as vLLM does");
  cmd->add_option("--endpoint", options->endpoint, "PUB endpoint (bound if it has * or ::)")
      ->capture_default_str();
  cmd->add_option("--replay-endpoint", options->replay_endpoint, "ROUTER replay endpoint");
  cmd->add_option("--topic", options->topic, "topic frame");
  cmd->add_option("--count", options->count, "sequences to admit")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  cmd->add_option("--layout", options->layout, "event encoding")
      ->check(CLI::IsMember({"array", "map", "map_batch"}))
      ->capture_default_str();
  cmd->add_option("--hashes", options->hashes, "block hash form")
      ->check(CLI::IsMember({"int", "bytes"}))
      ->capture_default_str();
  cmd->add_option("--hash-seed", options->hash_seed, "PYTHONHASHSEED for block hashes")
      ->capture_default_str();
  cmd->callback([options, exit_code] { *exit_code = ExitCode(Run(*options)); });
}

}  // namespace switchyard::cli
