// switchyard cache ls|verify|prune|stats [--dir D] [--redis HOST:PORT --key-file F]: the
// compile cache's host directory (default: $XDG_CACHE_HOME/switchyard/compile or
// ~/.cache/switchyard/compile) and, with --redis, its Redis level too.
//
//   ls                       one line per entry: level, key, bytes, last use, key factors
//   verify [--remove-bad]    checks every entry (artefact hash, metadata, versions, ISA; the
//                            signature in Redis); fails (1) when bad entries remain
//   prune --max-bytes N|--all  removes least recently used entries down to N bytes (entries
//                            a process holds are skipped); --all removes every entry
//   stats                    entries and bytes per level, oldest and newest use
//
// Lines start with the level ("host" or "redis"), so scripts can split them.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "cli/commands.h"
#include "cli/exit_code.h"
#include "fmt/format.h"

#include "base/file.h"
#include "base/status_macros.h"
#include "compile/entry_files.h"
#include "compile/host_cache.h"
#include "compile/redis_cache.h"

namespace switchyard::cli {
namespace {

constexpr size_t kSummaryChars = 100;

struct CacheOptions {
  std::string dir;
  std::string redis;
  std::string key_file;
  bool remove_bad = false;
  std::optional<uint64_t> max_bytes;
  bool all = false;
};

// The levels a command works on: the host directory, and Redis when asked for.
struct Levels {
  std::unique_ptr<compile::HostCache> host;
  std::unique_ptr<compile::RedisCache> redis;
};

absl::StatusOr<Levels> OpenLevels(const CacheOptions& options) {
  Levels levels;
  const std::string root = options.dir.empty() ? compile::DefaultHostCacheRoot() : options.dir;
  std::error_code ec;
  if (!std::filesystem::is_directory(root, ec))
    return InputError(absl::NotFoundError(fmt::format("no compile cache directory {}", root)));
  SY_ASSIGN_OR_RETURN(levels.host, compile::HostCache::Open({.root = root}));
  if (!options.redis.empty()) {
    compile::RedisCacheOptions redis;
    SY_RETURN_IF_ERROR(compile::ParseRedisAddress(options.redis, &redis));
    redis.key_file = options.key_file;
    SY_ASSIGN_OR_RETURN(levels.redis, compile::RedisCache::Open(std::move(redis)));
  }
  return levels;
}

std::string RedisName(const compile::RedisCache& redis) {
  return fmt::format("{}:{}", redis.options().host, redis.options().port);
}

std::string UtcTime(int64_t unix_s) {
  const std::time_t t = static_cast<std::time_t>(unix_s);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

int64_t NowSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string Summary(const absl::StatusOr<std::string>& factors_json) {
  if (!factors_json.ok())
    return fmt::format("(no factors: {})", std::string(factors_json.status().message()));
  absl::StatusOr<std::string> summary = compile::SummarizeFactorsFile(*factors_json, kSummaryChars);
  return summary.ok() ? *summary
                      : fmt::format("(bad factors: {})", std::string(summary.status().message()));
}

std::vector<compile::HostEntryInfo> ByLastUse(std::vector<compile::HostEntryInfo> entries) {
  std::sort(entries.begin(), entries.end(),
            [](const auto& a, const auto& b) { return a.last_use_unix_ns > b.last_use_unix_ns; });
  return entries;
}

absl::Status RunLs(const CacheOptions& options) {
  SY_ASSIGN_OR_RETURN(Levels levels, OpenLevels(options));
  SY_ASSIGN_OR_RETURN(std::vector<compile::HostEntryInfo> entries, levels.host->List());
  for (const compile::HostEntryInfo& entry : ByLastUse(std::move(entries))) {
    std::printf("host  %s %10llu  %s  %s\n", entry.key.c_str(),
                static_cast<unsigned long long>(entry.bytes),
                UtcTime(entry.last_use_unix_ns / 1000000000).c_str(),
                Summary(base::ReadFile(entry.directory + "/" + compile::kFactorsFileName)).c_str());
  }
  if (levels.redis != nullptr) {
    SY_ASSIGN_OR_RETURN(std::vector<compile::RedisEntryInfo> values, levels.redis->List());
    const int64_t now = NowSeconds();
    for (const compile::RedisEntryInfo& value : values) {
      absl::StatusOr<compile::RedisEntry> entry = levels.redis->Get(value.key);
      const std::string summary =
          entry.ok() ? Summary(entry->factors_json)
                     : fmt::format("(bad: {})", std::string(entry.status().message()));
      std::printf("redis %s %10llu  %s  %s\n", value.key.c_str(),
                  static_cast<unsigned long long>(value.bytes), UtcTime(now - value.idle_s).c_str(),
                  summary.c_str());
    }
  }
  return absl::OkStatus();
}

absl::Status RunVerify(const CacheOptions& options) {
  SY_ASSIGN_OR_RETURN(Levels levels, OpenLevels(options));
  int64_t checked = 0;
  int64_t bad = 0;
  int64_t removed = 0;
  // Prints one entry's verdict and removes it when asked.
  auto report = [&](std::string_view level, const std::string& key, const absl::Status& status,
                    auto remove) -> absl::Status {
    ++checked;
    if (status.ok()) {
      std::printf("%-5s %s ok\n", std::string(level).c_str(), key.c_str());
      return absl::OkStatus();
    }
    if (!absl::IsDataLoss(status))
      return status;
    ++bad;
    const bool removing = options.remove_bad;
    if (removing)
      SY_RETURN_IF_ERROR(remove());
    removed += removing ? 1 : 0;
    std::printf("%-5s %s bad%s: %s\n", std::string(level).c_str(), key.c_str(),
                removing ? " (removed)" : "", std::string(status.message()).c_str());
    return absl::OkStatus();
  };
  SY_ASSIGN_OR_RETURN(std::vector<compile::HostEntryInfo> entries, levels.host->List());
  for (const compile::HostEntryInfo& entry : entries) {
    SY_RETURN_IF_ERROR(report("host", entry.key, levels.host->Verify(entry.key), [&] {
      // Under the key's lock: never in a race with a process storing its replacement.
      SY_ASSIGN_OR_RETURN(auto key_lock, levels.host->LockKey(entry.key));
      return levels.host->Remove(entry.key, compile::HostCache::IfHeld::kRemove);
    }));
  }
  if (levels.redis != nullptr) {
    SY_ASSIGN_OR_RETURN(std::vector<compile::RedisEntryInfo> values, levels.redis->List());
    for (const compile::RedisEntryInfo& value : values) {
      SY_RETURN_IF_ERROR(report("redis", value.key, levels.redis->Get(value.key).status(),
                                [&] { return levels.redis->Remove(value.key); }));
    }
  }
  std::printf("verified %lld entries: %lld ok, %lld bad, %lld removed\n",
              static_cast<long long>(checked), static_cast<long long>(checked - bad),
              static_cast<long long>(bad), static_cast<long long>(removed));
  if (bad > removed) {
    return InputError(absl::DataLossError(fmt::format(
        "{} bad compile cache entries (remove them with --remove-bad)", bad - removed)));
  }
  return absl::OkStatus();
}

absl::Status RunPrune(const CacheOptions& options) {
  if (options.all == options.max_bytes.has_value())
    return absl::InvalidArgumentError("cache prune needs exactly one of --max-bytes and --all");
  const uint64_t max_bytes = options.all ? 0 : *options.max_bytes;
  SY_ASSIGN_OR_RETURN(Levels levels, OpenLevels(options));
  SY_ASSIGN_OR_RETURN(compile::EvictionResult evicted, levels.host->EvictTo(max_bytes));
  std::printf("host  removed %lld entries (%llu bytes), %lld in use kept\n",
              static_cast<long long>(evicted.removed_entries),
              static_cast<unsigned long long>(evicted.removed_bytes),
              static_cast<long long>(evicted.skipped_in_use));
  if (levels.redis != nullptr) {
    SY_ASSIGN_OR_RETURN(std::vector<compile::RedisEntryInfo> values, levels.redis->List());
    // Least recently used first.
    std::sort(values.begin(), values.end(),
              [](const auto& a, const auto& b) { return a.idle_s > b.idle_s; });
    uint64_t total = 0;
    for (const compile::RedisEntryInfo& value : values)
      total += value.bytes;
    int64_t removed = 0;
    uint64_t removed_bytes = 0;
    for (const compile::RedisEntryInfo& value : values) {
      if (total <= max_bytes)
        break;
      SY_RETURN_IF_ERROR(levels.redis->Remove(value.key));
      total -= value.bytes;
      removed_bytes += value.bytes;
      ++removed;
    }
    std::printf("redis removed %lld entries (%llu bytes)\n", static_cast<long long>(removed),
                static_cast<unsigned long long>(removed_bytes));
  }
  return absl::OkStatus();
}

absl::Status RunStats(const CacheOptions& options) {
  SY_ASSIGN_OR_RETURN(Levels levels, OpenLevels(options));
  SY_ASSIGN_OR_RETURN(std::vector<compile::HostEntryInfo> entries, levels.host->List());
  uint64_t bytes = 0;
  for (const compile::HostEntryInfo& entry : entries)
    bytes += entry.bytes;
  std::printf("host  %s: %zu entries, %llu bytes", levels.host->root().c_str(), entries.size(),
              static_cast<unsigned long long>(bytes));
  if (!entries.empty()) {
    entries = ByLastUse(std::move(entries));
    std::printf(", last use %s (oldest) to %s (newest)",
                UtcTime(entries.back().last_use_unix_ns / 1000000000).c_str(),
                UtcTime(entries.front().last_use_unix_ns / 1000000000).c_str());
  }
  std::printf("\n");
  if (levels.redis != nullptr) {
    SY_ASSIGN_OR_RETURN(std::vector<compile::RedisEntryInfo> values, levels.redis->List());
    uint64_t redis_bytes = 0;
    for (const compile::RedisEntryInfo& value : values)
      redis_bytes += value.bytes;
    std::printf("redis %s: %zu entries, %llu bytes\n", RedisName(*levels.redis).c_str(),
                values.size(), static_cast<unsigned long long>(redis_bytes));
  }
  return absl::OkStatus();
}

CLI::App* AddLevelOptions(CLI::App* command, CacheOptions* options) {
  command->add_option("--dir", options->dir,
                      "host cache directory (default $XDG_CACHE_HOME/switchyard/compile or "
                      "~/.cache/switchyard/compile)");
  CLI::Option* redis =
      command->add_option("--redis", options->redis, "also the Redis level at HOST:PORT");
  command->add_option("--key-file", options->key_file, "the Redis level's signing key file")
      ->needs(redis);
  return command;
}

}  // namespace

void RegisterCacheCommand(CLI::App& app, int* exit_code) {
  CLI::App* cache = app.add_subcommand("cache", "Inspect and maintain the compile cache");
  cache->require_subcommand(1);
  auto options = std::make_shared<CacheOptions>();
  AddLevelOptions(cache->add_subcommand("ls", "List entries with their key factors"), options.get())
      ->callback([options, exit_code] { *exit_code = ExitCode(RunLs(*options)); });
  CLI::App* verify =
      AddLevelOptions(cache->add_subcommand("verify", "Check every entry"), options.get());
  verify->add_flag("--remove-bad", options->remove_bad, "remove the entries that fail");
  verify->callback([options, exit_code] { *exit_code = ExitCode(RunVerify(*options)); });
  CLI::App* prune = AddLevelOptions(
      cache->add_subcommand("prune", "Remove least recently used entries"), options.get());
  prune->add_option("--max-bytes", options->max_bytes, "keep at most this many bytes per level");
  prune->add_flag("--all", options->all, "remove every entry");
  prune->callback([options, exit_code] { *exit_code = ExitCode(RunPrune(*options)); });
  AddLevelOptions(cache->add_subcommand("stats", "Entries and bytes per level"), options.get())
      ->callback([options, exit_code] { *exit_code = ExitCode(RunStats(*options)); });
}

}  // namespace switchyard::cli
