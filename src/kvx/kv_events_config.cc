#include "kvx/kv_events_config.h"

#include <string>

#include "fmt/format.h"

#include "base/json.h"
#include "base/status_macros.h"

namespace switchyard::kvx {
namespace {

absl::Status BadKey(std::string_view key, std::string_view want) {
  return absl::InvalidArgumentError(
      fmt::format("--kv-events-config: \"{}\" must be {}", key, want));
}

}  // namespace

absl::StatusOr<std::optional<KvEventPublisherOptions>> ParseKvEventsConfig(std::string_view json) {
  SY_ASSIGN_OR_RETURN(std::unique_ptr<base::JsonDocument> doc,
                      base::JsonDocument::Parse(json, "--kv-events-config"));
  simdjson::dom::object root;
  if (doc->root().get_object().get(root) != simdjson::SUCCESS)
    return absl::InvalidArgumentError("--kv-events-config must be a JSON object");
  KvEventPublisherOptions options;
  bool enabled = false;
  std::string publisher = "zmq";
  for (auto field : root) {
    const std::string_view key(field.key.data(), field.key.size());
    simdjson::dom::element value = field.value;
    auto get_string = [&](std::string* out) -> absl::Status {
      std::string_view v;
      if (value.get_string().get(v) != simdjson::SUCCESS)
        return BadKey(key, "a string");
      *out = std::string(v);
      return absl::OkStatus();
    };
    auto get_int = [&](int32_t* out) -> absl::Status {
      int64_t v = 0;
      if (value.get_int64().get(v) != simdjson::SUCCESS || v < 0 || v > INT32_MAX)
        return BadKey(key, "a non-negative integer");
      *out = static_cast<int32_t>(v);
      return absl::OkStatus();
    };
    if (key == "enable_kv_cache_events") {
      if (value.get_bool().get(enabled) != simdjson::SUCCESS)
        return BadKey(key, "true or false");
    } else if (key == "publisher") {
      SY_RETURN_IF_ERROR(get_string(&publisher));
      if (publisher != "zmq" && publisher != "null")
        return BadKey(key, "\"zmq\" or \"null\"");
    } else if (key == "endpoint") {
      SY_RETURN_IF_ERROR(get_string(&options.endpoint));
    } else if (key == "replay_endpoint") {
      if (!value.is_null())
        SY_RETURN_IF_ERROR(get_string(&options.replay_endpoint));
    } else if (key == "topic") {
      SY_RETURN_IF_ERROR(get_string(&options.topic));
    } else if (key == "buffer_steps") {
      SY_RETURN_IF_ERROR(get_int(&options.buffer_steps));
    } else if (key == "hwm") {
      SY_RETURN_IF_ERROR(get_int(&options.hwm));
    } else if (key == "max_queue_size") {
      SY_RETURN_IF_ERROR(get_int(&options.max_queue_size));
      if (options.max_queue_size == 0)
        return BadKey(key, "a positive integer");
    } else if (key == "event_layout") {
      std::string name;
      SY_RETURN_IF_ERROR(get_string(&name));
      auto layout = ParseEventLayout(name);
      if (!layout.ok())
        return BadKey(key, "\"array\", \"map\" or \"map_batch\"");
      options.encoding.layout = *layout;
    } else if (key == "block_hash_format") {
      std::string form;
      SY_RETURN_IF_ERROR(get_string(&form));
      if (form != "int" && form != "bytes")
        return BadKey(key, "\"int\" or \"bytes\"");
      options.encoding.hashes = form == "int" ? HashForm::kInt : HashForm::kBytes;
    } else {
      return absl::InvalidArgumentError(fmt::format("--kv-events-config: unknown key \"{}\"", key));
    }
  }
  if (!enabled || publisher == "null")
    return std::nullopt;
  return options;
}

}  // namespace switchyard::kvx
