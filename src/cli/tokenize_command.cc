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
std::string EncodeRequest(const text::Tokenizer& tokenizer, simdjson::dom::element request) {
  std::string input;
  std::string_view s;
  if (request["text_b64"].get_string().get(s) == simdjson::SUCCESS) {
    if (!absl::Base64Unescape(absl::string_view(s.data(), s.size()), &input)) {
      return ErrorLine("text_b64 is not valid base64");
    }
  } else if (request["text"].get_string().get(s) == simdjson::SUCCESS) {
    input = std::string(s);
  } else {
    return ErrorLine("missing \"text\" or \"text_b64\"");
  }
  bool add_special = true;
  simdjson::dom::element flag;
  if (request["add_special_tokens"].get(flag) == simdjson::SUCCESS &&
      flag.get_bool().get(add_special) != simdjson::SUCCESS) {
    return ErrorLine("add_special_tokens must be a boolean");
  }
  auto ids = tokenizer.Encode(input, add_special);
  if (!ids.ok())
    return ErrorLine(std::string(ids.status().message()));
  return fmt::format("{{\"ids\": {}}}", IdsJson(*ids));
}

// A decode request: {"ids": [...], "skip_special_tokens": bool}.
std::string DecodeRequest(const text::Tokenizer& tokenizer, simdjson::dom::element request) {
  simdjson::dom::array array;
  if (request["ids"].get_array().get(array) != simdjson::SUCCESS) {
    return ErrorLine("missing \"ids\" array");
  }
  std::vector<int32_t> ids;
  for (simdjson::dom::element e : array) {
    int64_t id = 0;
    if (e.get_int64().get(id) != simdjson::SUCCESS || id < INT32_MIN || id > INT32_MAX) {
      return ErrorLine("ids must be integers");
    }
    ids.push_back(static_cast<int32_t>(id));
  }
  bool skip = false;
  simdjson::dom::element flag;
  if (request["skip_special_tokens"].get(flag) == simdjson::SUCCESS &&
      flag.get_bool().get(skip) != simdjson::SUCCESS) {
    return ErrorLine("skip_special_tokens must be a boolean");
  }
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
  simdjson::dom::element ids;
  if (decode_only || request["ids"].get(ids) == simdjson::SUCCESS)
    return DecodeRequest(tokenizer, request);
  return EncodeRequest(tokenizer, request);
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
