#include "text/chat_prompt.h"

#include <memory>
#include <string_view>

#include "api/error.h"
#include "base/json.h"
#include "base/status_macros.h"

namespace switchyard::text {
namespace {

void AppendKey(std::string_view key, std::string* out) {
  out->push_back(',');
  base::AppendJsonString(key, false, out);
  out->push_back(':');
}

std::string MessagesJson(const api::ChatRequest& request) {
  std::string out = "[";
  for (size_t i = 0; i < request.messages.size(); ++i) {
    const api::ChatMessage& m = request.messages[i];
    out.append(i == 0 ? "{" : ",{");
    out.append("\"role\":");
    base::AppendJsonString(m.role, false, &out);
    AppendKey("content", &out);
    if (m.has_content) {
      base::AppendJsonString(m.content, false, &out);
    } else {
      out.append("null");
    }
    if (!m.name.empty()) {
      AppendKey("name", &out);
      base::AppendJsonString(m.name, false, &out);
    }
    if (!m.tool_call_id.empty()) {
      AppendKey("tool_call_id", &out);
      base::AppendJsonString(m.tool_call_id, false, &out);
    }
    if (!m.tool_calls.empty()) {
      AppendKey("tool_calls", &out);
      out.append(m.tool_calls);
    }
    if (!m.reasoning.empty()) {
      AppendKey("reasoning_content", &out);
      base::AppendJsonString(m.reasoning, false, &out);
    }
    out.push_back('}');
  }
  out.push_back(']');
  return out;
}

std::string ExtraContextJson(const api::ChatRequest& request, const ModelChatTemplate& special) {
  std::string out = "{\"bos_token\":";
  base::AppendJsonString(special.bos_token, false, &out);
  AppendKey("eos_token", &out);
  base::AppendJsonString(special.eos_token, false, &out);
  AppendKey("unk_token", &out);
  base::AppendJsonString(special.unk_token, false, &out);
  AppendKey("pad_token", &out);
  base::AppendJsonString(special.pad_token, false, &out);
  if (!request.reasoning_effort.empty()) {
    AppendKey("reasoning_effort", &out);
    base::AppendJsonString(request.reasoning_effort, false, &out);
  }
  // Request kwargs come last so that they override, as in vLLM.
  for (const auto& [key, raw_value] : request.chat_template_kwargs) {
    AppendKey(key, &out);
    out.append(raw_value);
  }
  out.push_back('}');
  return out;
}

}  // namespace

absl::StatusOr<std::string> RenderChatPrompt(const api::ChatRequest& request,
                                             const ChatTemplate* model_template,
                                             const ModelChatTemplate& special) {
  std::unique_ptr<ChatTemplate> request_template;
  const ChatTemplate* tmpl = model_template;
  if (!request.chat_template.empty()) {
    SY_ASSIGN_OR_RETURN(request_template, ChatTemplate::Compile(request.chat_template));
    tmpl = request_template.get();
  }
  if (tmpl == nullptr) {
    return api::InvalidParam("messages",
                             "The model has no chat template; pass chat_template in the request "
                             "or use /v1/completions.");
  }
  ChatTemplateInputs inputs;
  inputs.messages_json = MessagesJson(request);
  inputs.tools_json = request.tools.tools;
  inputs.add_generation_prompt = request.add_generation_prompt;
  inputs.extra_context_json = ExtraContextJson(request, special);
  SY_ASSIGN_OR_RETURN(std::string rendered, tmpl->Render(inputs));
  if (request.continue_final_message && !request.messages.empty()) {
    // transformers cuts the rendering after the final message's (stripped) content.
    std::string_view content = request.messages.back().content;
    while (!content.empty() && (content.back() == ' ' || content.back() == '\n'))
      content.remove_suffix(1);
    const size_t at = content.empty() ? std::string::npos : rendered.rfind(content);
    if (at == std::string::npos) {
      return api::InvalidParam("messages",
                               "continue_final_message: the final message is not in the "
                               "rendered chat template");
    }
    rendered.resize(at + content.size());
  }
  return rendered;
}

}  // namespace switchyard::text
