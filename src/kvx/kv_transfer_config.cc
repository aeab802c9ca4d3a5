#include "kvx/kv_transfer_config.h"

#include <memory>

#include "fmt/format.h"

#include "base/json.h"
#include "base/json_fields.h"
#include "base/status_macros.h"

namespace switchyard::kvx {
namespace {

using base::FieldAs;
using base::JsonPath;

absl::StatusOr<int32_t> ReadInRange(simdjson::dom::element value, std::string_view key,
                                    const JsonPath& at, int64_t min, int64_t max) {
  SY_ASSIGN_OR_RETURN(const int64_t n, FieldAs<int64_t>(value, key, at));
  if (n < min || n > max)
    return at.Child(key).Error(fmt::format("expected an integer in [{}, {}]", min, max));
  return static_cast<int32_t>(n);
}

absl::Status ReadExtraConfig(simdjson::dom::element value, const JsonPath& at,
                             KvTransferConfig* config) {
  SY_ASSIGN_OR_RETURN(const simdjson::dom::object extra,
                      base::JsonAs<simdjson::dom::object>(value, at));
  for (auto field : extra) {
    const std::string_view key(field.key.data(), field.key.size());
    if (key == "lease_seconds") {
      SY_ASSIGN_OR_RETURN(config->lease_seconds, ReadInRange(field.value, key, at, 1, 86'400));
    } else if (key == "io_timeout_ms") {
      SY_ASSIGN_OR_RETURN(config->io_timeout_ms, ReadInRange(field.value, key, at, 1, 3'600'000));
    } else if (key == "load_threads") {
      SY_ASSIGN_OR_RETURN(config->load_threads, ReadInRange(field.value, key, at, 1, 64));
    } else {
      return at.Child(key).Error("unknown key (lease_seconds, io_timeout_ms, load_threads)");
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<KvTransferConfig> ParseKvTransferConfig(std::string_view json) {
  constexpr std::string_view kSource = "--kv-transfer-config";
  SY_ASSIGN_OR_RETURN(std::unique_ptr<base::JsonDocument> doc,
                      base::JsonDocument::Parse(json, kSource));
  const JsonPath at(kSource);
  SY_ASSIGN_OR_RETURN(const simdjson::dom::object root,
                      base::JsonAs<simdjson::dom::object>(doc->root(), at));
  KvTransferConfig config;
  bool has_connector = false, has_role = false;
  for (auto field : root) {
    const std::string_view key(field.key.data(), field.key.size());
    const simdjson::dom::element value = field.value;
    if (key == "kv_connector") {
      SY_ASSIGN_OR_RETURN(const std::string_view name, FieldAs<std::string_view>(value, key, at));
      if (name != kSwitchyardConnector) {
        return at.Child(key).Error(
            fmt::format("unknown connector \"{}\"; this engine moves KV with \"{}\"", name,
                        kSwitchyardConnector));
      }
      has_connector = true;
    } else if (key == "kv_role") {
      SY_ASSIGN_OR_RETURN(const std::string_view role, FieldAs<std::string_view>(value, key, at));
      if (role == "kv_producer") {
        config.role = KvRole::kProducer;
      } else if (role == "kv_consumer") {
        config.role = KvRole::kConsumer;
      } else if (role == "kv_both") {
        config.role = KvRole::kBoth;
      } else {
        return at.Child(key).Error(R"(expected "kv_producer", "kv_consumer" or "kv_both")");
      }
      has_role = true;
    } else if (key == "engine_id") {
      if (!value.is_null()) {
        SY_ASSIGN_OR_RETURN(config.engine_id, FieldAs<std::string>(value, key, at));
      }
    } else if (key == "kv_ip") {
      SY_ASSIGN_OR_RETURN(config.kv_ip, FieldAs<std::string>(value, key, at));
    } else if (key == "kv_port") {
      SY_ASSIGN_OR_RETURN(config.kv_port, ReadInRange(value, key, at, 0, 65535));
    } else if (key == "kv_connector_extra_config") {
      SY_RETURN_IF_ERROR(ReadExtraConfig(value, at.Child(key), &config));
    } else if (key == "kv_buffer_device" || key == "kv_buffer_size" || key == "kv_rank" ||
               key == "kv_parallel_size") {
      // vLLM fields for other connectors' buffers and ranks: nothing to configure here.
    } else {
      return at.Child(key).Error("unknown key");
    }
  }
  if (!has_connector)
    return at.Child("kv_connector").Error("missing required field");
  if (!has_role)
    return at.Child("kv_role").Error("missing required field");
  return config;
}

}  // namespace switchyard::kvx
