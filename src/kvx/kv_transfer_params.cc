#include "kvx/kv_transfer_params.h"

#include "fmt/format.h"

#include "base/json.h"
#include "base/json_fields.h"
#include "base/status_macros.h"

namespace switchyard::kvx {

using base::FieldAs;
using base::JsonPath;

absl::StatusOr<KvTransferParams> ParseKvTransferParams(std::string_view json) {
  constexpr std::string_view kSource = "kv_transfer_params";
  SY_ASSIGN_OR_RETURN(std::unique_ptr<base::JsonDocument> doc,
                      base::JsonDocument::Parse(json, kSource));
  const JsonPath at(kSource);
  SY_ASSIGN_OR_RETURN(const simdjson::dom::object root,
                      base::JsonAs<simdjson::dom::object>(doc->root(), at));
  KvTransferParams params;
  for (auto field : root) {
    const std::string_view key(field.key.data(), field.key.size());
    const simdjson::dom::element value = field.value;
    if (value.is_null())
      continue;
    if (key == "do_remote_decode") {
      SY_ASSIGN_OR_RETURN(params.do_remote_decode, FieldAs<bool>(value, key, at));
    } else if (key == "do_remote_prefill") {
      SY_ASSIGN_OR_RETURN(params.do_remote_prefill, FieldAs<bool>(value, key, at));
    } else if (key == "remote_block_ids") {
      SY_ASSIGN_OR_RETURN(const simdjson::dom::array ids,
                          FieldAs<simdjson::dom::array>(value, key, at));
      const JsonPath ids_at = at.Child(key);
      size_t i = 0;
      for (simdjson::dom::element id : ids) {
        SY_ASSIGN_OR_RETURN(const int64_t block, base::JsonAs<int64_t>(id, ids_at.Index(i)));
        if (block < 0)
          return ids_at.Index(i).Error("expected a non-negative block id");
        params.remote_block_ids.push_back(block);
        ++i;
      }
    } else if (key == "remote_engine_id") {
      SY_ASSIGN_OR_RETURN(params.remote_engine_id, FieldAs<std::string>(value, key, at));
    } else if (key == "remote_host") {
      SY_ASSIGN_OR_RETURN(params.remote_host, FieldAs<std::string>(value, key, at));
    } else if (key == "remote_port") {
      SY_ASSIGN_OR_RETURN(params.remote_port, FieldAs<int64_t>(value, key, at));
      if (params.remote_port < 0 || params.remote_port > 65535)
        return at.Child(key).Error("expected a port in [0, 65535]");
    } else if (key == "remote_request_id") {
      SY_ASSIGN_OR_RETURN(params.remote_request_id, FieldAs<std::string>(value, key, at));
    } else if (key == "tp_size") {
      SY_ASSIGN_OR_RETURN(params.tp_size, FieldAs<int64_t>(value, key, at));
    }
  }
  return params;
}

std::string EncodeKvTransferParams(const KvTransferParams& params) {
  std::string ids;
  for (int64_t id : params.remote_block_ids)
    fmt::format_to(std::back_inserter(ids), "{}{}", ids.empty() ? "" : ",", id);
  return fmt::format(
      R"({{"do_remote_prefill":{},"do_remote_decode":{},"remote_block_ids":[{}],)"
      R"("remote_engine_id":{},"remote_host":{},"remote_port":{},"remote_request_id":{},)"
      R"("tp_size":{}}})",
      params.do_remote_prefill, params.do_remote_decode, ids,
      base::JsonString(params.remote_engine_id), base::JsonString(params.remote_host),
      params.remote_port, base::JsonString(params.remote_request_id), params.tp_size);
}

}  // namespace switchyard::kvx
