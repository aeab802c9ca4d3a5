#include "api/internal/json_fields.h"

#include <algorithm>
#include <cmath>

#include "fmt/format.h"

#include "api/error.h"
#include "api/internal/number_fault.h"
#include "base/status_macros.h"

namespace switchyard::api::internal {
namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;

std::string_view TypeName(element_type type) {
  switch (type) {
    case element_type::ARRAY:
      return "an array";
    case element_type::OBJECT:
      return "an object";
    case element_type::INT64:
    case element_type::UINT64:
      return "an integer";
    case element_type::DOUBLE:
      return "a number";
    case element_type::STRING:
      return "a string";
    case element_type::BOOL:
      return "a boolean";
    case element_type::NULL_VALUE:
      return "null";
  }
  return "a value";
}

absl::Status WrongType(std::string_view param, std::string_view expected, element value) {
  return InvalidParam(param, fmt::format("{}: Input should be {}, got {}.", param, expected,
                                         TypeName(value.type())));
}

struct ThreadParser {
  simdjson::dom::parser parser;
  bool lent = false;
};
thread_local ThreadParser thread_parser;

}  // namespace

// Each names thread_parser once: every mention of a thread_local with a constructor is a call.
ParserLease::ParserLease() {
  ThreadParser& mine = thread_parser;
  if (mine.lent) {
    own_ = std::make_unique<simdjson::dom::parser>();
    parser_ = own_.get();
    return;
  }
  mine.lent = true;
  parser_ = &mine.parser;
}

ParserLease::~ParserLease() {
  if (own_ != nullptr)
    return;
  ThreadParser& mine = thread_parser;
  if (mine.parser.capacity() > kMaxKeptBytes)
    mine.parser = simdjson::dom::parser();
  mine.lent = false;
}

static_assert(RequestBody::kPaddingBytes >= simdjson::SIMDJSON_PADDING);

absl::Status ParseRequestFields(RequestBody request_body, size_t max_body_bytes, size_t max_depth,
                                simdjson::dom::parser* parser, FieldReader* fields) {
  const std::string_view body = request_body.text();
  if (body.size() > max_body_bytes) {
    return PayloadTooLarge(
        fmt::format("Request body exceeds the limit of {} bytes.", max_body_bytes));
  }
  if (parser->max_depth() != max_depth) {
    if (parser->allocate(std::max<size_t>(body.size(), 64), max_depth) != simdjson::SUCCESS)
      return absl::ResourceExhaustedError("Could not allocate the JSON parser.");
  }
  element root;
  const bool copy = request_body.spare_bytes() < RequestBody::kPaddingBytes;
  const simdjson::error_code error = parser->parse(body.data(), body.size(), copy).get(root);
  if (error == simdjson::DEPTH_ERROR) {
    return absl::InvalidArgumentError(
        fmt::format("Request body nests deeper than {} levels.", max_depth));
  }
  if (error == simdjson::EMPTY) {
    return absl::InvalidArgumentError("Request body is empty; expected a JSON object.");
  }
  if (error == simdjson::NUMBER_ERROR) {
    // Valid JSON whose number does not fit: name its field, as vLLM's validation does.
    // Valid but for its numbers when the body parses with them zeroed.
    std::string zeroed;
    const std::optional<NumberFault> fault = FindNumberFault(body, &zeroed);
    if (fault.has_value() && parser->parse(zeroed).get(root) == simdjson::SUCCESS)
      return NumberFaultError(*fault);
  }
  if (error) {
    return absl::InvalidArgumentError(
        fmt::format("Request body is not valid JSON: {}", simdjson::error_message(error)));
  }
  simdjson::dom::object object;
  if (root.get(object) != simdjson::SUCCESS)
    return absl::InvalidArgumentError("Request body must be a JSON object.");
  fields->List(object);
  return fields->CheckNoDuplicateKeys();
}

std::string RawJson(element value) {
  return simdjson::minify(value);
}

absl::StatusOr<int64_t> ReadInt(element value, std::string_view param, int64_t lo, int64_t hi) {
  int64_t v = 0;
  switch (value.type()) {
    case element_type::INT64:
      v = value.get_int64().value_unsafe();
      break;
    case element_type::UINT64:
      // Above INT64_MAX: out of range for every field we have.
      return InvalidParam(param, fmt::format("{} must be at most {}.", param, hi));
    case element_type::DOUBLE: {
      const double d = value.get_double().value_unsafe();
      if (!std::isfinite(d) || d != std::floor(d)) {
        return InvalidParam(param,
                            fmt::format("{}: Input should be a valid integer, got a number with a "
                                        "fractional part.",
                                        param));
      }
      if (d < static_cast<double>(lo))
        return InvalidParam(param, fmt::format("{} must be at least {}.", param, lo));
      if (d > static_cast<double>(hi))
        return InvalidParam(param, fmt::format("{} must be at most {}.", param, hi));
      v = static_cast<int64_t>(d);
      break;
    }
    default:
      return WrongType(param, "a valid integer", value);
  }
  if (v < lo)
    return InvalidParam(param, fmt::format("{} must be at least {}, got {}.", param, lo, v));
  if (v > hi)
    return InvalidParam(param, fmt::format("{} must be at most {}, got {}.", param, hi, v));
  return v;
}

