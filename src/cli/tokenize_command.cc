// switchyard tokenize --model PATH [TEXT]: encode text with a model's tokenizer and show ids
// and pieces; --jsonl batch mode for tools and parity tests (one JSON request per stdin line,
// encode or decode, one JSON reply per stdout line); --bench FILE times Encode alone.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/escaping.h"
#include "cli/commands.h"
#include "cli/exit_code.h"
#include "fmt/format.h"
#include "simdjson.h"

#include "base/file.h"
#include "base/json.h"
#include "base/json_fields.h"
#include "base/status_macros.h"
#include "model/gguf_tokenizer.h"
#include "text/tokenizer.h"

namespace switchyard::cli {
namespace {

struct TokenizeOptions {
  std::string model;
  std::string text;
  bool json = false;
  bool no_special = false;
  bool skip_special = false;
  bool jsonl = false;
  bool decode_jsonl = false;
  std::string bench_file;
  bool bench_documents = false;
  int repeat = 5;
};

absl::StatusOr<std::unique_ptr<text::Tokenizer>> LoadTokenizer(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    std::string json = (std::filesystem::path(path) / "tokenizer.json").string();
    if (!std::filesystem::exists(json, ec)) {
      return absl::NotFoundError(fmt::format("{}: no tokenizer.json in this directory", path));
    }
    return text::Tokenizer::FromJsonFile(json);
  }
  if (path.size() >= 5 && path.compare(path.size() - 5, 5, ".gguf") == 0) {
    return model::LoadTokenizerFromGgufFile(path);
  }
  return text::Tokenizer::FromJsonFile(path);
}

std::string IdsJson(const std::vector<int32_t>& ids) {
  std::string out = "[";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0)
      out.append(", ");
    out.append(std::to_string(ids[i]));
  }
  out.push_back(']');
  return out;
}

std::string ErrorLine(std::string_view message) {
  return fmt::format("{{\"error\": {}}}", base::JsonString(message));
}

// An encode request: {"text": s | "text_b64": b64, "add_special_tokens": bool}.
absl::StatusOr<std::string> EncodeRequest(const text::Tokenizer& tokenizer,
                                          simdjson::dom::element request,
                                          const base::JsonPath& at) {
  std::string input;
  SY_ASSIGN_OR_RETURN(std::optional<std::string_view> b64,
                      base::OptionalField<std::string_view>(request, "text_b64", at));
  if (b64.has_value()) {
    if (!absl::Base64Unescape(absl::string_view(b64->data(), b64->size()), &input))
      return at.Child("text_b64").Error("not valid base64");
  } else {
    SY_ASSIGN_OR_RETURN(std::optional<std::string> text,
                        base::OptionalField<std::string>(request, "text", at));
    if (!text.has_value())
      return at.Child("text").Error("missing required field (or text_b64)");
    input = *std::move(text);
  }
  SY_ASSIGN_OR_RETURN(bool add_special, base::FieldOr(request, "add_special_tokens", true, at));
  SY_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tokenizer.Encode(input, add_special));
  return fmt::format("{{\"ids\": {}}}", IdsJson(ids));
}

// One of a decode request's ids (a ParseEach parser).
absl::StatusOr<int32_t> TokenId(simdjson::dom::element value, const base::JsonPath& at, bool) {
  SY_ASSIGN_OR_RETURN(int64_t id, base::JsonAs<int64_t>(value, at));
  if (id < INT32_MIN || id > INT32_MAX)
    return at.Error("out of the int32 range");
  return static_cast<int32_t>(id);
}

// A decode request: {"ids": [...], "skip_special_tokens": bool}.
absl::StatusOr<std::string> DecodeRequest(const text::Tokenizer& tokenizer,
                                          simdjson::dom::element request,
                                          const base::JsonPath& at) {
  SY_ASSIGN_OR_RETURN(std::vector<int32_t> ids,
                      base::ParseEach<int32_t>(request, "ids", at, &TokenId));
  SY_ASSIGN_OR_RETURN(bool skip, base::FieldOr(request, "skip_special_tokens", false, at));
  return fmt::format("{{\"text\": {}}}", base::JsonString(tokenizer.Decode(ids, skip)));
}

// A request with "ids" is a decode request, any other an encode request; --decode-jsonl
// reads every request as a decode request.
std::string BatchRequest(const text::Tokenizer& tokenizer, simdjson::dom::parser& parser,
                         const std::string& line, bool decode_only) {
  simdjson::dom::element request;
  if (parser.parse(line).get(request) != simdjson::SUCCESS || !request.is_object()) {
    return ErrorLine("request is not a JSON object");
  }
  const base::JsonPath at("request");
  simdjson::dom::element ids;
  absl::StatusOr<std::string> reply = decode_only || request["ids"].get(ids) == simdjson::SUCCESS
                                          ? DecodeRequest(tokenizer, request, at)
                                          : EncodeRequest(tokenizer, request, at);
  return reply.ok() ? *std::move(reply) : ErrorLine(std::string(reply.status().message()));
}

