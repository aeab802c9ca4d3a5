// switchyard generate --model PATH --prompt TEXT -n N: runs one sequence through the eager
// forward pass (prefill in chunks, then decode) on the CPU backend, streams the text and
// prints prefill and decode throughput on stderr. --json prints one JSON object instead
// (prompt ids, generated ids, text and, with --dump-logits K, the logits of the first K
// steps) for the parity tests.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "cli/commands.h"
#include "fmt/format.h"

#include "base/json.h"
#include "base/status_macros.h"
#include "engine/sampler.h"
#include "engine/sampling_params.h"
#include "model/gguf_tokenizer.h"
#include "model/llama_model.h"
#include "model/model_files.h"
#include "runtime/cpu/cpu_backend.h"
#include "text/chat_template.h"
#include "text/incremental_detokenizer.h"
#include "text/tokenizer.h"

namespace switchyard::cli {
namespace {

struct GenerateOptions {
  std::string model;
  std::string prompt;
  int64_t max_tokens = 64;
  engine::SamplingParams sampling;
  int64_t seed = -1;
  bool chat = false;
  size_t threads = 0;
  int64_t block_size = 16;
  int64_t prefill_chunk = 512;
  std::string dtype = "auto";
  bool ignore_eos = false;
  bool json = false;
  int64_t dump_logits = 0;
};

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

absl::StatusOr<std::unique_ptr<text::Tokenizer>> LoadModelTokenizer(const model::ModelFiles& f) {
  if (f.gguf() != nullptr)
    return model::LoadTokenizerFromGguf(*f.gguf());
  if (f.tokenizer_json_path().empty()) {
    return absl::NotFoundError(fmt::format("{}: no tokenizer.json", f.path()));
  }
  return text::Tokenizer::FromJsonFile(f.tokenizer_json_path());
}

// The prompt as the model sees it: the raw text, or with --chat one user turn rendered by
// the model's chat template (tokenized without adding special tokens, as transformers'
// apply_chat_template does).
absl::StatusOr<std::vector<int32_t>> PromptIds(const GenerateOptions& o, const model::ModelFiles& f,
                                               const text::Tokenizer& tokenizer) {
  if (!o.chat)
    return tokenizer.Encode(o.prompt, true);
  text::ModelChatTemplate tmpl;
  if (f.gguf() != nullptr) {
    SY_ASSIGN_OR_RETURN(std::string_view source, f.gguf()->GetString("tokenizer.chat_template"));
    tmpl.source = std::string(source);
    if (tokenizer.bos_id().has_value())
      tmpl.bos_token = std::string(tokenizer.IdToToken(*tokenizer.bos_id()));
    if (tokenizer.eos_id().has_value())
      tmpl.eos_token = std::string(tokenizer.IdToToken(*tokenizer.eos_id()));
  } else {
    SY_ASSIGN_OR_RETURN(tmpl, text::LoadModelChatTemplate(f.path()));
  }
  SY_ASSIGN_OR_RETURN(std::unique_ptr<text::ChatTemplate> compiled,
                      text::ChatTemplate::Compile(tmpl.source));
  text::ChatTemplateInputs inputs;
  inputs.messages_json = "[{\"role\": \"user\", \"content\": ";
  base::AppendJsonString(o.prompt, false, &inputs.messages_json);
  inputs.messages_json.append("}]");
  inputs.add_generation_prompt = true;
  inputs.extra_context_json = "{\"bos_token\": ";
  base::AppendJsonString(tmpl.bos_token, false, &inputs.extra_context_json);
  inputs.extra_context_json.append(", \"eos_token\": ");
  base::AppendJsonString(tmpl.eos_token, false, &inputs.extra_context_json);
  inputs.extra_context_json.append("}");
  SY_ASSIGN_OR_RETURN(std::string rendered, compiled->Render(inputs));
  return tokenizer.Encode(rendered, false);
}

void AppendIds(std::span<const int32_t> ids, std::string* out) {
  out->push_back('[');
  for (size_t i = 0; i < ids.size(); ++i)
    out->append(fmt::format("{}{}", i == 0 ? "" : ", ", ids[i]));
  out->push_back(']');
}

absl::Status Generate(const GenerateOptions& o) {
  engine::SamplingParams params = o.sampling;
  if (o.seed >= 0)
    params.seed = static_cast<uint64_t>(o.seed);
  SY_RETURN_IF_ERROR(engine::ValidateSamplingParams(params));
  if (o.max_tokens < 0 || o.block_size <= 0 || o.prefill_chunk <= 0 || o.dump_logits < 0) {
    return absl::InvalidArgumentError(
        "-n, --dump-logits must be >= 0; --block-size and "
        "--prefill-chunk must be positive");
  }
  model::LlamaModelOptions model_options;
  if (o.dtype == "f32") {
    model_options.weight_dtype = model::WeightDTypePolicy::kF32;
  } else if (o.dtype == "bf16") {
    model_options.weight_dtype = model::WeightDTypePolicy::kBF16;
  } else if (o.dtype != "auto") {
    return absl::InvalidArgumentError(
        fmt::format("--dtype must be auto, f32 or bf16, got '{}'", o.dtype));
  }
  SY_ASSIGN_OR_RETURN(std::unique_ptr<model::ModelFiles> files, model::ModelFiles::Open(o.model));
  SY_ASSIGN_OR_RETURN(std::unique_ptr<text::Tokenizer> tokenizer, LoadModelTokenizer(*files));
  SY_ASSIGN_OR_RETURN(std::vector<int32_t> prompt, PromptIds(o, *files, *tokenizer));
  if (prompt.empty())
    return absl::InvalidArgumentError("the prompt encodes to no tokens");

  runtime::CpuBackendOptions backend_options;
  backend_options.num_threads = o.threads;
  SY_ASSIGN_OR_RETURN(std::unique_ptr<runtime::Backend> backend,
                      runtime::CreateCpuBackend(backend_options));
  model_options.max_num_batched_tokens = o.prefill_chunk;
  model_options.max_logit_rows = 1;
  SY_ASSIGN_OR_RETURN(std::unique_ptr<model::LlamaModel> llm,
                      model::LlamaModel::Create(*files, backend.get(), model_options));
  const model::ModelConfig& config = llm->config();
  const auto total = static_cast<int64_t>(prompt.size()) + o.max_tokens;
  if (total > config.max_position_embeddings) {
    return absl::InvalidArgumentError(
        fmt::format("prompt ({} tokens) + -n {} exceeds the model's context of {}", prompt.size(),
                    o.max_tokens, config.max_position_embeddings));
  }
  const int64_t num_blocks = (total + o.block_size - 1) / o.block_size;
  SY_ASSIGN_OR_RETURN(
      std::unique_ptr<model::KvCacheStorage> kv,
      model::KvCacheStorage::Create(backend.get(), llm->KvShape(num_blocks, o.block_size)));
  std::vector<int32_t> block_table(static_cast<size_t>(num_blocks));
  for (size_t i = 0; i < block_table.size(); ++i)
    block_table[i] = static_cast<int32_t>(i);

  std::vector<int32_t> eos(config.eos_token_ids.begin(), config.eos_token_ids.end());
  if (tokenizer->eos_id().has_value())
    eos.push_back(*tokenizer->eos_id());

  const auto vocab = static_cast<size_t>(config.vocab_size);
  std::vector<float> logits(vocab);
  std::vector<float> dumped;
  std::vector<int32_t> positions(static_cast<size_t>(o.prefill_chunk));
  std::vector<int32_t> slots(static_cast<size_t>(o.prefill_chunk));
  // Runs tokens [begin, begin + len) of `all`, wanting the logits of the last one if asked.
  auto step = [&](std::span<const int32_t> all, int64_t begin, int64_t len,
                  bool want_logits) -> absl::Status {
    for (int64_t i = 0; i < len; ++i) {
      positions[static_cast<size_t>(i)] = static_cast<int32_t>(begin + i);
      slots[static_cast<size_t>(i)] = static_cast<int32_t>(
          block_table[static_cast<size_t>((begin + i) / o.block_size)] * o.block_size +
          (begin + i) % o.block_size);
    }
    const runtime::AttentionSequence seq{0, len, begin + len, block_table};
    const int32_t last_row = static_cast<int32_t>(len - 1);
    model::ForwardBatch batch;
    batch.tokens = all.subspan(static_cast<size_t>(begin), static_cast<size_t>(len));
    batch.positions = std::span<const int32_t>(positions).first(static_cast<size_t>(len));
    batch.slot_ids = std::span<const int32_t>(slots).first(static_cast<size_t>(len));
    batch.sequences = std::span<const runtime::AttentionSequence>(&seq, 1);
    if (want_logits)
      batch.logit_rows = std::span<const int32_t>(&last_row, 1);
    return llm->Forward(batch, *kv, want_logits ? std::span<float>(logits) : std::span<float>());
  };

  engine::Sampler sampler(config.vocab_size);
  engine::SequenceSamplingState state(config.vocab_size, prompt, params.seed);
  engine::SampleResult sample;
  text::IncrementalDetokenizer detok(tokenizer.get(), true, prompt);
  std::vector<int32_t> tokens = prompt;
  tokens.reserve(static_cast<size_t>(total));
  std::string text;

  const auto prompt_len = static_cast<int64_t>(prompt.size());
  const Clock::time_point prefill_start = Clock::now();
  for (int64_t begin = 0; begin < prompt_len; begin += o.prefill_chunk) {
    const int64_t len = std::min(o.prefill_chunk, prompt_len - begin);
    SY_RETURN_IF_ERROR(step(tokens, begin, len, begin + len == prompt_len));
  }
  const double prefill_ms = MsSince(prefill_start);

  const Clock::time_point decode_start = Clock::now();
  int64_t generated = 0;
  while (generated < o.max_tokens) {
    if (generated < o.dump_logits)
      dumped.insert(dumped.end(), logits.begin(), logits.end());
    sampler.Sample(logits, params, &state, &sample);
    state.AppendOutput(sample.token);
    tokens.push_back(sample.token);
    ++generated;
    std::string piece = detok.Push(sample.token);
    text.append(piece);
    if (!o.json && !piece.empty()) {
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
    }
    const bool stop = !o.ignore_eos && std::find(eos.begin(), eos.end(), sample.token) != eos.end();
    if (stop || generated == o.max_tokens)
      break;
    SY_RETURN_IF_ERROR(step(tokens, static_cast<int64_t>(tokens.size()) - 1, 1, true));
  }
  std::string tail = detok.Flush();
  text.append(tail);
  const double decode_ms = MsSince(decode_start);
  // The first token comes from the prefill's logits; decode steps are the ones after it.
  const int64_t decode_steps = std::max<int64_t>(generated - 1, 0);

  if (o.json) {
    std::string out = "{\"prompt_ids\": ";
    AppendIds(prompt, &out);
    out.append(", \"tokens\": ");
    AppendIds(std::span<const int32_t>(tokens).subspan(prompt.size()), &out);
    out.append(", \"text\": ");
    base::AppendJsonString(text, false, &out);
    out.append(", \"logits\": [");
    for (size_t row = 0; row * vocab < dumped.size(); ++row) {
      out.append(row == 0 ? "[" : ", [");
      for (size_t i = 0; i < vocab; ++i)
        out.append(fmt::format("{}{:.9g}", i == 0 ? "" : ", ", dumped[row * vocab + i]));
      out.push_back(']');
    }
    out.append(
        fmt::format("], \"prefill_ms\": {:.3f}, \"decode_ms\": {:.3f}}}\n", prefill_ms, decode_ms));
    std::fwrite(out.data(), 1, out.size(), stdout);
  } else {
    std::fwrite(tail.data(), 1, tail.size(), stdout);
    std::fputc('\n', stdout);
  }
  std::fflush(stdout);
  std::fprintf(stderr,
               "prefill: %lld tokens in %.1f ms (%.1f tok/s); decode: %lld tokens in %.1f ms "
               "(%.1f tok/s)\n",
               static_cast<long long>(prompt_len), prefill_ms,
               prefill_ms > 0 ? 1000.0 * static_cast<double>(prompt_len) / prefill_ms : 0.0,
               static_cast<long long>(decode_steps), decode_ms,
               decode_ms > 0 ? 1000.0 * static_cast<double>(decode_steps) / decode_ms : 0.0);
  return absl::OkStatus();
}

}  // namespace

void RegisterGenerateCommand(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<GenerateOptions>();
  o->sampling.temperature = 0;
  CLI::App* cmd = app.add_subcommand("generate", "Generate text from a prompt (one sequence)");
  cmd->add_option("--model", o->model, "model directory (HF layout) or .gguf file")->required();
  cmd->add_option("--prompt", o->prompt, "prompt text")->required();
  cmd->add_option("-n,--max-tokens", o->max_tokens, "tokens to generate")->capture_default_str();
  cmd->add_option("--temperature", o->sampling.temperature, "0 = greedy")->capture_default_str();
  cmd->add_option("--top-k", o->sampling.top_k, "-1 or 0 = off")->capture_default_str();
  cmd->add_option("--top-p", o->sampling.top_p)->capture_default_str();
  cmd->add_option("--min-p", o->sampling.min_p)->capture_default_str();
  cmd->add_option("--repetition-penalty", o->sampling.repetition_penalty)->capture_default_str();
  cmd->add_option("--presence-penalty", o->sampling.presence_penalty)->capture_default_str();
  cmd->add_option("--frequency-penalty", o->sampling.frequency_penalty)->capture_default_str();
  cmd->add_option("--seed", o->seed, "sampling seed; -1 = random")->capture_default_str();
  cmd->add_flag("--chat", o->chat, "wrap the prompt as one user turn of the chat template");
  cmd->add_option("--threads", o->threads, "compute threads; 0 = one per core")
      ->capture_default_str();
  cmd->add_option("--block-size", o->block_size, "KV cache block size")->capture_default_str();
  cmd->add_option("--prefill-chunk", o->prefill_chunk, "prompt tokens per prefill step")
      ->capture_default_str();
  cmd->add_option("--dtype", o->dtype, "weight dtype on the device: auto (as stored), f32, bf16")
      ->capture_default_str();
  cmd->add_flag("--ignore-eos", o->ignore_eos, "keep generating past end-of-sequence tokens");
  cmd->add_flag("--json", o->json, "print one JSON object (ids, text, logits) instead of text");
  cmd->add_option("--dump-logits", o->dump_logits, "with --json: logits of the first K steps")
      ->capture_default_str();
  cmd->callback([o, exit_code] {
    absl::Status status = Generate(*o);
    if (!status.ok()) {
      std::fprintf(stderr, "error: %s\n", std::string(status.message()).c_str());
      *exit_code = status.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
    }
  });
}

}  // namespace switchyard::cli
