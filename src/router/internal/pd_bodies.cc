#include "router/internal/pd_bodies.h"

#include <algorithm>
#include <initializer_list>
#include <utility>

#include "absl/strings/ascii.h"
#include "fmt/format.h"
#include "simdjson.h"

#include "base/json.h"

namespace switchyard::router::internal {
namespace {

constexpr std::string_view kPrefillParams =
    R"({"do_remote_decode":true,"do_remote_prefill":false,"remote_engine_id":null,)"
    R"("remote_block_ids":null,"remote_host":null,"remote_port":null})";

absl::Status NotAnObject(std::string_view what) {
  return absl::InvalidArgumentError(fmt::format("{} is not a JSON object", what));
}

// The raw text of a value, objects and arrays whole.
simdjson::simdjson_result<std::string_view> RawValue(simdjson::ondemand::value value) {
  simdjson::ondemand::json_type type;
  if (auto error = value.type().get(type))
    return error;
  if (type == simdjson::ondemand::json_type::object) {
    simdjson::ondemand::object object;
    if (auto error = value.get_object().get(object))
      return error;
    return object.raw_json();
  }
  if (type == simdjson::ondemand::json_type::array) {
    simdjson::ondemand::array array;
    if (auto error = value.get_array().get(array))
      return error;
    return array.raw_json();
  }
  // A scalar's token runs to the next one: without the whitespace after it.
  std::string_view token = value.raw_json_token();
  while (!token.empty() && absl::ascii_isspace(static_cast<unsigned char>(token.back())))
    token.remove_suffix(1);
  return token;
}

// `body`'s top-level fields, without those named in `drop`, then `appended` (",k":v pairs
// with a leading comma each). Sets *found_last_drop when the last name of `drop` was there.
absl::StatusOr<std::string> Rewrite(std::string_view body,
                                    std::initializer_list<std::string_view> drop,
                                    std::string_view appended, bool* found_last_drop) {
  simdjson::ondemand::parser parser;
  const simdjson::padded_string padded(body);
  simdjson::ondemand::document doc;
  simdjson::ondemand::object object;
  if (parser.iterate(padded).get(doc) || doc.get_object().get(object))
    return NotAnObject("the request body");
  std::string out;
  out.reserve(body.size() + appended.size());
  out.push_back('{');
  for (auto field_result : object) {
    simdjson::ondemand::field field;
    std::string_view key;
    std::string_view value;
    if (std::move(field_result).get(field) || field.unescaped_key().get(key) ||
        RawValue(field.value()).get(value)) {
      return NotAnObject("the request body");
    }
    if (std::find(drop.begin(), drop.end(), key) != drop.end()) {
      if (found_last_drop != nullptr && key == *(drop.end() - 1))
        *found_last_drop = true;
      continue;
    }
    if (out.size() > 1)
      out.push_back(',');
    base::AppendJsonString(key, false, &out);
    out.push_back(':');
    out.append(value);
  }
  if (out.size() == 1 && !appended.empty())
    appended.remove_prefix(1);  // no field before it: no comma
  out.append(appended);
  out.push_back('}');
  return out;
}

}  // namespace

absl::StatusOr<std::string> PrefillRequestBody(std::string_view body) {
  bool has_max_completion_tokens = false;
  std::string appended =
      fmt::format(R"(,"kv_transfer_params":{},"stream":false,"max_tokens":1)", kPrefillParams);
  absl::StatusOr<std::string> out = Rewrite(
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
  return Rewrite(body, {"kv_transfer_params"},
                 fmt::format(R"(,"kv_transfer_params":{})", kv_transfer_params), nullptr);
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