void RunBatch(const text::Tokenizer& tokenizer, bool decode_only) {
  simdjson::dom::parser parser;
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty())
      continue;
    std::string reply = BatchRequest(tokenizer, parser, line, decode_only);
    reply.push_back('\n');
    std::fwrite(reply.data(), 1, reply.size(), stdout);
  }
  std::fflush(stdout);
}

// Encodes every line (or NUL-separated document) of the file `repeat` times on this thread;
// prints one JSON object with the input size and the wall time of each pass.
absl::Status RunBench(const text::Tokenizer& tokenizer, const TokenizeOptions& options) {
  SY_ASSIGN_OR_RETURN(std::string content, base::ReadFile(options.bench_file));
  std::vector<std::string> lines;
  const char separator = options.bench_documents ? '\0' : '\n';
  size_t start = 0;
  while (start < content.size()) {
    size_t end = content.find(separator, start);
    if (end == std::string::npos)
      end = content.size();
    lines.push_back(content.substr(start, end - start));
    start = end + 1;
  }
  std::string seconds;
  size_t tokens = 0;
  for (int r = 0; r < options.repeat; ++r) {
    tokens = 0;
    auto t0 = std::chrono::steady_clock::now();
    for (const std::string& l : lines) {
      auto ids = tokenizer.Encode(l, false);
      if (ids.ok())
        tokens += ids->size();
    }
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    seconds.append(fmt::format("{}{:.6f}", r == 0 ? "" : ", ", s));
  }
  std::printf("{\"bytes\": %zu, \"lines\": %zu, \"tokens\": %zu, \"seconds\": [%s]}\n",
              content.size(), lines.size(), tokens, seconds.c_str());
  return absl::OkStatus();
}

absl::Status Run(const TokenizeOptions& options) {
  SY_ASSIGN_OR_RETURN(std::unique_ptr<text::Tokenizer> tokenizer, LoadTokenizer(options.model));
  const text::Tokenizer& t = *tokenizer;
  if (options.jsonl || options.decode_jsonl) {
    RunBatch(t, options.decode_jsonl);
    return absl::OkStatus();
  }
  if (!options.bench_file.empty())
    return RunBench(t, options);
  SY_ASSIGN_OR_RETURN(std::vector<int32_t> ids, t.Encode(options.text, !options.no_special));
  std::string decoded = t.Decode(ids, options.skip_special);
  std::string out;
  if (options.json) {
    out = fmt::format("{{\"ids\": {}, \"tokens\": [", IdsJson(ids));
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i > 0)
        out.append(", ");
      base::AppendJsonString(t.IdToToken(ids[i]), false, &out);
    }
    out.append(fmt::format("], \"decoded\": {}}}\n", base::JsonString(decoded)));
  } else {
    out = fmt::format("{} tokens: {}\n", ids.size(), IdsJson(ids));
    for (int32_t id : ids) {
      out.append(fmt::format("  {:>8}  {}{}\n", id, base::JsonString(t.IdToToken(id)),
                             t.IsSpecial(id) ? "  (special)" : ""));
    }
    out.append(fmt::format("decoded: {}\n", base::JsonString(decoded)));
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return absl::OkStatus();
}

}  // namespace

void RegisterTokenizeCommand(CLI::App& app, int* exit_code) {
  auto options = std::make_shared<TokenizeOptions>();
  CLI::App* cmd = app.add_subcommand("tokenize", "Encode text with a model's tokenizer");
  cmd->add_option("--model", options->model, "model directory, tokenizer.json file or .gguf file")
      ->required();
  cmd->add_option("text", options->text, "text to encode");
  cmd->add_flag("--json", options->json, "print one JSON object");
  cmd->add_flag("--no-special", options->no_special, "add_special_tokens=false");
  cmd->add_flag("--skip-special", options->skip_special, "skip special tokens in the decoded text");
  cmd->add_flag("--jsonl", options->jsonl,
                "batch mode, one request per stdin line: {\"text\"|\"text_b64\", "
                "\"add_special_tokens\"} -> {\"ids\"}; {\"ids\", \"skip_special_tokens\"} -> "
                "{\"text\"}");
  cmd->add_flag("--decode-jsonl", options->decode_jsonl,
                "batch mode that reads every request as {\"ids\", \"skip_special_tokens\"}");
  cmd->add_option("--bench", options->bench_file,
                  "time Encode (one thread, no special tokens) over each line of FILE");
  cmd->add_flag("--bench-documents", options->bench_documents,
                "--bench FILE holds NUL-separated documents instead of lines");
  cmd->add_option("--repeat", options->repeat, "passes for --bench")->capture_default_str();
  cmd->callback([options, exit_code] { *exit_code = ExitCode(InputError(Run(*options))); });
}

}  // namespace switchyard::cli
