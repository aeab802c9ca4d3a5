// switchyard model inspect PATH [--json] [--tensors] [--max-model-len N]: what a Hugging Face
// model directory or a .gguf file holds (format, architecture, parameter count, dtypes and
// the dtypes of each tensor group, tokenizer, chat template), after full validation of the
// files, and the memory the engine needs for it at a context length: the weights plus one
// sequence's KV cache, sized as the engine sizes its pool, at its defaults.
#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "cli/commands.h"
#include "cli/exit_code.h"
#include "cli/memory_estimate.h"
#include "cli/tensor_groups.h"
#include "fmt/format.h"
#include "simdjson.h"

#include "base/json.h"
#include "base/json_fields.h"
#include "base/status_macros.h"
#include "model/model_files.h"
#include "model/model_text.h"
#include "runtime/cpu/cpu_backend.h"
#include "runtime/dtype.h"

namespace switchyard::cli {
namespace {

struct InspectOptions {
  std::string path;
  bool json = false;
  bool list_tensors = false;
  MemoryEstimateOptions memory;
};

struct TokenizerInfo {
  std::string kind;    // "BPE", "gpt2", "llama", ... or empty if none
  std::string source;  // file or "gguf"
  int64_t vocab_size = -1;
  bool chat_template = false;
};

std::string HumanCount(int64_t n) {
  const double v = static_cast<double>(n);
  if (n < 1000) {
    return fmt::format("{}", n);
  }
  if (n < 1000000) {
    return fmt::format("{:.1f}K", v / 1e3);
  }
  if (n < 1000000000) {
    return fmt::format("{:.1f}M", v / 1e6);
  }
  return fmt::format("{:.1f}B", v / 1e9);
}

std::string HumanBytes(uint64_t n) {
  const double v = static_cast<double>(n);
  if (n < (1u << 20)) {
    return fmt::format("{:.1f} KiB", v / 1024);
  }
  if (n < (1u << 30)) {
    return fmt::format("{:.1f} MiB", v / (1 << 20));
  }
  return fmt::format("{:.2f} GiB", v / (1 << 30));
}

// Reads the tokenizer kind and size from tokenizer.json without building a tokenizer:
// model.type and the size of model.vocab plus added tokens not already in it.
absl::Status DescribeHfTokenizer(const model::ModelFiles& files, TokenizerInfo* info) {
  const std::string& path = files.tokenizer_json_path();
  if (path.empty())
    return absl::OkStatus();
  info->source = path;
  SY_ASSIGN_OR_RETURN(std::unique_ptr<base::JsonDocument> doc, base::JsonDocument::ParseFile(path));
  const base::JsonPath at(path);
  SY_ASSIGN_OR_RETURN(std::optional<simdjson::dom::element> model,
                      base::OptionalField(doc->root(), "model", at));
  if (!model)
    return absl::OkStatus();
  const base::JsonPath model_at = at.Child("model");
  SY_ASSIGN_OR_RETURN(info->kind, base::FieldOr<std::string>(*model, "type", "", model_at));
  SY_ASSIGN_OR_RETURN(std::optional<simdjson::dom::element> vocab,
                      base::OptionalField(*model, "vocab", model_at));
  if (!vocab)
    return absl::OkStatus();
  const base::JsonPath vocab_at = model_at.Child("vocab");
  int64_t size = 0;
  int64_t max_id = -1;
  simdjson::dom::object entries;
  simdjson::dom::array list;
  if (vocab->get_object().get(entries) == simdjson::SUCCESS) {
    for (auto [token, id] : entries) {  // token -> id
      ++size;
      SY_ASSIGN_OR_RETURN(const int64_t v, base::FieldAs<int64_t>(id, token, vocab_at));
      max_id = std::max(max_id, v);
    }
  } else if (vocab->get_array().get(list) == simdjson::SUCCESS) {  // [token, score] by id
    size = static_cast<int64_t>(list.size());
    max_id = size - 1;
  } else {
    return vocab_at.Error("expected an object or an array");
  }
  SY_ASSIGN_OR_RETURN(std::optional<simdjson::dom::array> added,
                      base::OptionalField<simdjson::dom::array>(doc->root(), "added_tokens", at));
  if (added) {
    const base::JsonPath added_at = at.Child("added_tokens");
    size_t i = 0;
    for (simdjson::dom::element token : *added) {
      SY_ASSIGN_OR_RETURN(const int64_t id,
                          base::RequiredField<int64_t>(token, "id", added_at.Index(i++)));
      max_id = std::max(max_id, id);
    }
  }
  info->vocab_size = std::max(size, max_id + 1);
  return absl::OkStatus();
}

void DescribeGgufTokenizer(const model::GgufFile& gguf, TokenizerInfo* info) {
  if (auto kind = gguf.GetString("tokenizer.ggml.model"); kind.ok()) {
    info->kind = std::string(*kind);
    info->source = "gguf";
  }
  if (const model::GgufValue* tokens = gguf.Find("tokenizer.ggml.tokens"); tokens != nullptr) {
    info->vocab_size = static_cast<int64_t>(tokens->count);
  }
}

// The tokenizer, and whether there is a chat template, found as the engine finds it.
absl::StatusOr<TokenizerInfo> DescribeText(const model::ModelFiles& files) {
  TokenizerInfo info;
  if (files.gguf() != nullptr) {
    DescribeGgufTokenizer(*files.gguf(), &info);
  } else {
    SY_RETURN_IF_ERROR(DescribeHfTokenizer(files, &info));
  }
  const absl::StatusOr<text::ModelChatTemplate> tmpl = model::FindModelChatTemplate(files);
  if (!tmpl.ok() && !absl::IsNotFound(tmpl.status()))
    return tmpl.status();
  info.chat_template = tmpl.ok();
  return info;
}

// One line per metadata value; long strings and arrays are summarised.
std::string DescribeGgufValue(const model::GgufValue& v) {
  using model::GgufType;
  if (v.type == GgufType::kArray) {
    return fmt::format("[{} x {}]", v.count, model::GgufTypeName(v.element_type));
  }
  if (v.type == GgufType::kString) {
    if (v.s.size() > 60) {
      return base::JsonString(std::string(v.s.substr(0, 57)) + "...");
    }
    return base::JsonString(v.s);
  }
  if (v.type == GgufType::kBool) {
    return v.u ? "true" : "false";
  }
  double d = 0;
  if (v.type == GgufType::kFloat32 || v.type == GgufType::kFloat64) {
    return fmt::format("{}", v.f);
  }
  int64_t i = 0;
  if (v.ToInt64(&i)) {
    return fmt::format("{}", i);
  }
  v.ToDouble(&d);
  return fmt::format("{}", d);
}

std::string ShapeJson(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    out += fmt::format("{}{}", i ? ", " : "", shape[i]);
  }
  return out + "]";
}

std::string RopeName(model::RopeScaling::Type type) {
  switch (type) {
    case model::RopeScaling::Type::kNone:
      return "none";
    case model::RopeScaling::Type::kLinear:
      return "linear";
    case model::RopeScaling::Type::kLlama3:
      return "llama3";
  }
  return "unknown";
}

std::string GroupsJson(const std::vector<TensorGroup>& groups) {
  std::string out = "[";
  for (size_t i = 0; i < groups.size(); ++i) {
    const TensorGroup& g = groups[i];
    out += fmt::format(
        "{}{{\"group\": {}, \"tensors\": {}, \"parameters\": {}, \"bytes\": {}, \"dtypes\": {{",
        i ? ", " : "", base::JsonString(g.group), g.tensors, g.parameters, g.bytes);
    bool first = true;
    for (const auto& [name, d] : g.dtypes) {
      out += fmt::format("{}{}: {{\"tensors\": {}, \"bytes\": {}}}", first ? "" : ", ",
                         base::JsonString(name), d.tensors, d.bytes);
      first = false;
    }
    out += "}}";
  }
  return out + "]";
}

std::string MemoryJson(const MemoryEstimate& m) {
  return fmt::format(
      "{{\"max_model_len\": {}, \"block_size\": {}, \"sliding_window\": {}, \"kv_dtype\": {}, "
      "\"kv_blocks\": {}, \"kv_block_bytes\": {}, \"kv_cache_bytes\": {}, "
      "\"weights_bytes\": {}, \"packed_bytes\": {}, \"total_bytes\": {}}}",
      m.max_model_len, m.block_size, m.sliding_window,
      base::JsonString(runtime::DTypeName(m.kv_dtype)), m.kv_blocks, m.kv_block_bytes,
      m.kv_cache_bytes, m.weights_bytes, m.packed_bytes, m.total_bytes());
}

void PrintJson(const model::ModelFiles& files, const TokenizerInfo& tok,
               const std::map<std::string, std::pair<int64_t, uint64_t>>& dtypes,
               const std::vector<TensorGroup>& groups, const MemoryEstimate& memory) {
  const model::ModelConfig& c = files.config();
  std::string out = "{";
  out += fmt::format("\"path\": {}, \"format\": {}", base::JsonString(files.path()),
                     base::JsonString(model::WeightFormatName(files.format())));
  if (files.gguf() != nullptr) {
    out += fmt::format(", \"gguf_version\": {}", files.gguf()->version());
  }
  out += ", \"weight_files\": [";
  const std::vector<std::string> weight_files = files.WeightFiles();
  for (size_t i = 0; i < weight_files.size(); ++i) {
    out += (i ? ", " : "") + base::JsonString(weight_files[i]);
  }
  out += fmt::format("], \"file_bytes\": {}", files.WeightFileBytes());
  out += fmt::format(
      ", \"architecture\": {}, \"model_type\": {}, \"num_hidden_layers\": {}, "
      "\"hidden_size\": {}, \"intermediate_size\": {}, \"num_attention_heads\": {}, "
      "\"num_key_value_heads\": {}, \"head_dim\": {}, \"vocab_size\": {}, "
      "\"max_position_embeddings\": {}, \"rope_theta\": {}, \"rope_scaling\": {}, "
      "\"rms_norm_eps\": {}, \"tie_word_embeddings\": {}",
      base::JsonString(c.architecture), base::JsonString(c.model_type), c.num_hidden_layers,
      c.hidden_size, c.intermediate_size, c.num_attention_heads, c.num_key_value_heads, c.head_dim,
      c.vocab_size, c.max_position_embeddings, c.rope_theta,
      base::JsonString(RopeName(c.rope_scaling.type)), c.rms_norm_eps,
      c.tie_word_embeddings ? "true" : "false");
  out += fmt::format(", \"parameter_count\": {}, \"parameter_count_human\": {}",
                     files.ParameterCount(), base::JsonString(HumanCount(files.ParameterCount())));
  out += ", \"dtypes\": {";
  bool first = true;
  for (const auto& [name, stats] : dtypes) {
    out += fmt::format("{}{}: {{\"tensors\": {}, \"bytes\": {}}}", first ? "" : ", ",
                       base::JsonString(name), stats.first, stats.second);
    first = false;
  }
  out += "}, \"tensor_groups\": " + GroupsJson(groups);
  out += ", \"memory\": " + MemoryJson(memory);
  out += ", \"tokenizer\": ";
  if (tok.kind.empty() && tok.vocab_size < 0) {
    out += "null";
  } else {
    out += fmt::format("{{\"kind\": {}, \"source\": {}, \"vocab_size\": {}}}",
                       base::JsonString(tok.kind), base::JsonString(tok.source),
                       tok.vocab_size >= 0 ? fmt::format("{}", tok.vocab_size) : "null");
  }
  out += fmt::format(", \"chat_template\": {}", tok.chat_template ? "true" : "false");
  if (files.gguf() != nullptr) {
    out += ", \"gguf_metadata\": {";
    first = true;
    for (const model::GgufMetadataEntry& e : files.gguf()->metadata()) {
      out += fmt::format("{}{}: {}", first ? "" : ", ", base::JsonString(e.key),
                         base::JsonString(DescribeGgufValue(e.value)));
      first = false;
    }
    out += "}";
  }
  out += ", \"tensors\": [";
  first = true;
  for (const model::TensorView& t : files.tensors()) {
    out +=
        fmt::format("{}{{\"name\": {}, \"dtype\": {}, \"shape\": {}, \"bytes\": {}}}",
                    first ? "" : ", ", base::JsonString(t.name),
                    base::JsonString(model::DTypeName(t.dtype)), ShapeJson(t.shape), t.byte_size);
    first = false;
  }
  out += "]}\n";
  std::fputs(out.c_str(), stdout);
}

std::string GroupsText(const std::vector<TensorGroup>& groups) {
  std::string out = "tensor groups:\n";
  for (const TensorGroup& g : groups) {
    out += fmt::format("  {:<17} {:>10}", g.group, HumanBytes(g.bytes));
    for (const auto& [name, d] : g.dtypes)
      out += fmt::format("  {} x{}", name, d.tensors);
    if (g.dtypes.size() > 1) {
      out += " (";
      bool first = true;
      for (const auto& [name, d] : g.dtypes) {
        out += fmt::format("{}{} {}", first ? "" : ", ", name, HumanBytes(d.bytes));
        first = false;
      }
      out += ")";
    }
    out += "\n";
  }
  return out;
}

std::string MemoryText(const MemoryEstimate& m) {
  return fmt::format(
      "memory:        {} at --max-model-len {} = weights {}{} + KV cache {}\n"
      "               (KV {}: {} blocks of {} tokens{}, {} each)\n",
      HumanBytes(m.total_bytes()), m.max_model_len, HumanBytes(m.weights_bytes),
      m.packed_bytes > 0 ? fmt::format(" + packed copies {}", HumanBytes(m.packed_bytes)) : "",
      HumanBytes(m.kv_cache_bytes), runtime::DTypeName(m.kv_dtype), m.kv_blocks, m.block_size,
      m.sliding_window > 0 ? fmt::format(" under a {}-token sliding window", m.sliding_window) : "",
      HumanBytes(m.kv_block_bytes));
}

void PrintText(const model::ModelFiles& files, const TokenizerInfo& tok,
               const std::map<std::string, std::pair<int64_t, uint64_t>>& dtypes,
               const std::vector<TensorGroup>& groups, const MemoryEstimate& memory,
               bool list_tensors) {
  const model::ModelConfig& c = files.config();
  std::string format(model::WeightFormatName(files.format()));
  if (files.gguf() != nullptr) {
    format += fmt::format(" v{}", files.gguf()->version());
  }
  std::string out;
  out += fmt::format("path:          {}\n", files.path());
  out +=
      fmt::format("format:        {} ({} file{}, {})\n", format, files.WeightFiles().size(),
                  files.WeightFiles().size() == 1 ? "" : "s", HumanBytes(files.WeightFileBytes()));
  out += fmt::format("architecture:  {} (model_type {})\n", c.architecture, c.model_type);
  out += fmt::format(
      "shape:         {} layers, hidden {}, ffn {}, heads {}, kv heads {}, head_dim {}\n",
      c.num_hidden_layers, c.hidden_size, c.intermediate_size, c.num_attention_heads,
      c.num_key_value_heads, c.head_dim);
  out += fmt::format("vocab:         {}\n", c.vocab_size);
  out += fmt::format("context:       {} (rope_theta {}, scaling {})\n", c.max_position_embeddings,
                     c.rope_theta, RopeName(c.rope_scaling.type));
  out += fmt::format("parameters:    {} ({})\n", files.ParameterCount(),
                     HumanCount(files.ParameterCount()));
  out += "dtypes:       ";
  for (const auto& [name, stats] : dtypes) {
    out += fmt::format(" {} x{} ({})", name, stats.first, HumanBytes(stats.second));
  }
  out += "\n";
  out += GroupsText(groups);
  out += MemoryText(memory);
  if (tok.kind.empty() && tok.vocab_size < 0) {
    out += "tokenizer:     none\n";
  } else {
    out +=
        fmt::format("tokenizer:     {} from {}{}\n", tok.kind.empty() ? "?" : tok.kind, tok.source,
                    tok.vocab_size >= 0 ? fmt::format(", {} tokens", tok.vocab_size) : "");
  }
  out += fmt::format("chat template: {}\n", tok.chat_template ? "present" : "absent");
  if (files.gguf() != nullptr) {
    out += fmt::format("gguf metadata: {} keys, alignment {}\n", files.gguf()->metadata().size(),
                       files.gguf()->alignment());
    for (const model::GgufMetadataEntry& e : files.gguf()->metadata()) {
      out += fmt::format("  {} = {}\n", e.key, DescribeGgufValue(e.value));
    }
  }
  if (list_tensors) {
    out += fmt::format("tensors:       {}\n", files.tensors().size());
    for (const model::TensorView& t : files.tensors()) {
      out += fmt::format("  {} {} {}\n", t.name, model::DTypeName(t.dtype), ShapeJson(t.shape));
    }
  }
  std::fputs(out.c_str(), stdout);
}

absl::Status RunInspect(const InspectOptions& opts) {
  auto files = model::ModelFiles::Open(opts.path);
  if (!files.ok())
    return InputError(files.status());
  const absl::StatusOr<TokenizerInfo> tok = DescribeText(**files);
  if (!tok.ok())
    return InputError(tok.status());
  std::map<std::string, std::pair<int64_t, uint64_t>> dtypes;
  for (const model::TensorView& t : (*files)->tensors()) {
    auto& stats = dtypes[std::string(model::DTypeName(t.dtype))];
    ++stats.first;
    stats.second += t.byte_size;
  }
  // The backend an engine on this host runs (its defaults): its copies of the matrices
  // count in the memory.
  SY_ASSIGN_OR_RETURN(const std::unique_ptr<runtime::Backend> backend,
                      runtime::CreateCpuBackend({.num_threads = 1}));
  auto memory = EstimateMemory(**files, opts.memory, backend.get());
  if (!memory.ok())
    return memory.status();
  const std::vector<TensorGroup> groups = GroupTensors((*files)->tensors());
  if (opts.json) {
    PrintJson(**files, *tok, dtypes, groups, *memory);
  } else {
    PrintText(**files, *tok, dtypes, groups, *memory, opts.list_tensors);
  }
  return absl::OkStatus();
}

}  // namespace

void RegisterModelCommand(CLI::App& app, int* exit_code) {
  CLI::App* model = app.add_subcommand("model", "Inspect model files");
  model->require_subcommand(1);
  CLI::App* inspect =
      model->add_subcommand("inspect", "Validate and describe a model directory or .gguf file");
  auto opts = std::make_shared<InspectOptions>();
  inspect->add_option("PATH", opts->path, "Hugging Face model directory or .gguf file")->required();
  inspect->add_flag("--json", opts->json, "Print one JSON object (includes every tensor)");
  inspect->add_flag("--tensors", opts->list_tensors, "List every tensor");
  inspect
      ->add_option("--max-model-len", opts->memory.max_model_len,
                   "context length of the memory estimate; 0 = the model's")
      ->capture_default_str();
  inspect
      ->add_option("--block-size", opts->memory.block_size, "KV cache block size, as the engine's")
      ->capture_default_str();
  inspect->callback([opts, exit_code] { *exit_code = ExitCode(RunInspect(*opts)); });
}

}  // namespace switchyard::cli
