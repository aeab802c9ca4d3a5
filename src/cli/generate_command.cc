// switchyard generate --model PATH --prompt TEXT -n N: runs the prompt through the engine
// loop that `switchyard engine` serves with (EngineCore over a LlamaRunner on the CPU
// backend: scheduler, KV cache manager, sampler, detokenizer), streams the text and prints
// prefill and decode throughput on stderr, so that the parity suites and the speed benchmark
// measure the serving path. --json prints one JSON object instead (prompt ids, generated ids,
// text and, with --dump-logits K, the raw logits of the first K steps) for the parity tests.
//
// The scheduler's token budget is --prefill-chunk (at least --batch): a prompt no longer than
// that is prefilled in one forward step, a longer one in chunks of that size; each decode
// step then runs one token per sequence. Prefix caching is off, so every sequence computes
// its own prompt.
//
// --batch B submits one request with n = B: B copies of the prompt as B sequences with their
// own KV blocks, each sampling on its own (with --seed S, sequence i uses S + i), finished
// sequences dropping out. Only sequence 0's text is streamed (and is --json's "text" and
// "tokens"; "batch_tokens" holds every sequence's ids); the stderr counts sum all sequences.
// Prefill time runs until every sequence has its first token and decode time from there, so
// the split is exact only when the budget holds all B prompts at once (--prefill-chunk >=
// B x prompt); with less, the scheduler runs early sequences' decode steps alongside later
// ones' prompts, as a server does.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "cli/commands.h"
#include "cli/compilation_flags.h"
#include "cli/exit_code.h"
#include "cli/logits_recording_runner.h"
#include "fmt/format.h"

#include "base/json.h"
#include "base/mutex.h"
#include "base/status_macros.h"
#include "engine/engine_core.h"
#include "engine/llama_runner.h"
#include "engine/sampling_params.h"
#include "model/device_dtype.h"
#include "model/model_files.h"
#include "model/model_text.h"
#include "text/chat_template.h"
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
  int32_t block_size = 16;
  int32_t prefill_chunk = 512;
  int32_t batch = 1;
  std::string dtype = "auto";
  std::string kv_cache_dtype = "auto";
  bool ignore_eos = false;
  bool json = false;
  int64_t dump_logits = 0;
  CompilationFlags compilation;
};

using Clock = std::chrono::steady_clock;