absl::StatusOr<double> ReadDouble(element value, std::string_view param) {
  double d = 0;
  switch (value.type()) {
    case element_type::INT64:
      d = static_cast<double>(value.get_int64().value_unsafe());
      break;
    case element_type::UINT64:
      d = static_cast<double>(value.get_uint64().value_unsafe());
      break;
    case element_type::DOUBLE:
      d = value.get_double().value_unsafe();
      break;
    default:
      return WrongType(param, "a valid number", value);
  }
  if (!std::isfinite(d))
    return InvalidParam(param, fmt::format("{} must be a finite number.", param));
  return d;
}

absl::StatusOr<std::string_view> ReadString(element value, std::string_view param) {
  std::string_view s;
  if (value.get(s) != simdjson::SUCCESS)
    return WrongType(param, "a valid string", value);
  return s;
}

absl::StatusOr<int32_t> ReadTokenId(element value, std::string_view param) {
  auto id = ReadInt(value, param, 0, INT32_MAX);
  if (!id.ok())
    return id.status();
  return static_cast<int32_t>(*id);
}

absl::Status FieldReader::CompareKeys() const {
  absl::InlinedVector<std::string_view, 16> keys;
  for (const Field& field : fields_)
    keys.push_back(field.key);
  std::sort(keys.begin(), keys.end());
  auto dup = std::adjacent_find(keys.begin(), keys.end());
  if (dup == keys.end())
    return absl::OkStatus();
  // Only known field names are echoed; anything else could be arbitrary client bytes.
  return absl::InvalidArgumentError("Request body has a duplicate key.");
}

void FieldReader::List(simdjson::dom::object object) {
  fields_.reserve(object.size());
  for (auto field : object) {
    fields_.push_back({.key = field.key, .value = field.value, .read = false});
    const uint64_t bit = KeyBit(field.key);
    keys_share_bits_ = keys_share_bits_ || (present_keys_ & bit) != 0;
    present_keys_ |= bit;
  }
}

std::optional<element> FieldReader::Find(std::string_view key) {
  // The first match, as object::at_key. The length and first byte rule out most fields
  // without a memcmp call.
  for (Field& field : fields_) {
    if (field.key.size() == key.size() && (key.empty() || field.key[0] == key[0]) &&
        field.key == key) {
      field.read = true;
      if (field.value.is_null())
        return std::nullopt;
      return field.value;
    }
  }
  return std::nullopt;
}

absl::Status FieldReader::BoolPresent(std::string_view key, bool* out) {
  std::optional<element> value = Find(key);
  if (!value)
    return absl::OkStatus();
  if (value->get(*out) != simdjson::SUCCESS)
    return WrongType(key, "a valid boolean", *value);
  return absl::OkStatus();
}

absl::Status FieldReader::IntPresent(std::string_view key, int64_t lo, int64_t hi,
                                     std::optional<int64_t>* out) {
  std::optional<element> value = Find(key);
  if (!value)
    return absl::OkStatus();
  auto v = ReadInt(*value, key, lo, hi);
  if (!v.ok())
    return v.status();
  *out = *v;
  return absl::OkStatus();
}

absl::Status FieldReader::DoublePresent(std::string_view key, std::optional<double>* out) {
  std::optional<element> value = Find(key);
  if (!value)
    return absl::OkStatus();
  auto v = ReadDouble(*value, key);
  if (!v.ok())
    return v.status();
  *out = *v;
  return absl::OkStatus();
}

absl::Status FieldReader::StringPresent(std::string_view key, std::string* out) {
  std::optional<element> value = Find(key);
  if (!value)
    return absl::OkStatus();
  auto v = ReadString(*value, key);
  if (!v.ok())
    return v.status();
  *out = std::string(*v);
  return absl::OkStatus();
}

absl::Status FieldReader::StringOrListPresent(std::string_view key, size_t max_items,
                                              std::vector<std::string>* out) {
  std::optional<element> value = Find(key);
  if (!value)
    return absl::OkStatus();
  std::string_view s;
  if (value->get(s) == simdjson::SUCCESS) {
    out->assign(1, std::string(s));
    return absl::OkStatus();
  }
  simdjson::dom::array array;
  if (value->get(array) != simdjson::SUCCESS)
    return WrongType(key, "a string or a list of strings", *value);
  if (array.size() > max_items)
    return InvalidParam(key, fmt::format("{} may hold at most {} items.", key, max_items));
  out->clear();
  for (element item : array) {
    if (item.get(s) != simdjson::SUCCESS)
      return WrongType(key, "a string or a list of strings", item);
    out->emplace_back(s);
  }
  return absl::OkStatus();
}

absl::Status FieldReader::TokenIdsPresent(std::string_view key, size_t max_items,
                                          std::vector<int32_t>* out) {
  std::optional<element> value = Find(key);
  if (!value)
    return absl::OkStatus();
  simdjson::dom::array array;
  if (value->get(array) != simdjson::SUCCESS)
    return WrongType(key, "a list of token ids", *value);
  if (array.size() > max_items)
    return InvalidParam(key, fmt::format("{} may hold at most {} items.", key, max_items));
  out->clear();
  for (element item : array) {
    auto id = ReadTokenId(item, key);
    if (!id.ok())
      return id.status();
    out->push_back(*id);
  }
  return absl::OkStatus();
}

std::vector<std::string> FieldReader::UnknownKeys() const {
  std::vector<std::string> unknown;
  for (const Field& field : fields_) {
    if (!field.read)
      unknown.emplace_back(field.key);
  }
  return unknown;
}

}  // namespace switchyard::api::internal
