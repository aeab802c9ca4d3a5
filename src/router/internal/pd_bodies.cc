#include "router/internal/pd_bodies.h"

#include <utility>

#include "fmt/format.h"
#include "simdjson.h"

#include "router/internal/json_fields_rewrite.h"

namespace switchyard::router::internal {
namespace {

constexpr std::string_view kPrefillParams =
    R"({"do_remote_decode":true,"do_remote_prefill":false,"remote_engine_id":null,)"
    R"("remote_block_ids":null,"remote_host":null,"remote_port":null})";

absl::Status NotAnObject(std::string_view what) {
  return absl::InvalidArgumentError(fmt::format("{} is not a JSON object", what));
}

}  // namespace

absl::StatusOr<std::string> PrefillRequestBody(std::string_view body) {
  bool has_max_completion_tokens = false;
  std::string appended =
      fmt::format(R"(,"kv_transfer_params":{},"stream":false,"max_tokens":1)", kPrefillParams);
  absl::StatusOr<std::string> out = RewriteTopLevelFields(
      body,
      {"kv_transfer_params", "stream", "stream_options", "max_tokens", "max_completion_tokens"},
      appended, &has_max_completion_tokens);
  if (!out.ok() || !has_max_completion_tokens)
    return out;
  out->pop_back();  // '}'
  out->append(R"(,"max_completion_tokens":1})");
  return out;
}

absl::StatusOr<std::string> DecodeRequestBody(std::string_view body,
                                              std::string_view kv_transfer_params) {
  return RewriteTopLevelFields(body, {"kv_transfer_params"},
                               fmt::format(R"(,"kv_transfer_params":{})", kv_transfer_params),
                               nullptr);
}

absl::StatusOr<std::string> KvTransferParamsOf(std::string_view response) {
  simdjson::ondemand::parser parser;
  const simdjson::padded_string padded(response);
  simdjson::ondemand::document doc;
  simdjson::ondemand::object object;
  if (parser.iterate(padded).get(doc) || doc.get_object().get(object))
    return NotAnObject("the prefill response");
  simdjson::ondemand::value value;
  if (object.find_field_unordered("kv_transfer_params").get(value))
    return absl::NotFoundError("the prefill response has no kv_transfer_params");
  bool is_null = false;
  if (!value.is_null().get(is_null) && is_null)
    return absl::NotFoundError("the prefill response's kv_transfer_params is null");
  simdjson::ondemand::object params;
  std::string_view raw;
  if (value.get_object().get(params) || params.raw_json().get(raw))
    return NotAnObject("the prefill response's kv_transfer_params");
  return std::string(raw);
}

}  // namespace switchyard::router::internal