double Ms(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
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

// The request's updates, handed from the engine loop thread (stamped with when they left
// it) to the main thread, which prints them: the loop never waits on stdout.
class UpdateQueue {
 public:
  struct Entry {
    engine::RequestUpdate update;
    Clock::time_point at;
  };

  void Push(engine::RequestUpdate update) {
    const Clock::time_point at = Clock::now();
    {
      base::MutexLock lock(&mu_);
      entries_.push_back({std::move(update), at});
    }
    cv_.NotifyOne();
  }

  Entry Pop() {
    base::MutexLock lock(&mu_);
    cv_.Wait(&mu_, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !entries_.empty(); });
    Entry entry = std::move(entries_.front());
    entries_.pop_front();
    return entry;
  }

 private:
  base::Mutex mu_;
  base::CondVar cv_;
  std::deque<Entry> entries_ ABSL_GUARDED_BY(mu_);
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
  if (o.max_tokens < 1 || o.block_size <= 0 || o.prefill_chunk <= 0 || o.dump_logits < 0 ||
      o.batch <= 0) {
    return absl::InvalidArgumentError(
        "-n must be >= 1 and --dump-logits >= 0; --block-size, --prefill-chunk and --batch "
        "must be positive");
  }
  engine::LlamaRunnerOptions runner_options;
  SY_ASSIGN_OR_RETURN(runner_options.weight_dtype,
                      model::ParseDeviceDType("--dtype", o.dtype, model::DTypeTarget::kWeights));
  SY_ASSIGN_OR_RETURN(
      runner_options.kv_dtype,
      model::ParseDeviceDType("--kv-cache-dtype", o.kv_cache_dtype, model::DTypeTarget::kKvCache));
  SY_ASSIGN_OR_RETURN(std::unique_ptr<model::ModelFiles> files, model::ModelFiles::Open(o.model));
  SY_ASSIGN_OR_RETURN(std::unique_ptr<text::Tokenizer> tokenizer,
                      model::LoadModelTokenizer(*files));
  SY_ASSIGN_OR_RETURN(std::vector<int32_t> prompt, PromptIds(o, *files, *tokenizer));
  if (prompt.empty())
    return absl::InvalidArgumentError("the prompt encodes to no tokens");
  const model::ModelConfig config = files->config();
  const int64_t total = static_cast<int64_t>(prompt.size()) + o.max_tokens;
  if (total > config.max_position_embeddings) {
    return absl::InvalidArgumentError(
        fmt::format("prompt ({} tokens) + -n {} exceeds the model's context of {}", prompt.size(),
                    o.max_tokens, config.max_position_embeddings));
  }

  // A cache that holds every sequence whole: nothing is ever preempted.
  const int64_t blocks_per_seq = (total + o.block_size - 1) / o.block_size;
  runner_options.num_threads = o.threads;
  runner_options.max_num_batched_tokens = std::max(o.prefill_chunk, o.batch);
  runner_options.max_logit_rows = o.batch;
  SY_RETURN_IF_ERROR(ApplyCompilationFlags(o.compilation, o.batch,
                                           runner_options.max_num_batched_tokens, &runner_options));
  runner_options.block_size = o.block_size;
  runner_options.num_kv_blocks = static_cast<int32_t>(blocks_per_seq * o.batch);
  SY_ASSIGN_OR_RETURN(std::unique_ptr<engine::LlamaRunner> llama,
                      engine::LlamaRunner::Create(std::move(files), runner_options));
  std::unique_ptr<engine::ModelRunner> runner = std::move(llama);
  // Sequence 0 is admitted first and leads every step it runs in, so while it generates, the
  // first logit row of each step that returns logits is its own.
  const LogitsRecordingRunner* recorder = nullptr;
  if (o.dump_logits > 0) {
    auto recording = std::make_unique<LogitsRecordingRunner>(std::move(runner),
                                                             std::min(o.dump_logits, o.max_tokens));
    recorder = recording.get();
    runner = std::move(recording);
  }

  engine::EngineCoreOptions core_options;
  core_options.budget.max_num_batched_tokens = std::max(o.prefill_chunk, o.batch);
  core_options.budget.max_num_seqs = o.batch;
  core_options.max_model_len = total;
  core_options.enable_prefix_caching = false;
  core_options.eos_token_id = tokenizer->eos_id();
  for (int64_t id : config.eos_token_ids)
    core_options.extra_eos_ids.push_back(static_cast<int32_t>(id));
  // Declared before the core, so that it outlives the loop that pushes to it.
  UpdateQueue updates;
  SY_ASSIGN_OR_RETURN(std::unique_ptr<engine::EngineCore> core,
                      engine::EngineCore::Start(core_options, std::move(runner), tokenizer.get()));

  engine::EngineRequest request;
  request.request_id = "generate";
  request.prompt_tokens = prompt;
  request.n = o.batch;
  request.sampling = params;
  request.stop.max_tokens = o.max_tokens;
  request.stop.ignore_eos = o.ignore_eos;
  const Clock::time_point start = Clock::now();
  SY_RETURN_IF_ERROR(core->Submit(std::move(request), [&updates](engine::RequestUpdate update) {
    updates.Push(std::move(update));
  }));

  const auto batch = static_cast<size_t>(o.batch);
  std::vector<std::vector<int32_t>> outputs(batch);
  std::string text;
  size_t num_started = 0;
  Clock::time_point prefill_end = start;
  Clock::time_point end = start;
  for (bool finished = false; !finished;) {
    UpdateQueue::Entry entry = updates.Pop();
    SY_RETURN_IF_ERROR(entry.update.error);
    for (const engine::SequenceUpdate& seq : entry.update.sequences) {
      std::vector<int32_t>& out = outputs[static_cast<size_t>(seq.index)];
      if (out.empty() && !seq.token_ids.empty() && ++num_started == batch)
        prefill_end = entry.at;
      out.insert(out.end(), seq.token_ids.begin(), seq.token_ids.end());
      if (seq.index != 0)
        continue;
      text.append(seq.text);
      if (!o.json && !seq.text.empty()) {
        std::fwrite(seq.text.data(), 1, seq.text.size(), stdout);
        std::fflush(stdout);
      }
    }
    finished = entry.update.finished;
    end = entry.at;
  }
  core->Stop();
  const double prefill_ms = Ms(prefill_end - start);
  const double decode_ms = Ms(end - prefill_end);
  // Each sequence's first token comes from its prompt's last step; decode steps are the ones
  // after it.
  int64_t decode_tokens = 0;
  for (const std::vector<int32_t>& out : outputs)
    decode_tokens += std::max<int64_t>(static_cast<int64_t>(out.size()) - 1, 0);
  const int64_t prefill_tokens = static_cast<int64_t>(prompt.size()) * o.batch;

  if (o.json) {
    std::string out = "{\"prompt_ids\": ";
    AppendIds(prompt, &out);
    out.append(", \"tokens\": ");
    AppendIds(outputs[0], &out);
    out.append(", \"batch_tokens\": [");
    for (size_t s = 0; s < batch; ++s) {
      out.append(s == 0 ? "" : ", ");
      AppendIds(outputs[s], &out);
    }
    out.append("], \"text\": ");
    base::AppendJsonString(text, false, &out);
    out.append(", \"logits\": [");
    if (recorder != nullptr) {
      const auto vocab = static_cast<size_t>(config.vocab_size);
      const std::vector<float>& rows = recorder->rows();
      // Rows past sequence 0's last token are another sequence's.
      const size_t num_rows = std::min(rows.size() / vocab, outputs[0].size());
      for (size_t row = 0; row < num_rows; ++row) {
        out.append(row == 0 ? "[" : ", [");
        for (size_t i = 0; i < vocab; ++i)
          out.append(fmt::format("{}{:.9g}", i == 0 ? "" : ", ", rows[row * vocab + i]));
        out.push_back(']');
      }
    }
    out.append(
        fmt::format("], \"prefill_ms\": {:.3f}, \"decode_ms\": {:.3f}}}\n", prefill_ms, decode_ms));
    std::fwrite(out.data(), 1, out.size(), stdout);
  } else {
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
  cmd->add_option("--prefill-chunk", o->prefill_chunk,
                  "tokens per step (the scheduler's max_num_batched_tokens): a longer prompt "
                  "is prefilled in chunks of this size")
      ->capture_default_str();
  cmd->add_option("--batch", o->batch,
                  "run B copies of the prompt as B sequences (one request with n = B); only "
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
  AddCompilationFlags(cmd, &o->compilation);
  cmd->add_flag("--ignore-eos", o->ignore_eos, "keep generating past end-of-sequence tokens");
  cmd->add_flag("--json", o->json, "print one JSON object (ids, text, logits) instead of text");
  cmd->add_option("--dump-logits", o->dump_logits, "with --json: logits of the first K steps")
      ->capture_default_str();
  cmd->callback([o, exit_code] { *exit_code = ExitCode(Generate(*o)); });
}

}  // namespace switchyard::cli
