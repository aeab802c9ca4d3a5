// switchyard generate --model PATH --prompt TEXT -n N: runs the prompt through the eager
// forward pass (prefill in chunks, then decode) on the CPU backend, streams the text and
// prints prefill and decode throughput on stderr. --json prints one JSON object instead
// (prompt ids, generated ids, text and, with --dump-logits K, the logits of the first K
// steps) for the parity tests.
//
// --batch B runs B copies of the prompt as B sequences with their own KV blocks: prefilled
// packed into --prefill-chunk steps, then decoded together, one Forward of B tokens per
// step (finished sequences drop out). Each samples on its own (with --seed S, sequence i
// uses S + i). Only sequence 0's text is streamed (and is --json's "text" and "tokens";
// "batch_tokens" holds every sequence's ids); the stderr counts sum all sequences.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "cli/commands.h"
#include "cli/exit_code.h"
#include "fmt/format.h"

#include "base/json.h"
#include "base/status_macros.h"
#include "engine/sampler.h"
#include "engine/sampling_params.h"
#include "model/device_dtype.h"
#include "model/llama_model.h"
#include "model/model_files.h"
#include "model/model_text.h"
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
  int64_t batch = 1;
  std::string dtype = "auto";
  std::string kv_cache_dtype = "auto";
  bool ignore_eos = false;
  bool json = false;
  int64_t dump_logits = 0;
};

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// The prompt as the model sees it: the raw text, or with --chat one user turn rendered by
// the model's chat template (tokenized without adding special tokens, as transformers'
// apply_chat_template does).
absl::StatusOr<std::vector<int32_t>> PromptIds(const GenerateOptions& o, const model::ModelFiles& f,
                                               const text::Tokenizer& tokenizer) {
  if (!o.chat)
    return tokenizer.Encode(o.prompt, true);
  SY_ASSIGN_OR_RETURN(text::ModelChatTemplate tmpl, model::LoadModelChatTemplate(f, tokenizer));
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

// One of the --batch copies of the prompt.
struct Sequence {
  Sequence(int64_t vocab_size, std::span<const int32_t> prompt, std::optional<uint64_t> seed)
      : tokens(prompt.begin(), prompt.end()), sampling(vocab_size, prompt, seed) {}

  std::vector<int32_t> tokens;  // the prompt, then the generated ids
  std::vector<int32_t> block_table;
  engine::SequenceSamplingState sampling;
  int64_t generated = 0;
};

// The host arrays of one ForwardBatch, filled sequence by sequence.
class StepBuilder {
 public:
  explicit StepBuilder(int64_t block_size) : block_size_(block_size) {}

  void Clear() {
    tokens_.clear();
    positions_.clear();
    slots_.clear();
    attention_.clear();
    logit_rows_.clear();
    logit_owner_.clear();
  }

  // Adds tokens [begin, begin + len) of sequence `index`, wanting the logits of the last
  // one if asked. REQUIRES: `seq` is not resized until the step has run.
  void Add(size_t index, const Sequence& seq, int64_t begin, int64_t len, bool want_logits) {
    const auto row = static_cast<int64_t>(tokens_.size());
    for (int64_t p = begin; p < begin + len; ++p) {
      tokens_.push_back(seq.tokens[static_cast<size_t>(p)]);
      positions_.push_back(static_cast<int32_t>(p));
      slots_.push_back(static_cast<int32_t>(
          seq.block_table[static_cast<size_t>(p / block_size_)] * block_size_ + p % block_size_));
    }
    attention_.push_back({row, len, begin + len, seq.block_table});
    if (want_logits) {
      logit_rows_.push_back(static_cast<int32_t>(row + len - 1));
      logit_owner_.push_back(index);
    }
  }

  model::ForwardBatch Batch() const {
    return {tokens_, positions_, slots_, attention_, logit_rows_};
  }

  // The sequence each row of the step's logits belongs to.
  const std::vector<size_t>& logit_owner() const { return logit_owner_; }

 private:
  int64_t block_size_;
  std::vector<int32_t> tokens_;
  std::vector<int32_t> positions_;
  std::vector<int32_t> slots_;
  std::vector<runtime::AttentionSequence> attention_;
  std::vector<int32_t> logit_rows_;
  std::vector<size_t> logit_owner_;
};

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
  if (o.max_tokens < 0 || o.block_size <= 0 || o.prefill_chunk <= 0 || o.dump_logits < 0 ||
      o.batch <= 0) {
    return absl::InvalidArgumentError(
        "-n, --dump-logits must be >= 0; --block-size, --prefill-chunk and --batch must be "
        "positive");
  }
  model::LlamaModelOptions model_options;
  SY_ASSIGN_OR_RETURN(model_options.weight_dtype,
                      model::ParseDeviceDType("--dtype", o.dtype, model::DTypeTarget::kWeights));
  SY_ASSIGN_OR_RETURN(
      model_options.kv_dtype,
      model::ParseDeviceDType("--kv-cache-dtype", o.kv_cache_dtype, model::DTypeTarget::kKvCache));
  SY_ASSIGN_OR_RETURN(std::unique_ptr<model::ModelFiles> files, model::ModelFiles::Open(o.model));
  SY_ASSIGN_OR_RETURN(std::unique_ptr<text::Tokenizer> tokenizer,
                      model::LoadModelTokenizer(*files));
  SY_ASSIGN_OR_RETURN(std::vector<int32_t> prompt, PromptIds(o, *files, *tokenizer));
  if (prompt.empty())
    return absl::InvalidArgumentError("the prompt encodes to no tokens");

  runtime::CpuBackendOptions backend_options;
  backend_options.num_threads = o.threads;
  SY_ASSIGN_OR_RETURN(std::unique_ptr<runtime::Backend> backend,
                      runtime::CreateCpuBackend(backend_options));
  model_options.max_num_batched_tokens = std::max(o.prefill_chunk, o.batch);
  model_options.max_logit_rows = o.batch;
  SY_ASSIGN_OR_RETURN(std::unique_ptr<model::LlamaModel> llm,
                      model::LlamaModel::Create(*files, backend.get(), model_options));
  const model::ModelConfig& config = llm->config();
  const auto total = static_cast<int64_t>(prompt.size()) + o.max_tokens;
  if (total > config.max_position_embeddings) {
    return absl::InvalidArgumentError(
        fmt::format("prompt ({} tokens) + -n {} exceeds the model's context of {}", prompt.size(),
                    o.max_tokens, config.max_position_embeddings));
  }
  const int64_t blocks_per_seq = (total + o.block_size - 1) / o.block_size;
  SY_ASSIGN_OR_RETURN(std::unique_ptr<model::KvCacheStorage> kv,
                      model::KvCacheStorage::Create(
                          backend.get(), llm->KvShape(blocks_per_seq * o.batch, o.block_size)));

  std::vector<int32_t> eos(config.eos_token_ids.begin(), config.eos_token_ids.end());
  if (tokenizer->eos_id().has_value())
    eos.push_back(*tokenizer->eos_id());

  const auto vocab = static_cast<size_t>(config.vocab_size);
  const auto batch = static_cast<size_t>(o.batch);
  std::vector<Sequence> seqs;
  seqs.reserve(batch);
  for (size_t s = 0; s < batch; ++s) {
    std::optional<uint64_t> seed = params.seed;
    if (seed.has_value())
      *seed += s;
    seqs.emplace_back(config.vocab_size, prompt, seed);
    Sequence& seq = seqs.back();
    seq.tokens.reserve(static_cast<size_t>(total));
    seq.block_table.resize(static_cast<size_t>(blocks_per_seq));
    for (size_t i = 0; i < seq.block_table.size(); ++i)
      seq.block_table[i] = static_cast<int32_t>(s * seq.block_table.size() + i);
  }

  std::vector<float> step_logits(batch * vocab);
  // The logits each sequence's prompt ends with, sampled by the first decode round.
  std::vector<float> first_logits(batch * vocab);
  std::vector<float> dumped;
  StepBuilder step(o.block_size);
  auto forward = [&]() -> absl::Status {
    return llm->Forward(step.Batch(), *kv,
                        std::span<float>(step_logits).first(step.logit_owner().size() * vocab));
  };

  const auto prompt_len = static_cast<int64_t>(prompt.size());
  const Clock::time_point prefill_start = Clock::now();
  // Prompts are packed back to back into steps of at most --prefill-chunk tokens, so one
  // step may finish one sequence's prompt and start the next one's.
  for (size_t s = 0, begin = 0; s < batch;) {
    step.Clear();
    int64_t budget = o.prefill_chunk;
    while (s < batch && budget > 0) {
      const int64_t len = std::min(budget, prompt_len - static_cast<int64_t>(begin));
      const bool ends_prompt = static_cast<int64_t>(begin) + len == prompt_len;
      step.Add(s, seqs[s], static_cast<int64_t>(begin), len, ends_prompt);
      budget -= len;
      begin += static_cast<size_t>(len);
      if (ends_prompt) {
        ++s;
        begin = 0;
      }
    }
    SY_RETURN_IF_ERROR(forward());
    for (size_t row = 0; row < step.logit_owner().size(); ++row) {
      std::copy_n(
          step_logits.begin() + static_cast<std::ptrdiff_t>(row * vocab), vocab,
          first_logits.begin() + static_cast<std::ptrdiff_t>(step.logit_owner()[row] * vocab));
    }
  }
  const double prefill_ms = MsSince(prefill_start);

  engine::Sampler sampler(config.vocab_size);
  engine::SampleResult sample;
  text::IncrementalDetokenizer detok(tokenizer.get(), true, prompt);
  std::string text;
  const Clock::time_point decode_start = Clock::now();
  // Sequences still generating, in the order of their rows in the last step's logits.
  std::vector<size_t> active;
  if (o.max_tokens > 0) {
    for (size_t s = 0; s < batch; ++s)
      active.push_back(s);
  }
  std::vector<size_t> next;
  for (bool first_round = true; !active.empty(); first_round = false) {
    next.clear();
    for (size_t row = 0; row < active.size(); ++row) {
      const size_t s = active[row];
      Sequence& seq = seqs[s];
      const std::span<const float> logits =
          std::span<const float>(first_round ? first_logits : step_logits)
              .subspan((first_round ? s : row) * vocab, vocab);
      if (s == 0 && seq.generated < o.dump_logits)
        dumped.insert(dumped.end(), logits.begin(), logits.end());
      sampler.Sample(logits, params, &seq.sampling, &sample);
      seq.sampling.AppendOutput(sample.token);
      seq.tokens.push_back(sample.token);
      ++seq.generated;
      if (s == 0) {
        std::string piece = detok.Push(sample.token);
        text.append(piece);
        if (!o.json && !piece.empty()) {
          std::fwrite(piece.data(), 1, piece.size(), stdout);
          std::fflush(stdout);
        }
      }
      const bool stop =
          !o.ignore_eos && std::find(eos.begin(), eos.end(), sample.token) != eos.end();
      if (!stop && seq.generated < o.max_tokens)
        next.push_back(s);
    }
    if (next.empty())
      break;
    step.Clear();
    for (size_t s : next)
      step.Add(s, seqs[s], static_cast<int64_t>(seqs[s].tokens.size()) - 1, 1, true);
    SY_RETURN_IF_ERROR(forward());
    active.swap(next);
  }
  std::string tail = detok.Flush();
  text.append(tail);
  const double decode_ms = MsSince(decode_start);
  // Each sequence's first token comes from the prefill's logits; decode steps are the ones
  // after it.
  int64_t decode_tokens = 0;
  for (const Sequence& seq : seqs)
    decode_tokens += std::max<int64_t>(seq.generated - 1, 0);
  const int64_t prefill_tokens = prompt_len * o.batch;

  if (o.json) {
    auto output = [&](const Sequence& seq) {
      return std::span<const int32_t>(seq.tokens).subspan(prompt.size());
    };
    std::string out = "{\"prompt_ids\": ";
    AppendIds(prompt, &out);
    out.append(", \"tokens\": ");
    AppendIds(output(seqs[0]), &out);
    out.append(", \"batch_tokens\": [");
    for (size_t s = 0; s < batch; ++s) {
      out.append(s == 0 ? "" : ", ");
      AppendIds(output(seqs[s]), &out);
    }
    out.append("], \"text\": ");
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
               static_cast<long long>(prefill_tokens), prefill_ms,
               prefill_ms > 0 ? 1000.0 * static_cast<double>(prefill_tokens) / prefill_ms : 0.0,
               static_cast<long long>(decode_tokens), decode_ms,
               decode_ms > 0 ? 1000.0 * static_cast<double>(decode_tokens) / decode_ms : 0.0);
  return absl::OkStatus();
}

}  // namespace

