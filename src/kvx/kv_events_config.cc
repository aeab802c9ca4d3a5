#include "kvx/kv_events_config.h"

#include <cstdint>
#include <string>

#include "fmt/format.h"

#include "base/json.h"
#include "base/json_fields.h"
#include "base/status_macros.h"

namespace switchyard::kvx {
namespace {

using base::FieldAs;
using base::JsonPath;

// The field `key` of the object at `at`: a count in [min, INT32_MAX].
absl::StatusOr<int32_t> ReadCount(simdjson::dom::element value, std::string_view key,
                                  const JsonPath& at, int64_t min) {
  SY_ASSIGN_OR_RETURN(const int64_t count, FieldAs<int64_t>(value, key, at));
  if (count < min || count > INT32_MAX)
    return at.Child(key).Error(fmt::format("expected an integer in [{}, {}]", min, INT32_MAX));
  return static_cast<int32_t>(count);
}

}  // namespace

absl::StatusOr<std::optional<KvEventPublisherOptions>> ParseKvEventsConfig(std::string_view json) {
  constexpr std::string_view kSource = "--kv-events-config";
  SY_ASSIGN_OR_RETURN(std::unique_ptr<base::JsonDocument> doc,
                      base::JsonDocument::Parse(json, kSource));
  const JsonPath at(kSource);
  SY_ASSIGN_OR_RETURN(const simdjson::dom::object root,
                      base::JsonAs<simdjson::dom::object>(doc->root(), at));
  KvEventPublisherOptions options;
  bool enabled = false;
  std::string publisher = "zmq";
  for (auto field : root) {
    const std::string_view key(field.key.data(), field.key.size());
    const simdjson::dom::element value = field.value;
    if (key == "enable_kv_cache_events") {
      SY_ASSIGN_OR_RETURN(enabled, FieldAs<bool>(value, key, at));
    } else if (key == "publisher") {
      SY_ASSIGN_OR_RETURN(publisher, FieldAs<std::string>(value, key, at));
      if (publisher != "zmq" && publisher != "null")
        return at.Child(key).Error(R"(expected "zmq" or "null")");
    } else if (key == "endpoint") {
      SY_ASSIGN_OR_RETURN(options.endpoint, FieldAs<std::string>(value, key, at));
    } else if (key == "replay_endpoint") {
      if (!value.is_null()) {
        SY_ASSIGN_OR_RETURN(options.replay_endpoint, FieldAs<std::string>(value, key, at));
      }
    } else if (key == "topic") {
      SY_ASSIGN_OR_RETURN(options.topic, FieldAs<std::string>(value, key, at));
    } else if (key == "buffer_steps") {
      SY_ASSIGN_OR_RETURN(options.buffer_steps, ReadCount(value, key, at, 0));
    } else if (key == "hwm") {
      SY_ASSIGN_OR_RETURN(options.hwm, ReadCount(value, key, at, 0));
    } else if (key == "max_queue_size") {
      SY_ASSIGN_OR_RETURN(options.max_queue_size, ReadCount(value, key, at, 1));
    } else if (key == "event_layout") {
      SY_ASSIGN_OR_RETURN(const std::string_view name, FieldAs<std::string_view>(value, key, at));
      const absl::StatusOr<EventLayout> layout = ParseEventLayout(name);
      if (!layout.ok())
        return at.Child(key).Error(R"(expected "array", "map" or "map_batch")");
      options.encoding.layout = *layout;
    } else if (key == "block_hash_format") {
      SY_ASSIGN_OR_RETURN(const std::string_view form, FieldAs<std::string_view>(value, key, at));
      if (form != "int" && form != "bytes")
        return at.Child(key).Error(R"(expected "int" or "bytes")");
      options.encoding.hashes = form == "int" ? HashForm::kInt : HashForm::kBytes;
    } else {
      return at.Child(key).Error("unknown key");
    }
  }
  if (!enabled || publisher == "null")
    return std::nullopt;
  return options;
}

}  // namespace switchyard::kvx
