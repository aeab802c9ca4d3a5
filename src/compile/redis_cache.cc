#include "compile/redis_cache.h"

#include <charconv>
#include <utility>

#include "absl/strings/ascii.h"
#include "fmt/format.h"
#include <hiredis/hiredis.h>

#include "base/file.h"
#include "base/status_macros.h"
#include "compile/cache_key.h"

namespace switchyard::compile {
namespace {

constexpr std::string_view kWho = "compile cache Redis";
constexpr size_t kMinSigningKeyBytes = 16;

}  // namespace

absl::StatusOr<std::string> ReadSigningKey(const std::string& path) {
  if (path.empty()) {
    return absl::InvalidArgumentError(
        "the Redis compile cache needs a signing key file: entries others load are code");
  }
  absl::StatusOr<std::string> text = base::ReadFile(path);
  if (!text.ok()) {
    return absl::InvalidArgumentError(
        fmt::format("compile cache signing key: {}", std::string(text.status().message())));
  }
  std::string key = *std::move(text);
  while (!key.empty() && absl::ascii_isspace(static_cast<unsigned char>(key.back())))
    key.pop_back();
  if (key.size() < kMinSigningKeyBytes) {
    return absl::InvalidArgumentError(
        fmt::format("compile cache signing key {} holds {} bytes, fewer than {}", path, key.size(),
                    kMinSigningKeyBytes));
  }
  return key;
}

absl::Status ParseRedisAddress(std::string_view address, RedisCacheOptions* options) {
  const size_t colon = address.rfind(':');
  int port = 0;
  if (colon != std::string_view::npos && colon > 0) {
    const std::string_view digits = address.substr(colon + 1);
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
    if (ec == std::errc() && end == digits.data() + digits.size() && port > 0 && port < 65536) {
      options->host = std::string(address.substr(0, colon));
      options->port = port;
      return absl::OkStatus();
    }
  }
  return absl::InvalidArgumentError(fmt::format("Redis address '{}' is not host:port", address));
}

absl::StatusOr<std::unique_ptr<RedisCache>> RedisCache::Open(RedisCacheOptions options) {
  SY_ASSIGN_OR_RETURN(std::string signing_key, ReadSigningKey(options.key_file));
  std::unique_ptr<RedisCache> cache(new RedisCache(std::move(options), std::move(signing_key)));
  base::MutexLock lock(&cache->mu_);
  const std::string_view ping[] = {"PING"};
  SY_RETURN_IF_ERROR(cache->Command(ping).status());
  return cache;
}

std::string RedisCache::ValueName(std::string_view key) const {
  return options_.key_prefix + std::string(key);
}

absl::StatusOr<kvx::RedisReply> RedisCache::Command(std::span<const std::string_view> argv) {
  const kvx::SigpipeBlock sigpipe_block;
  if (!connection_.has_value()) {
    SY_ASSIGN_OR_RETURN(kvx::RedisConnection connection,
                        kvx::RedisConnection::Connect(options_.host, options_.port,
                                                      options_.timeout, std::string(kWho)));
    connection_.emplace(std::move(connection));
  }
  absl::StatusOr<kvx::RedisReply> reply = connection_->Command(argv);
  if (!reply.ok()) {
    connection_.reset();
    return reply.status();
  }
  if ((*reply)->type == REDIS_REPLY_ERROR) {
    return absl::UnavailableError(fmt::format("{}: {}:{} answers {} with {}", kWho, options_.host,
                                              options_.port, argv[0], kvx::ReplyText(**reply)));
  }
  return reply;
}

absl::StatusOr<RedisEntry> RedisCache::Get(std::string_view key) {
  const std::string name = ValueName(key);
  const std::string_view argv[] = {"GET", name};
  kvx::RedisReply reply;
  {
    base::MutexLock lock(&mu_);
    SY_ASSIGN_OR_RETURN(reply, Command(argv));
  }
  if (reply->type == REDIS_REPLY_NIL)
    return absl::NotFoundError(name);
  if (reply->type != REDIS_REPLY_STRING)
    return absl::DataLossError(fmt::format("{} is not a string value", name));
  return DecodeRedisEntry(kvx::ReplyText(*reply), key, signing_key_, options_.requirements);
}

absl::Status RedisCache::Put(const EntryMetadata& metadata, std::string_view factors_json,
                             std::string_view artefact) {
  const std::string name = ValueName(metadata.key);
  const std::string value = EncodeRedisEntry(metadata, factors_json, artefact, signing_key_);
  const std::string_view argv[] = {"SET", name, value};
  base::MutexLock lock(&mu_);
  return Command(argv).status();
}

absl::Status RedisCache::Remove(std::string_view key) {
  const std::string name = ValueName(key);
  const std::string_view argv[] = {"DEL", name};
  base::MutexLock lock(&mu_);
  return Command(argv).status();
}

absl::StatusOr<std::vector<RedisEntryInfo>> RedisCache::List() {
  const std::string pattern = options_.key_prefix + "*";
  std::vector<RedisEntryInfo> entries;
  base::MutexLock lock(&mu_);
  std::string cursor = "0";
  do {
    const std::string_view scan[] = {"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"};
    SY_ASSIGN_OR_RETURN(kvx::RedisReply reply, Command(scan));
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 ||
        reply->element[1]->type != REDIS_REPLY_ARRAY) {
      return absl::UnavailableError(fmt::format("{}: unexpected SCAN reply", kWho));
    }
    cursor = std::string(kvx::ReplyText(*reply->element[0]));
    const redisReply& names = *reply->element[1];
    for (size_t k = 0; k < names.elements; ++k) {
      const std::string_view name = kvx::ReplyText(*names.element[k]);
      const std::string_view key = name.substr(options_.key_prefix.size());
      if (IsCacheKeyHex(key))
        entries.push_back({.key = std::string(key)});
    }
  } while (cursor != "0");
  for (RedisEntryInfo& entry : entries) {
    const std::string name = ValueName(entry.key);
    const std::string_view strlen[] = {"STRLEN", name};
    SY_ASSIGN_OR_RETURN(kvx::RedisReply size, Command(strlen));
    const std::string_view idle[] = {"OBJECT", "IDLETIME", name};
    absl::StatusOr<kvx::RedisReply> idle_s = Command(idle);
    entry.bytes = size->type == REDIS_REPLY_INTEGER ? static_cast<uint64_t>(size->integer) : 0;
    entry.idle_s = idle_s.ok() && (*idle_s)->type == REDIS_REPLY_INTEGER ? (*idle_s)->integer : 0;
  }
  return entries;
}

}  // namespace switchyard::compile
