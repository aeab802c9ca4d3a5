#include "text/chat_template.h"

#include <filesystem>

#include "fmt/format.h"

#include "base/file.h"
#include "base/json.h"
#include "base/status_macros.h"
#include "text/jinja/template.h"
#include "text/jinja/value.h"

namespace switchyard::text {
namespace {

using jinja::Dict;
using jinja::Value;

// transformers copies a message's reasoning into both `thinking` and `reasoning_content`.
absl::StatusOr<Value> AliasReasoning(const Value& messages) {
  if (!messages.is_list())
    return messages;
  std::vector<Value> out;
  for (const Value& m : messages.as_list().items) {
    if (!m.is_dict()) {
      return absl::InvalidArgumentError("messages: each message must be a JSON object");
    }
    const Value* reasoning = nullptr;
    for (const char* key : {"reasoning_content", "thinking", "reasoning"}) {
      const Value* v = m.as_dict().Find(std::string_view(key));
      if (v != nullptr && !v->is_none()) {
        reasoning = v;
        break;
      }
    }
    if (reasoning == nullptr) {
      out.push_back(m);
      continue;
    }
    Dict d;
    d.Set(Value("thinking"), *reasoning);
    for (const auto& [k, v] : m.as_dict().entries)
      d.Set(k, v);
    d.Set(Value("reasoning_content"), *reasoning);
    SY_ASSIGN_OR_RETURN(Value aliased, Value::MakeDict(std::move(d)));
    out.push_back(std::move(aliased));
  }
  return Value::MakeList(std::move(out));
}

absl::StatusOr<Value> OptionalJson(const std::string& json, std::string_view what) {
  if (json.empty())
    return Value::None();
  return jinja::ValueFromJson(json, what);
}

// A special token may be a string or an AddedToken-like object with "content".
std::string TokenString(simdjson::dom::element config, std::string_view key) {
  simdjson::dom::element e;
  if (config[key].get(e) != simdjson::SUCCESS)
    return "";
  std::string_view s;
  if (e.get(s) == simdjson::SUCCESS)
    return std::string(s);
  if (e["content"].get(s) == simdjson::SUCCESS)
    return std::string(s);
  return "";
}

}  // namespace

ChatTemplate::ChatTemplate(std::unique_ptr<jinja::Template> tmpl) : template_(std::move(tmpl)) {}
ChatTemplate::~ChatTemplate() = default;

absl::StatusOr<std::unique_ptr<ChatTemplate>> ChatTemplate::Compile(std::string_view source) {
  SY_ASSIGN_OR_RETURN(auto tmpl, jinja::Template::Compile(source));
  return std::unique_ptr<ChatTemplate>(new ChatTemplate(std::move(tmpl)));
}

absl::StatusOr<std::string> ChatTemplate::Render(const ChatTemplateInputs& inputs) const {
  SY_ASSIGN_OR_RETURN(Value messages, jinja::ValueFromJson(inputs.messages_json, "messages"));
  if (!messages.is_list())
    return absl::InvalidArgumentError("messages: expected a JSON array");
  SY_ASSIGN_OR_RETURN(messages, AliasReasoning(messages));
  SY_ASSIGN_OR_RETURN(Value tools, OptionalJson(inputs.tools_json, "tools"));
  SY_ASSIGN_OR_RETURN(Value documents, OptionalJson(inputs.documents_json, "documents"));
  std::vector<std::pair<std::string, Value>> context;
  context.emplace_back("messages", std::move(messages));
  context.emplace_back("tools", std::move(tools));
  context.emplace_back("documents", std::move(documents));
  context.emplace_back("add_generation_prompt", Value(inputs.add_generation_prompt));
  if (!inputs.extra_context_json.empty()) {
    SY_ASSIGN_OR_RETURN(Value extra,
                        jinja::ValueFromJson(inputs.extra_context_json, "extra context"));
    if (!extra.is_dict())
      return absl::InvalidArgumentError("extra context: expected a JSON object");
    for (const auto& [k, v] : extra.as_dict().entries) {
      if (k.is_string())
        context.emplace_back(k.as_string(), v);
    }
  }
  return template_->Render(std::move(context));
}

absl::StatusOr<ModelChatTemplate> LoadModelChatTemplate(const std::string& model_dir) {
  namespace fs = std::filesystem;
  ModelChatTemplate result;
  fs::path dir(model_dir);
  fs::path config_path = dir / "tokenizer_config.json";
  std::unique_ptr<base::JsonDocument> config;
  std::error_code ec;
  if (fs::exists(config_path, ec)) {
    SY_ASSIGN_OR_RETURN(config, base::JsonDocument::ParseFile(config_path.string()));
    simdjson::dom::element root = config->root();
    result.bos_token = TokenString(root, "bos_token");
    result.eos_token = TokenString(root, "eos_token");
    result.unk_token = TokenString(root, "unk_token");
    result.pad_token = TokenString(root, "pad_token");
  }
  fs::path jinja_path = dir / "chat_template.jinja";
  fs::path json_path = dir / "chat_template.json";
  if (fs::exists(jinja_path, ec)) {
    SY_ASSIGN_OR_RETURN(result.source, base::ReadFile(jinja_path.string()));
    result.origin = jinja_path.string();
    return result;
  }
  simdjson::dom::element holder;
  std::unique_ptr<base::JsonDocument> json_doc;
  if (fs::exists(json_path, ec)) {
    SY_ASSIGN_OR_RETURN(json_doc, base::JsonDocument::ParseFile(json_path.string()));
    holder = json_doc->root();
    result.origin = json_path.string();
  } else if (config) {
    holder = config->root();
    result.origin = config_path.string();
  } else {
    return absl::NotFoundError(
        fmt::format("{}: no tokenizer_config.json or chat_template.jinja", model_dir));
  }
  simdjson::dom::element tmpl;
  if (holder["chat_template"].get(tmpl) != simdjson::SUCCESS || tmpl.is_null()) {
    return absl::NotFoundError(fmt::format("{}: no 'chat_template' field", result.origin));
  }
  std::string_view s;
  if (tmpl.get(s) == simdjson::SUCCESS) {
    result.source = std::string(s);
    return result;
  }
  simdjson::dom::array list;
  if (tmpl.get(list) == simdjson::SUCCESS) {
    for (simdjson::dom::element item : list) {
      std::string_view name, text;
      if (item["name"].get(name) == simdjson::SUCCESS && name == "default" &&
          item["template"].get(text) == simdjson::SUCCESS) {
        result.source = std::string(text);
        return result;
      }
    }
    return absl::NotFoundError(
        fmt::format("{}: field 'chat_template' has no template named 'default'", result.origin));
  }
  return absl::InvalidArgumentError(fmt::format(
      "{}: field 'chat_template' must be a string or a list of {{name, template}}", result.origin));
}

}  // namespace switchyard::text
