// Chat templates: Hugging Face `chat_template` strings rendered the way transformers renders
// them (Jinja in an immutable sandbox, trim_blocks and lstrip_blocks, tojson/raise_exception/
// strftime_now). A ChatTemplate is immutable once compiled; Render is const and may be
// called from any number of threads at once.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace switchyard::text {

namespace jinja {
class Template;
}  // namespace jinja

// What transformers passes to a template. JSON fields hold JSON text; "" means absent.
struct ChatTemplateInputs {
  std::string messages_json;   // JSON array of message objects.
  std::string tools_json;      // "" = None, else a JSON array.
  std::string documents_json;  // "" = None, else a JSON array.
  bool add_generation_prompt = false;
  // JSON object of extra kwargs and special tokens (bos_token, eos_token, ...); "" = none.
  std::string extra_context_json;
};

class ChatTemplate {
 public:
  // Parses `source`; syntax errors name the line.
  static absl::StatusOr<std::unique_ptr<ChatTemplate>> Compile(std::string_view source);
  ~ChatTemplate();

  // Renders with transformers' context: messages (reasoning fields aliased as transformers
  // does), tools, documents, add_generation_prompt, then every extra key.
  absl::StatusOr<std::string> Render(const ChatTemplateInputs& inputs) const;

 private:
  explicit ChatTemplate(std::unique_ptr<jinja::Template> tmpl);
  std::unique_ptr<jinja::Template> template_;
};

// A model directory's template and special tokens.
struct ModelChatTemplate {
  std::string source;     // The template text.
  std::string origin;     // The file it came from, for messages.
  std::string bos_token;  // "" when the config has none.
  std::string eos_token;
  std::string unk_token;
  std::string pad_token;
};

// Loads from `model_dir`: chat_template.jinja, else chat_template.json ({"chat_template": ...}),
// else tokenizer_config.json's `chat_template` (a string, or a list of {name, template} from
// which "default" is taken). Special tokens come from tokenizer_config.json, where each may be
// a string or an object with "content".
absl::StatusOr<ModelChatTemplate> LoadModelChatTemplate(const std::string& model_dir);

}  // namespace switchyard::text
