// switchyard chat-template: renders a model's chat template over a messages file, printing
// exactly the prompt transformers' apply_chat_template(tokenize=False) would give.
#include <cstdio>
#include <filesystem>
#include <string>

#include "cli/commands.h"
#include "cli/exit_code.h"
#include "fmt/format.h"
#include "simdjson.h"

#include "base/file.h"
#include "base/json.h"
#include "base/json_fields.h"
#include "base/status_macros.h"
#include "model/model_files.h"
#include "model/model_text.h"
#include "text/chat_template.h"

namespace switchyard::cli {
namespace {

struct ChatTemplateOptions {
  std::string model_dir;
  std::string messages_path;
  std::string tools_path;
  std::string kwargs_json;
  std::string template_path;
  bool add_generation_prompt = false;
};

std::string ToJson(simdjson::dom::element e) {
  return simdjson::minify(e);
}

// Merges `from` (a JSON object's members) into `members`, later keys replacing earlier ones.
void MergeObject(simdjson::dom::object from,
                 std::vector<std::pair<std::string, std::string>>* members) {
  for (auto field : from) {
    std::string key(field.key);
    std::string value = ToJson(field.value);
    bool replaced = false;
    for (auto& [k, v] : *members) {
      if (k == key) {
        v = value;
        replaced = true;
      }
    }
    if (!replaced)
      members->emplace_back(std::move(key), std::move(value));
  }
}

// A directory's template needs its tokenizer files only (no weights); a .gguf file's is in
// its metadata, with BOS and EOS from its vocabulary, read as generate and the engine do.
absl::StatusOr<text::ModelChatTemplate> LoadTemplate(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    return text::LoadModelChatTemplate(path);
  SY_ASSIGN_OR_RETURN(std::unique_ptr<model::ModelFiles> files, model::ModelFiles::Open(path));
  SY_ASSIGN_OR_RETURN(std::unique_ptr<text::Tokenizer> tokenizer,
                      model::LoadModelTokenizer(*files));
  return model::LoadModelChatTemplate(*files, *tokenizer);
}

absl::StatusOr<std::string> RenderChat(const ChatTemplateOptions& opts) {
  std::string source;
  std::vector<std::pair<std::string, std::string>> extra;
  if (!opts.model_dir.empty()) {
    auto model = LoadTemplate(opts.model_dir);
    if (model.ok()) {
      source = model->source;
      for (const auto& [name, value] :
           {std::pair<const char*, const std::string*>{"bos_token", &model->bos_token},
            {"eos_token", &model->eos_token},
            {"unk_token", &model->unk_token},
            {"pad_token", &model->pad_token}}) {
        if (!value->empty())
          extra.emplace_back(name, base::JsonString(*value));
      }
    } else if (opts.template_path.empty()) {
      return model.status();
    }
  }
  if (!opts.template_path.empty()) {
    SY_ASSIGN_OR_RETURN(source, base::ReadFile(opts.template_path));
  }
  if (source.empty() && opts.model_dir.empty()) {
    return absl::InvalidArgumentError("chat-template: give --model or --template");
  }

  text::ChatTemplateInputs inputs;
  inputs.add_generation_prompt = opts.add_generation_prompt;
  SY_ASSIGN_OR_RETURN(auto messages_doc, base::JsonDocument::ParseFile(opts.messages_path));
  simdjson::dom::element root = messages_doc->root();
  if (root.is_array()) {
    inputs.messages_json = ToJson(root);
  } else if (root.is_object()) {
    simdjson::dom::object obj = root.get_object().value_unsafe();
    for (auto field : obj) {
      if (field.key == "messages") {
        inputs.messages_json = ToJson(field.value);
      } else if (field.key == "tools") {
        if (!field.value.is_null())
          inputs.tools_json = ToJson(field.value);
      } else if (field.key == "documents") {
        if (!field.value.is_null())
          inputs.documents_json = ToJson(field.value);
      } else if (field.key == "add_generation_prompt") {
        SY_ASSIGN_OR_RETURN(bool flag, base::FieldAs<bool>(field.value, field.key,
                                                           base::JsonPath(opts.messages_path)));
        inputs.add_generation_prompt = flag || opts.add_generation_prompt;
      } else {
        extra.emplace_back(std::string(field.key), ToJson(field.value));
      }
    }
    if (inputs.messages_json.empty()) {
      return absl::InvalidArgumentError(
          fmt::format("{}: object has no 'messages' field", opts.messages_path));
    }
  } else {
    return absl::InvalidArgumentError(
        fmt::format("{}: expected a JSON array of messages or an object", opts.messages_path));
  }
  if (!opts.tools_path.empty()) {
    SY_ASSIGN_OR_RETURN(auto tools_doc, base::JsonDocument::ParseFile(opts.tools_path));
    inputs.tools_json = ToJson(tools_doc->root());
  }
  if (!opts.kwargs_json.empty()) {
    SY_ASSIGN_OR_RETURN(auto kwargs_doc, base::JsonDocument::Parse(opts.kwargs_json, "--kwargs"));
    if (!kwargs_doc->root().is_object()) {
      return absl::InvalidArgumentError("--kwargs: expected a JSON object");
    }
    MergeObject(kwargs_doc->root().get_object().value_unsafe(), &extra);
  }
  std::string extra_json = "{";
  for (size_t i = 0; i < extra.size(); ++i) {
    if (i > 0)
      extra_json += ',';
    extra_json += base::JsonString(extra[i].first);
    extra_json += ':';
    extra_json += extra[i].second;
  }
  extra_json += '}';
  inputs.extra_context_json = std::move(extra_json);

  SY_ASSIGN_OR_RETURN(auto tmpl, text::ChatTemplate::Compile(source));
  return tmpl->Render(inputs);
}

}  // namespace

void RegisterChatTemplateCommand(CLI::App& app, int* exit_code) {
  auto opts = std::make_shared<ChatTemplateOptions>();
  CLI::App* cmd = app.add_subcommand("chat-template", "Render a model's chat template");
  cmd->add_option("--model", opts->model_dir,
                  "Model directory (tokenizer_config.json) or .gguf file");
  cmd->add_option("messages", opts->messages_path,
                  "JSON file: an array of messages, or an object with messages, tools, ...")
      ->required();
  cmd->add_flag("--add-generation-prompt", opts->add_generation_prompt,
                "End with the assistant turn header");
  cmd->add_option("--tools", opts->tools_path, "JSON file with an array of tool schemas");
  cmd->add_option("--kwargs", opts->kwargs_json, "JSON object of extra template variables");
  cmd->add_option("--template", opts->template_path, "Template file overriding the model's");
  cmd->callback([opts, exit_code] {
    absl::StatusOr<std::string> rendered = RenderChat(*opts);
    if (rendered.ok()) {
      std::fwrite(rendered->data(), 1, rendered->size(), stdout);
      std::fflush(stdout);
    }
    *exit_code = ExitCode(InputError(rendered.status()));
  });
}

}  // namespace switchyard::cli
