#include "router/internal/json_fields_rewrite.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "simdjson.h"

#include "base/json.h"

namespace switchyard::router::internal {
namespace {

absl::Status BodyNotAnObject() {
  return absl::InvalidArgumentError("the request body is not a JSON object");
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

}  // namespace

absl::StatusOr<std::string> RewriteTopLevelFields(std::string_view body,
                                                  std::initializer_list<std::string_view> drop,
                                                  std::string_view appended,
                                                  bool* found_last_drop) {
  simdjson::ondemand::parser parser;
  const simdjson::padded_string padded(body);
  simdjson::ondemand::document doc;
  simdjson::ondemand::object object;
  if (parser.iterate(padded).get(doc) || doc.get_object().get(object))
    return BodyNotAnObject();
  std::string out;
  out.reserve(body.size() + appended.size());
  out.push_back('{');
  for (auto field_result : object) {
    simdjson::ondemand::field field;
    std::string_view key;
    std::string_view value;
    if (std::move(field_result).get(field) || field.unescaped_key().get(key) ||
        RawValue(field.value()).get(value)) {
      return BodyNotAnObject();
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

absl::StatusOr<std::string> WithCacheSalt(std::string_view body, std::string_view salt) {
  std::string appended = ",\"cache_salt\":";
  base::AppendJsonString(salt, false, &appended);
  return RewriteTopLevelFields(body, {"cache_salt"}, appended);
}

}  // namespace switchyard::router::internal
