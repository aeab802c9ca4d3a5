#include "api/response_writer.h"

#include <algorithm>
#include <cmath>

#include "fmt/format.h"

#include "api/error.h"
#include "api/internal/json_fields.h"
#include "base/json.h"
#include "base/status_macros.h"
#include "base/utf8.h"

namespace switchyard::api {
namespace {

void Str(std::string_view s, std::string* out) {
  base::AppendJsonString(s, false, out);
}

void StrOrNull(std::string_view s, std::string* out) {
  if (s.empty()) {
    out->append("null");
  } else {
    Str(s, out);
  }
}

// Floats as Python's repr writes them ("-0.5", "1.0", "1e-05"). Logprobs of -inf become
// -9999.0, as vLLM clamps them, so the output is always valid JSON.
void Float(double v, std::string* out) {
  if (!std::isfinite(v) || v < -9999.0)
    v = -9999.0;
  const size_t start = out->size();
  fmt::format_to(std::back_inserter(*out), "{}", v);
  if (out->find_first_of(".e", start) == std::string::npos)
    out->append(".0");
}

void FloatOrNull(const std::optional<double>& v, std::string* out) {
  if (v) {
    Float(*v, out);
  } else {
    out->append("null");
  }
}

void Header(const ResponseHeader& header, std::string_view object, std::string* out) {
  out->append("{\"id\":");
  Str(header.id, out);
  out->append(",\"object\":\"");
  out->append(object);
  fmt::format_to(std::back_inserter(*out), "\",\"created\":{},\"model\":", header.created);
  Str(header.model, out);
}

void AppendUsage(const Usage& usage, std::string* out) {
  fmt::format_to(std::back_inserter(*out),
                 "{{\"prompt_tokens\":{},\"total_tokens\":{},\"completion_tokens\":{},"
                 "\"prompt_tokens_details\":",
                 usage.prompt_tokens, usage.prompt_tokens + usage.completion_tokens,
                 usage.completion_tokens);
  if (usage.cached_tokens) {
    fmt::format_to(std::back_inserter(*out), "{{\"cached_tokens\":{}}}}}", *usage.cached_tokens);
  } else {
    out->append("null}");
  }
}

void AppendCompletionLogprobs(const std::optional<std::vector<TokenLogprob>>& logprobs,
                              size_t offset, std::string* out) {
  if (!logprobs) {
    out->append("null");
    return;
  }
  out->append("{\"text_offset\":[");
  for (size_t i = 0; i < logprobs->size(); ++i) {
    fmt::format_to(std::back_inserter(*out), "{}{}", i ? "," : "", offset);
    offset += TextOffsetLength((*logprobs)[i].token);
  }
  out->append("],\"token_logprobs\":[");
  for (size_t i = 0; i < logprobs->size(); ++i) {
    if (i)
      out->push_back(',');
    FloatOrNull((*logprobs)[i].logprob, out);
  }
  out->append("],\"tokens\":[");
  for (size_t i = 0; i < logprobs->size(); ++i) {
    if (i)
      out->push_back(',');
    Str((*logprobs)[i].token, out);
  }
  out->append("],\"top_logprobs\":[");
  for (size_t i = 0; i < logprobs->size(); ++i) {
    if (i)
      out->push_back(',');
    if (!(*logprobs)[i].logprob) {
      out->append("null");
      continue;
    }
    out->push_back('{');
    const std::vector<TopLogprob>& top = (*logprobs)[i].top;
    bool first = true;
    for (size_t j = 0; j < top.size(); ++j) {
      // A dict in vLLM: two ids that decode to the same text keep the first (best) one.
      bool seen = false;
      for (size_t k = 0; k < j && !seen; ++k)
        seen = top[k].token == top[j].token;
      if (seen)
        continue;
      if (!first)
        out->push_back(',');
      first = false;
      Str(top[j].token, out);
      out->push_back(':');
      Float(top[j].logprob, out);
    }
    out->push_back('}');
  }
  out->append("]}");
}

void AppendBytes(std::string_view token, std::string* out) {
  out->append(",\"bytes\":[");
  for (size_t i = 0; i < token.size(); ++i) {
    fmt::format_to(std::back_inserter(*out), "{}{}", i ? "," : "",
                   static_cast<unsigned>(static_cast<unsigned char>(token[i])));
  }
  out->push_back(']');
}

void AppendChatLogprobs(const std::optional<std::vector<TokenLogprob>>& logprobs,
                        std::string* out) {
  if (!logprobs) {
    out->append("null");
    return;
  }
  out->append("{\"content\":[");
  for (size_t i = 0; i < logprobs->size(); ++i) {
    const TokenLogprob& entry = (*logprobs)[i];
    out->append(i ? ",{\"token\":" : "{\"token\":");
    Str(entry.token, out);
    out->append(",\"logprob\":");
    FloatOrNull(entry.logprob, out);
    AppendBytes(entry.token, out);
    out->append(",\"top_logprobs\":[");
    for (size_t j = 0; j < entry.top.size(); ++j) {
      out->append(j ? ",{\"token\":" : "{\"token\":");
      Str(entry.top[j].token, out);
      out->append(",\"logprob\":");
      Float(entry.top[j].logprob, out);
      AppendBytes(entry.top[j].token, out);
      out->push_back('}');
    }
    out->append("]}");
  }
  out->append("]}");
}

void AppendPromptLogprobs(const PromptLogprobs& positions, std::string* out) {
  out->append("[null");
  for (const std::vector<PromptLogprobEntry>& position : positions) {
    out->append(",{");
    for (size_t i = 0; i < position.size(); ++i) {
      const PromptLogprobEntry& entry = position[i];
      fmt::format_to(std::back_inserter(*out), "{}\"{}\":{{\"logprob\":", i ? "," : "",
                     entry.token_id);
      Float(entry.logprob, out);
      fmt::format_to(std::back_inserter(*out), ",\"rank\":{},\"decoded_token\":", entry.rank);
      Str(entry.decoded_token, out);
      out->push_back('}');
    }
    out->push_back('}');
  }
  out->push_back(']');
}

void AppendCompletionChoice(const CompletionChoice& choice, std::string* out) {
  fmt::format_to(std::back_inserter(*out), "{{\"index\":{},\"text\":", choice.index);
  Str(choice.text, out);
  out->append(",\"logprobs\":");
  AppendCompletionLogprobs(choice.logprobs, choice.text_offset_base, out);
  out->append(",\"finish_reason\":");
  StrOrNull(choice.finish_reason, out);
  out->append(",\"stop_reason\":");
  StrOrNull(choice.stop_reason, out);
  if (choice.prompt_logprobs) {
    out->append(",\"prompt_logprobs\":");
    AppendPromptLogprobs(*choice.prompt_logprobs, out);
  }
  out->push_back('}');
}

void AppendChunkUsage(const Usage* usage, std::string* out) {
  if (usage == nullptr)
    return;
  out->append(",\"usage\":");
  AppendUsage(*usage, out);
}

void AppendKvTransferParams(std::string_view kv_transfer_params, std::string* out) {
  if (kv_transfer_params.empty())
    return;
  out->append(",\"kv_transfer_params\":");
  out->append(kv_transfer_params);
}

// A message's calls (`delta`: a stream's, with their indexes and only a first delta's id,
// type and name).
void AppendToolCalls(const std::vector<ChatToolCall>& calls, bool delta, std::string* out) {
  out->append("\"tool_calls\":[");
  for (size_t i = 0; i < calls.size(); ++i) {
    const ChatToolCall& call = calls[i];
    out->append(i ? ",{" : "{");
    const bool first = !delta || !call.id.empty();
    if (first) {
      out->append("\"id\":");
      Str(call.id, out);
      out->append(",\"type\":\"function\",");
    }
    if (delta)
      fmt::format_to(std::back_inserter(*out), "\"index\":{},", call.index);
    out->append("\"function\":{");
    if (first) {
      out->append("\"name\":");
      Str(call.name, out);
      out->push_back(',');
    }
    out->append("\"arguments\":");
    Str(call.arguments, out);
    out->append("}}");
  }
  out->push_back(']');
}

std::string Hex128(std::string_view prefix, uint64_t hi, uint64_t lo) {
  return fmt::format("{}{:016x}{:016x}", prefix, hi, lo);
}

}  // namespace

size_t TextOffsetLength(std::string_view text) {
  size_t length = 0;
  while (!text.empty()) {
    text.remove_prefix(base::DecodeUtf8(text).length);
    ++length;
  }
  return length;
}

std::string CompletionId(uint64_t hi, uint64_t lo) {
  return Hex128("cmpl-", hi, lo);
}
std::string ChatCompletionId(uint64_t hi, uint64_t lo) {
  return Hex128("chatcmpl-", hi, lo);
}

std::string ToolCallId(ToolCallIdKind kind, uint64_t hi, uint64_t lo) {
  if (kind == ToolCallIdKind::kRandom)
    return Hex128("chatcmpl-tool-", hi, lo);
  static constexpr std::string_view kAlphabet =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::string id;
  for (int i = 0; i < 9; ++i) {
    id.push_back(kAlphabet[hi % kAlphabet.size()]);
    hi = hi / kAlphabet.size() ^ lo;
    lo >>= 7;
  }
  return id;
}

std::vector<TokenLogprob> EchoedPromptLogprobs(std::string_view first_token,
                                               const PromptLogprobs& positions, int top_n) {
  std::vector<TokenLogprob> out;
  out.reserve(positions.size() + 1);
  out.push_back({std::string(first_token), std::nullopt, {}});
  const size_t keep = static_cast<size_t>(std::max(top_n, 0)) + 1;
  for (const std::vector<PromptLogprobEntry>& position : positions) {
    TokenLogprob& token = out.emplace_back();
    token.token = position.front().decoded_token;
    token.logprob = position.front().logprob;
    for (size_t i = 0; i < position.size() && i < keep; ++i)
      token.top.push_back({position[i].decoded_token, position[i].logprob});
  }
  return out;
}

std::string CompletionResponse(const ResponseHeader& header,
                               const std::vector<CompletionChoice>& choices, const Usage& usage,
                               std::string_view kv_transfer_params) {
  std::string out;
  Header(header, "text_completion", &out);
  out.append(",\"choices\":[");
  for (size_t i = 0; i < choices.size(); ++i) {
    if (i)
      out.push_back(',');
    AppendCompletionChoice(choices[i], &out);
  }
  out.append("],\"usage\":");
  AppendUsage(usage, &out);
  AppendKvTransferParams(kv_transfer_params, &out);
  out.push_back('}');
  return out;
}

std::string ChatCompletionResponse(const ResponseHeader& header,
                                   const std::vector<ChatChoice>& choices, const Usage& usage,
                                   std::string_view kv_transfer_params,
                                   const PromptLogprobs* prompt_logprobs) {
  std::string out;
  Header(header, "chat.completion", &out);
  out.append(",\"choices\":[");
  for (size_t i = 0; i < choices.size(); ++i) {
    const ChatChoice& choice = choices[i];
    fmt::format_to(std::back_inserter(out),
                   "{}{{\"index\":{},\"message\":{{\"role\":\"assistant\",\"content\":",
                   i ? "," : "", choice.index);
    if (choice.content_null) {
      out.append("null");
    } else {
      Str(choice.content, &out);
    }
    if (!choice.reasoning.empty()) {
      out.append(",\"reasoning\":");
      Str(choice.reasoning, &out);
    }
    out.push_back(',');
    AppendToolCalls(choice.tool_calls, false, &out);
    out.append("},\"logprobs\":");
    AppendChatLogprobs(choice.logprobs, &out);
    out.append(",\"finish_reason\":");
    StrOrNull(choice.finish_reason, &out);
    out.push_back('}');
  }
  out.append("],\"usage\":");
  AppendUsage(usage, &out);
  if (prompt_logprobs != nullptr) {
    out.append(",\"prompt_logprobs\":");
    AppendPromptLogprobs(*prompt_logprobs, &out);
  }
  AppendKvTransferParams(kv_transfer_params, &out);
  out.push_back('}');
  return out;
}

std::string CompletionChunk(const ResponseHeader& header, const CompletionChoice& choice,
                            const Usage* usage) {
  std::string json;
  Header(header, "text_completion", &json);
  json.append(",\"choices\":[");
  AppendCompletionChoice(choice, &json);
  json.push_back(']');
  AppendChunkUsage(usage, &json);
  json.push_back('}');
  return SseData(json);
}

std::string ChatCompletionChunk(const ResponseHeader& header, const ChatChoice& choice,
                                bool with_role, const Usage* usage) {
  std::string json;
  Header(header, "chat.completion.chunk", &json);
  fmt::format_to(std::back_inserter(json), ",\"choices\":[{{\"index\":{},\"delta\":{{",
                 choice.index);
  // A delta holds the fields it carries (vLLM drops unset ones); plain text always has content.
  const size_t start = json.size();
  auto comma = [&json, start] {
    if (json.size() > start)
      json.push_back(',');
  };
  if (with_role)
    json.append("\"role\":\"assistant\"");
  if (!choice.content.empty() || (choice.reasoning.empty() && choice.tool_calls.empty())) {
    comma();
    json.append("\"content\":");
    Str(choice.content, &json);
  }
  if (!choice.reasoning.empty()) {
    comma();
    json.append("\"reasoning\":");
    Str(choice.reasoning, &json);
  }
  if (!choice.tool_calls.empty()) {
    comma();
    AppendToolCalls(choice.tool_calls, true, &json);
  }
  json.append("},\"logprobs\":");
  AppendChatLogprobs(choice.logprobs, &json);
  json.append(",\"finish_reason\":");
  StrOrNull(choice.finish_reason, &json);
  json.append("}]");
  AppendChunkUsage(usage, &json);
  json.push_back('}');
  return SseData(json);
}

std::string CompletionUsageChunk(const ResponseHeader& header, const Usage& usage) {
  std::string json;
  Header(header, "text_completion", &json);
  json.append(",\"choices\":[],\"usage\":");
  AppendUsage(usage, &json);
  json.push_back('}');
  return SseData(json);
}

std::string ChatUsageChunk(const ResponseHeader& header, const Usage& usage) {
  std::string json;
  Header(header, "chat.completion.chunk", &json);
  json.append(",\"choices\":[],\"usage\":");
  AppendUsage(usage, &json);
  json.push_back('}');
  return SseData(json);
}

std::string SseData(std::string_view json) {
  std::string out;
  out.reserve(json.size() + 8);
  out.append("data: ");
  out.append(json);
  out.append("\n\n");
  return out;
}

std::string SseError(const absl::Status& status) {
  return SseData(ErrorBody(status));
}

std::string ModelList(const std::vector<ModelCard>& models) {
  std::string out = "{\"object\":\"list\",\"data\":[";
  for (size_t i = 0; i < models.size(); ++i) {
    const ModelCard& model = models[i];
    out.append(i ? ",{\"id\":" : "{\"id\":");
    Str(model.id, &out);
    fmt::format_to(std::back_inserter(out),
                   ",\"object\":\"model\",\"created\":{},\"owned_by\":", model.created);
    Str(model.owned_by, &out);
    out.append(",\"root\":");
    Str(model.root.empty() ? model.id : model.root, &out);
    fmt::format_to(std::back_inserter(out), ",\"parent\":null,\"max_model_len\":{}}}",
                   model.max_model_len);
  }
  out.append("]}");
  return out;
}

absl::StatusOr<TokenizeRequest> ParseTokenizeRequest(std::string_view body,
                                                     const RequestLimits& limits) {
  internal::ParserLease parser;
  internal::FieldReader fields;
  SY_RETURN_IF_ERROR(internal::ParseRequestFields(body, limits.max_body_bytes,
                                                  limits.max_json_depth, parser.get(), &fields));
  TokenizeRequest request;
  SY_RETURN_IF_ERROR(fields.String("model", &request.model));
  if (!fields.Get("prompt"))
    return InvalidParam("prompt", "prompt: Field required.");
  SY_RETURN_IF_ERROR(fields.String("prompt", &request.prompt));
  SY_RETURN_IF_ERROR(fields.Bool("add_special_tokens", &request.add_special_tokens));
  SY_RETURN_IF_ERROR(fields.Bool("return_token_strs", &request.return_token_strs));
  return request;
}

std::string TokenizeResponse(const std::vector<int32_t>& tokens, int64_t max_model_len,
                             const std::vector<std::string>* token_strs) {
  std::string out = fmt::format("{{\"count\":{},\"max_model_len\":{},\"tokens\":[{}]",
                                tokens.size(), max_model_len, fmt::join(tokens, ","));
  if (token_strs != nullptr) {
    out.append(",\"token_strs\":[");
    for (size_t i = 0; i < token_strs->size(); ++i) {
      if (i)
        out.push_back(',');
      Str((*token_strs)[i], &out);
    }
    out.push_back(']');
  }
  out.push_back('}');
  return out;
}

absl::StatusOr<DetokenizeRequest> ParseDetokenizeRequest(std::string_view body,
                                                         const RequestLimits& limits) {
  internal::ParserLease parser;
  internal::FieldReader fields;
  SY_RETURN_IF_ERROR(internal::ParseRequestFields(body, limits.max_body_bytes,
                                                  limits.max_json_depth, parser.get(), &fields));
  DetokenizeRequest request;
  SY_RETURN_IF_ERROR(fields.String("model", &request.model));
  if (!fields.Get("tokens"))
    return InvalidParam("tokens", "tokens: Field required.");
  SY_RETURN_IF_ERROR(fields.TokenIds("tokens", limits.max_prompt_token_ids, &request.tokens));
  return request;
}

std::string DetokenizeResponse(std::string_view text) {
  std::string out = "{\"prompt\":";
  Str(text, &out);
  out.push_back('}');
  return out;
}

}  // namespace switchyard::api