void RegisterGenerateCommand(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<GenerateOptions>();
  o->sampling.temperature = 0;
  CLI::App* cmd = app.add_subcommand("generate", "Generate text from a prompt");
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
  cmd->add_option("--batch", o->batch,
                  "run B copies of the prompt as B sequences, decoded together; only "
                  "sequence 0's text is printed")
      ->capture_default_str();
  cmd->add_option("--dtype", o->dtype,
                  "weight dtype on the device: auto (as stored), float32, float16 or bfloat16 "
                  "(also float, half, f32, f16, bf16)")
      ->capture_default_str();
  cmd->add_option("--kv-cache-dtype,--kv-dtype", o->kv_cache_dtype,
                  "KV cache dtype: auto (f32 for f32 weights, else f16), float32, float16 or "
                  "bfloat16 (also float, half, f32, f16, bf16)")
      ->capture_default_str();
  cmd->add_flag("--ignore-eos", o->ignore_eos, "keep generating past end-of-sequence tokens");
  cmd->add_flag("--json", o->json, "print one JSON object (ids, text, logits) instead of text");
  cmd->add_option("--dump-logits", o->dump_logits, "with --json: logits of the first K steps")
      ->capture_default_str();
  cmd->callback([o, exit_code] { *exit_code = ExitCode(Generate(*o)); });
}

}  // namespace switchyard::cli
