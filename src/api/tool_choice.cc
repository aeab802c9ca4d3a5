#include "api/tool_choice.h"

#include <string_view>
#include <utility>

#include "fmt/format.h"

#include "api/error.h"
#include "api/internal/json_fields.h"
#include "base/json.h"
#include "base/status_macros.h"

namespace switchyard::api {
namespace {

using simdjson::dom::element;
using simdjson::dom::object;

constexpr std::string_view kCorrectUsage =
    "Correct usage: `{\"type\": \"function\", \"function\": {\"name\": \"my_function\"}}`";

absl::Status ReadFunctions(element tools, ToolFields* out) {
  simdjson::dom::array list;
  if (tools.get(list) != simdjson::SUCCESS)
    return InvalidParam("tools", "tools: Input should be a valid list.");
  if (list.size() == 0) {
    return InvalidParam("tools",
                        "`tools` must not be an empty array. Either provide at least one tool or "
                        "omit the field entirely.");
  }
  size_t index = 0;
  for (element tool : list) {
    const std::string param = fmt::format("tools[{}].function", index++);
    object function;
    if (tool["function"].get(function) != simdjson::SUCCESS)
      return InvalidParam(param, fmt::format("{}: Field required.", param));
    std::string_view name;
    if (function["name"].get(name) != simdjson::SUCCESS)
      return InvalidParam(param + ".name", fmt::format("{}.name: Field required.", param));
    ToolFunction& f = out->functions.emplace_back();
    f.name = std::string(name);
    element parameters;
    if (function["parameters"].get(parameters) == simdjson::SUCCESS && !parameters.is_null()) {
      if (!parameters.is_object()) {
        return InvalidParam(
            param + ".parameters",
            fmt::format("{}.parameters: Input should be a valid dictionary.", param));
      }
      f.parameters = internal::RawJson(parameters);
    }
  }
  return absl::OkStatus();
}

// A named choice: {"type": "function", "function": {"name": ...}} naming a listed tool.
absl::Status ReadNamedChoice(element choice, ToolFields* out) {
  element function;
  if (choice["function"].get(function) != simdjson::SUCCESS || !function.is_object()) {
    const std::string shown =
        choice["function"].error() == simdjson::SUCCESS ? internal::RawJson(function) : "None";
    return InvalidParam("tool_choice.function",
                        fmt::format("Invalid value for `function`: `{}` in `tool_choice`! {}",
                                    shown, kCorrectUsage));
  }
  element name_value;
  if (function["name"].get(name_value) != simdjson::SUCCESS) {
    return InvalidParam(
        "tool_choice.function.name",
        fmt::format("Expected field `name` in `function` in `tool_choice`! {}", kCorrectUsage));
  }
  std::string_view name;
  if (name_value.get(name) != simdjson::SUCCESS || name.empty()) {
    return InvalidParam("tool_choice.function.name",
                        fmt::format("Invalid `name` in `function`: `{}` in `tool_choice`! {}",
                                    internal::RawJson(name_value), kCorrectUsage));
  }
  for (const ToolFunction& f : out->functions) {
    if (f.name == name) {
      out->choice = ToolChoiceMode::kNamed;
      out->choice_name = std::string(name);
      return absl::OkStatus();
    }
  }
  return InvalidParam("tool_choice",
                      "The tool specified in `tool_choice` does not match any of the specified "
                      "`tools`");
}

constexpr std::string_view kEmptyParameters = R"({"type":"object","properties":{}})";

std::string_view ParametersOf(const ToolFunction& f) {
  return f.parameters.empty() ? kEmptyParameters : std::string_view(f.parameters);
}

}  // namespace

absl::Status ReadToolFields(internal::FieldReader& fields, ToolFields* out) {
  const std::optional<element> tools = fields.Get("tools");
  if (tools) {
    SY_RETURN_IF_ERROR(ReadFunctions(*tools, out));
    out->tools = internal::RawJson(*tools);
    out->choice = ToolChoiceMode::kAuto;
  }
  if (std::optional<element> choice = fields.Get("tool_choice")) {
    std::string_view mode;
    if (choice->get(mode) == simdjson::SUCCESS) {
      if (mode != "none" && mode != "auto" && mode != "required") {
        return InvalidParam("tool_choice",
                            fmt::format("Invalid value for `tool_choice`: {}! Only named tools, "
                                        "\"none\", \"auto\" or \"required\" are supported.",
                                        mode));
      }
    } else if (!choice->is_object()) {
      return InvalidParam("tool_choice", "tool_choice: Input should be a string or an object.");
    }
    if (mode == "none") {
      out->choice = ToolChoiceMode::kNone;
    } else if (!tools) {
      return InvalidParam("tool_choice", "When using `tool_choice`, `tools` must be set.");
    } else if (mode == "auto") {
      out->choice = ToolChoiceMode::kAuto;
    } else if (mode == "required") {
      out->choice = ToolChoiceMode::kRequired;
    } else {
      SY_RETURN_IF_ERROR(ReadNamedChoice(*choice, out));
    }
  }
  if (fields.Get("parallel_tool_calls")) {
    bool parallel = true;
    SY_RETURN_IF_ERROR(fields.Bool("parallel_tool_calls", &parallel));
    out->parallel_tool_calls = parallel;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ForcedToolSchema(const ToolFields& tools) {
  if (tools.choice == ToolChoiceMode::kNamed) {
    for (const ToolFunction& f : tools.functions) {
      if (f.name == tools.choice_name)
        return std::string(ParametersOf(f));
    }
    return InvalidParam("tool_choice",
                        "The tool specified in `tool_choice` does not match any "
                        "of the specified `tools`");
  }
  // "$defs" of every tool, merged: one name defined twice must mean one schema.
  std::vector<std::pair<std::string, std::string>> defs;
  simdjson::dom::parser parser;
  std::string items;
  for (const ToolFunction& f : tools.functions) {
    items.append(items.empty() ? "" : ",");
    items.append(R"({"type":"object","properties":{"name":{"type":"string","enum":[)");
    base::AppendJsonString(f.name, false, &items);
    items.append(R"(]},"parameters":)");
    items.append(ParametersOf(f));
    items.append(R"(},"required":["name","parameters"]})");
    object tool_defs;
    if (f.parameters.empty() ||
        parser.parse(f.parameters)["$defs"].get(tool_defs) != simdjson::SUCCESS) {
      continue;
    }
    for (auto field : tool_defs) {
      std::string raw = internal::RawJson(field.value);
      bool known = false;
      for (const auto& [name, schema] : defs) {
        if (name != field.key)
          continue;
        if (schema != raw) {
          return InvalidParam("tools", fmt::format("Tool definition '{}' has multiple schemas, "
                                                   "which is not supported.",
                                                   field.key));
        }
        known = true;
      }
      if (!known)
        defs.emplace_back(std::string(field.key), std::move(raw));
    }
  }
  // anyOf holds whole object schemas: the compiler takes no keyword beside anyOf.
  std::string schema = R"({"type":"array","minItems":1,"items":{"anyOf":[)" + items + "]}";
  if (!defs.empty()) {
    schema.append(R"(,"$defs":{)");
    for (size_t i = 0; i < defs.size(); ++i) {
      schema.append(i ? "," : "");
      base::AppendJsonString(defs[i].first, false, &schema);
      schema.push_back(':');
      schema.append(defs[i].second);
    }
    schema.push_back('}');
  }
  schema.push_back('}');
  return schema;
}

}  // namespace switchyard::api
