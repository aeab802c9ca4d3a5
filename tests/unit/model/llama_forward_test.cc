// The forward step against itself: a sequence's logits must not depend on how the step
// schedule cuts it (prefill chunks of varied sizes, decode steps), which other sequences
// share its batches, or where its KV blocks live (shuffled block tables). Each sequence is
// first run alone in one chunk; then all of them run under random schedules.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

#include "base/file.h"
#include "model/llama_model.h"
#include "model/model_files.h"
#include "runtime/cpu/cpu_backend.h"

namespace switchyard::model {
namespace {

// Different summation orders (row blocking in matmul, chunked attention) move f32 logits
// by ~1e-7 on these models; 1e-5 is far below any real mistake.
constexpr float kTolerance = 1e-5f;
constexpr int64_t kMaxTokens = 64;
// F16 weights against F32 ones (F16WeightsTrackTheF32Ones).
constexpr float kF16Tolerance = 2e-3f;

struct Fixture {
  std::unique_ptr<ModelFiles> files;
  std::unique_ptr<runtime::Backend> backend;
  std::unique_ptr<LlamaModel> model;
};

// `name` is under models/, or an absolute path.
Fixture Load(const std::string& name, std::optional<runtime::DType> weight_dtype = std::nullopt) {
  Fixture f;
  auto files = ModelFiles::Open(
      name.starts_with("/") ? name : std::string(SY_SOURCE_DIR) + "/models/" + name);
  EXPECT_TRUE(files.ok()) << files.status();
  f.files = std::move(*files);
  runtime::CpuBackendOptions options;
  options.num_threads = 2;
  auto backend = runtime::CreateCpuBackend(options);
  EXPECT_TRUE(backend.ok()) << backend.status();
  f.backend = std::move(*backend);
  LlamaModelOptions model_options;
  model_options.max_num_batched_tokens = kMaxTokens;
  model_options.max_logit_rows = kMaxTokens;
  model_options.weight_dtype = weight_dtype;
  auto model = LlamaModel::Create(*f.files, f.backend.get(), model_options);
  EXPECT_TRUE(model.ok()) << model.status();
  f.model = std::move(*model);
  return f;
}

struct Sequence {
  std::vector<int32_t> tokens;
  std::vector<int32_t> blocks;  // block table
  int64_t done = 0;             // tokens already in the KV cache
  std::vector<float> expected;  // [tokens, vocab] from the one-chunk run
};

// Builds and runs one step where sequence i contributes tokens [done, done + len[i]).
absl::Status RunStep(LlamaModel& model, const KvCacheStorage& kv, std::vector<Sequence*> seqs,
                     const std::vector<int64_t>& lens, std::vector<float>* logits) {
  const int64_t block_size = kv.shape().block_size;
  std::vector<int32_t> tokens, positions, slots, rows;
  std::vector<runtime::AttentionSequence> attention;
  for (size_t s = 0; s < seqs.size(); ++s) {
    Sequence& q = *seqs[s];
    runtime::AttentionSequence a;
    a.q_begin = static_cast<int64_t>(tokens.size());
    a.q_len = lens[s];
    a.context_len = q.done + lens[s];
    a.block_table = q.blocks;
    attention.push_back(a);
    for (int64_t p = q.done; p < q.done + lens[s]; ++p) {
      rows.push_back(static_cast<int32_t>(tokens.size()));
      tokens.push_back(q.tokens[static_cast<size_t>(p)]);
      positions.push_back(static_cast<int32_t>(p));
      slots.push_back(static_cast<int32_t>(
          q.blocks[static_cast<size_t>(p / block_size)] * block_size + p % block_size));
    }
  }
  const auto vocab = static_cast<size_t>(model.config().vocab_size);
  logits->assign(rows.size() * vocab, 0.0f);
  ForwardBatch batch{tokens, positions, slots, attention, rows};
  return model.Forward(batch, kv, *logits);
}

std::vector<Sequence> MakeSequences(std::mt19937& rng, int64_t vocab, int64_t block_size,
                                    int64_t num_blocks) {
  const std::vector<int64_t> lengths = {37, 1, 50, 23};
  std::vector<int32_t> block_ids(static_cast<size_t>(num_blocks));
  std::iota(block_ids.begin(), block_ids.end(), 0);
  std::shuffle(block_ids.begin(), block_ids.end(), rng);
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(vocab - 1));
  std::vector<Sequence> seqs(lengths.size());
  size_t next_block = 0;
  for (size_t i = 0; i < lengths.size(); ++i) {
    for (int64_t t = 0; t < lengths[i]; ++t)
      seqs[i].tokens.push_back(token(rng));
    const int64_t need = (lengths[i] + block_size - 1) / block_size;
    for (int64_t b = 0; b < need; ++b)
      seqs[i].blocks.push_back(block_ids[next_block++]);
  }
  return seqs;
}

void CheckSchedulesAgree(const std::string& name, int64_t block_size) {
  SCOPED_TRACE(name + " block_size " + std::to_string(block_size));
  Fixture f = Load(name);
  ASSERT_NE(f.model, nullptr);
  const int64_t vocab = f.model->config().vocab_size;
  const int64_t num_blocks = 200 / block_size + 8;
  auto kv = KvCacheStorage::Create(f.backend.get(), f.model->KvShape(num_blocks, block_size));
  ASSERT_TRUE(kv.ok()) << kv.status();
  std::mt19937 rng(static_cast<uint32_t>(block_size) * 7919u + static_cast<uint32_t>(name.size()));
  std::vector<Sequence> seqs = MakeSequences(rng, vocab, block_size, num_blocks);

  std::vector<float> logits;
  for (Sequence& s : seqs) {
    ASSERT_TRUE(
        RunStep(*f.model, **kv, {&s}, {static_cast<int64_t>(s.tokens.size())}, &logits).ok());
    s.expected = logits;
  }

  // Random schedules: each step takes a random subset of unfinished sequences in random
  // order, each with a chunk of 1-13 tokens, within the token budget.
  for (int round = 0; round < 3; ++round) {
    for (Sequence& s : seqs)
      s.done = 0;
    std::uniform_int_distribution<int64_t> chunk(1, 13);
    for (int guard = 0; guard < 500; ++guard) {
      std::vector<Sequence*> step;
      std::vector<int64_t> lens;
      int64_t budget = kMaxTokens;
      std::vector<size_t> order(seqs.size());
      std::iota(order.begin(), order.end(), 0);
      std::shuffle(order.begin(), order.end(), rng);
      for (size_t i : order) {
        Sequence& s = seqs[i];
        const int64_t left = static_cast<int64_t>(s.tokens.size()) - s.done;
        if (left == 0 || budget == 0 || rng() % 4 == 0)
          continue;
        const int64_t len = std::min({chunk(rng), left, budget});
        step.push_back(&s);
        lens.push_back(len);
        budget -= len;
      }
      if (step.empty()) {
        if (std::all_of(seqs.begin(), seqs.end(),
                        [](const Sequence& s) { return s.done == int64_t(s.tokens.size()); }))
          break;
        continue;
      }
      absl::Status status = RunStep(*f.model, **kv, step, lens, &logits);
      ASSERT_TRUE(status.ok()) << status;
      size_t row = 0;
      for (size_t i = 0; i < step.size(); ++i) {
        Sequence& s = *step[i];
        for (int64_t p = s.done; p < s.done + lens[i]; ++p, ++row) {
          float worst = 0;
          for (int64_t v = 0; v < vocab; ++v) {
            worst = std::max(
                worst, std::abs(logits[row * static_cast<size_t>(vocab) + static_cast<size_t>(v)] -
                                s.expected[static_cast<size_t>(p * vocab + v)]));
          }
          ASSERT_LE(worst, kTolerance) << "position " << p;
        }
        s.done += lens[i];
      }
    }
    for (const Sequence& s : seqs)
      ASSERT_EQ(s.done, static_cast<int64_t>(s.tokens.size())) << "schedule did not finish";
  }
}

TEST(LlamaForwardTest, ChunkedMixedBatchesMatchOneChunkLlama3) {
  CheckSchedulesAgree("tiny-llama3", 16);
  CheckSchedulesAgree("tiny-llama3", 5);
}

TEST(LlamaForwardTest, ChunkedMixedBatchesMatchOneChunkQwen2) {
  CheckSchedulesAgree("tiny-qwen2", 16);
}

TEST(LlamaForwardTest, ChunkedMixedBatchesMatchOneChunkMistral) {
  CheckSchedulesAgree("tiny-mistral", 4);
}

TEST(LlamaForwardTest, ChunkedMixedBatchesMatchOneChunkMistralSlidingWindow) {
  // Window 24: the 37- and 50-token sequences run past it, in chunks across its edge.
  CheckSchedulesAgree("tiny-mistral-swa", 4);
  CheckSchedulesAgree("tiny-mistral-swa", 16);
}

TEST(LlamaForwardTest, ChunkedMixedBatchesMatchOneChunkQwen3) {
  CheckSchedulesAgree("tiny-qwen3", 16);
}

TEST(LlamaForwardTest, ChunkedMixedBatchesMatchOneChunkGemma3) {
  // Five sliding layers (window 24) and a global one, which keeps reading the whole prefix.
  CheckSchedulesAgree("tiny-gemma3", 4);
  CheckSchedulesAgree("tiny-gemma3", 16);
}

TEST(LlamaForwardTest, ChunkedMixedBatchesMatchOneChunkQwen3Moe) {
  // Which tokens share an expert's GEMM changes with every schedule; a token's result must not.
  CheckSchedulesAgree("tiny-qwen3-moe", 5);
  CheckSchedulesAgree("tiny-qwen3-moe", 16);
}

// tiny-mistral-swa is tiny-mistral (same weights) with a sliding window of 24, in both its
// config.json and its GGUF: logits agree while a token's whole prefix fits in the window
// and differ once it does not.
TEST(LlamaForwardTest, SlidingWindowChangesOnlyPositionsPastIt) {
  Fixture full = Load("tiny-mistral");
  Fixture swa = Load("tiny-mistral-swa");
  Fixture swa_gguf = Load("tiny-mistral-swa/model.gguf");
  ASSERT_NE(full.model, nullptr);
  ASSERT_NE(swa.model, nullptr);
  ASSERT_NE(swa_gguf.model, nullptr);
  EXPECT_FALSE(full.model->config().sliding_window.has_value());
  EXPECT_EQ(swa.model->config().sliding_window, 24);
  EXPECT_EQ(swa_gguf.model->config().sliding_window, 24);
  const int64_t vocab = full.model->config().vocab_size;
  std::mt19937 rng(5);
  // The four sequences need 3 + 1 + 4 + 2 blocks of 16; the third (50 tokens) is the one run.
  Sequence s = MakeSequences(rng, vocab, 16, 10)[2];
  std::vector<std::vector<float>> logits;
  for (Fixture* f : {&full, &swa, &swa_gguf}) {
    auto kv = KvCacheStorage::Create(f->backend.get(), f->model->KvShape(10, 16));
    ASSERT_TRUE(kv.ok());
    logits.emplace_back();
    ASSERT_TRUE(RunStep(*f->model, **kv, {&s}, {50}, &logits.back()).ok());
  }
  for (int64_t p = 0; p < 50; ++p) {
    float vs_full = 0, vs_gguf = 0;
    for (int64_t v = 0; v < vocab; ++v) {
      const auto i = static_cast<size_t>(p * vocab + v);
      vs_full = std::max(vs_full, std::abs(logits[1][i] - logits[0][i]));
      vs_gguf = std::max(vs_gguf, std::abs(logits[1][i] - logits[2][i]));
    }
    EXPECT_LE(vs_gguf, kTolerance) << "position " << p;
    if (p < 24) {
      EXPECT_LE(vs_full, kTolerance) << "position " << p;
    } else {
      EXPECT_GT(vs_full, 1e-4f) << "position " << p;
    }
  }
}

// Gemma 3 ships without final_logit_softcapping (tiny-gemma3 too); a copy of tiny-gemma3
// whose config sets it must give cap * tanh(logits / cap) of the uncapped logits.
TEST(LlamaForwardTest, FinalLogitSoftCapping) {
  const std::string source = std::string(SY_SOURCE_DIR) + "/models/tiny-gemma3";
  const std::string dir = ::testing::TempDir() + "/tiny-gemma3-capped";
  std::filesystem::create_directories(dir);
  auto config = base::ReadFile(source + "/config.json");
  ASSERT_TRUE(config.ok());
  const std::string uncapped = "\"final_logit_softcapping\": null";
  const size_t at = config->find(uncapped);
  ASSERT_NE(at, std::string::npos);
  config->replace(at, uncapped.size(), "\"final_logit_softcapping\": 0.5");
  ASSERT_TRUE(base::WriteFile(dir + "/config.json", *config).ok());
  std::filesystem::remove(dir + "/model.safetensors");
  std::filesystem::create_symlink(source + "/model.safetensors", dir + "/model.safetensors");

  Fixture plain = Load("tiny-gemma3");
  Fixture capped = Load(dir);
  ASSERT_NE(plain.model, nullptr);
  ASSERT_NE(capped.model, nullptr);
  EXPECT_EQ(capped.model->config().final_logit_softcapping, 0.5);
  std::vector<float> a, b;
  for (Fixture* f : {&plain, &capped}) {
    auto kv = KvCacheStorage::Create(f->backend.get(), f->model->KvShape(4, 16));
    ASSERT_TRUE(kv.ok());
    Sequence s;
    s.tokens = {2, 5, 300, 999, 42, 17, 64, 128, 7};
    s.blocks = {3, 1};
    ASSERT_TRUE(RunStep(*f->model, **kv, {&s}, {9}, f == &plain ? &a : &b).ok());
  }
  ASSERT_EQ(a.size(), b.size());
  float largest = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_NEAR(b[i], 0.5 * std::tanh(a[i] / 0.5), 1e-6) << i;
    largest = std::max(largest, std::abs(a[i]));
  }
  EXPECT_GT(largest, 0.25f);  // the cap bends these logits, not just their last digits
}

TEST(LlamaForwardTest, GgufMatchesSafetensors) {
  Fixture st = Load("tiny-llama3");
  Fixture gg = Load("tiny-llama3/model.gguf");
  ASSERT_NE(st.model, nullptr);
  ASSERT_NE(gg.model, nullptr);
  EXPECT_EQ(gg.model->weights().rope.style, runtime::RopeStyle::kInterleaved);
  EXPECT_FALSE(gg.model->weights().rope.freq_factors.empty());
  std::vector<float> a, b;
  for (Fixture* f : {&st, &gg}) {
    auto kv = KvCacheStorage::Create(f->backend.get(), f->model->KvShape(4, 16));
    ASSERT_TRUE(kv.ok());
    Sequence s;
    s.tokens = {1000, 5, 300, 999, 42, 17, 64, 128, 7};
    s.blocks = {3, 1};
    ASSERT_TRUE(RunStep(*f->model, **kv, {&s}, {9}, f == &st ? &a : &b).ok());
  }
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_NEAR(a[i], b[i], kTolerance) << i;
}

// The KV dtype follows the layers' weights (DefaultKvDType), and KvCacheBytes, with which
// the engine sizes its pool and `model inspect` its estimate, is what Create allocates.
TEST(LlamaForwardTest, KvCacheShapeAndBytes) {
  for (const auto& [model, dtype] :
       {std::pair<const char*, runtime::DType>{"tiny-llama3", runtime::DType::kF32},
        {"tiny-llama3/model-q8_0.gguf", runtime::DType::kF16}}) {
    Fixture f = Load(model);
    ASSERT_NE(f.model, nullptr) << model;
    const KvCacheShape shape = f.model->KvShape(3, 16);
    EXPECT_EQ(shape.dtype, dtype) << model;
    const ModelConfig& c = f.model->config();
    const size_t expected = 2 * static_cast<size_t>(c.num_hidden_layers) * 3 * 16 *
                            static_cast<size_t>(c.num_key_value_heads * c.head_dim) *
                            (dtype == runtime::DType::kF32 ? 4 : 2);
    EXPECT_EQ(KvCacheBytes(shape), expected) << model;
    auto kv = KvCacheStorage::Create(f.backend.get(), shape);
    ASSERT_TRUE(kv.ok());
    EXPECT_EQ((*kv)->size_bytes(), expected) << model;
  }
}

TEST(LlamaForwardTest, RejectsBadBatches) {
  Fixture f = Load("tiny-qwen2");
  ASSERT_NE(f.model, nullptr);
  auto kv = KvCacheStorage::Create(f.backend.get(), f.model->KvShape(2, 16));
  ASSERT_TRUE(kv.ok());
  const std::vector<int32_t> blocks = {0, 1};
  std::vector<float> logits(1024);
  const std::vector<int32_t> tokens = {1, 2}, positions = {0, 1}, slots = {0, 1};
  const runtime::AttentionSequence seq{0, 2, 2, blocks};
  const std::vector<int32_t> bad_row = {2};
  ForwardBatch batch{tokens, positions, slots, {&seq, 1}, bad_row};
  EXPECT_EQ(f.model->Forward(batch, **kv, logits).code(), absl::StatusCode::kOutOfRange);

  const std::vector<int32_t> row = {1};
  const std::vector<int32_t> short_positions = {0};
  batch = ForwardBatch{tokens, short_positions, slots, {&seq, 1}, row};
  EXPECT_EQ(f.model->Forward(batch, **kv, logits).code(), absl::StatusCode::kInvalidArgument);

  const std::vector<int32_t> bad_tokens = {1, 5000};
  batch = ForwardBatch{bad_tokens, positions, slots, {&seq, 1}, row};
  EXPECT_FALSE(f.model->Forward(batch, **kv, logits).ok());

  std::vector<int32_t> many(kMaxTokens + 1, 1);
  batch = ForwardBatch{many, many, many, {&seq, 1}, row};
  EXPECT_EQ(f.model->Forward(batch, **kv, logits).code(), absl::StatusCode::kInvalidArgument);

  auto other = KvCacheStorage::Create(f.backend.get(), KvCacheShape{1, 2, 16, 3, 16});
  ASSERT_TRUE(other.ok());
  batch = ForwardBatch{tokens, positions, slots, {&seq, 1}, row};
  EXPECT_EQ(f.model->Forward(batch, **other, logits).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(f.model->Forward(batch, **kv, logits).ok());
}

TEST(LlamaForwardTest, WeightDTypePolicies) {
  Fixture bf16 = Load("tiny-mistral", runtime::DType::kBF16);
  ASSERT_NE(bf16.model, nullptr);
  EXPECT_EQ(bf16.model->weights().layers[0].wq.dtype(), runtime::DType::kBF16);
  EXPECT_EQ(bf16.model->weights().layers[0].attn_norm.dtype(), runtime::DType::kF32);
  Fixture q8 = Load("tiny-mistral/model-q8_0.gguf");
  ASSERT_NE(q8.model, nullptr);
  EXPECT_EQ(q8.model->weights().layers[0].wq.dtype(), runtime::DType::kQ8_0);
  Fixture q8_f32 = Load("tiny-mistral/model-q8_0.gguf", runtime::DType::kF32);
  ASSERT_NE(q8_f32.model, nullptr);
  EXPECT_EQ(q8_f32.model->weights().lm_head.dtype(), runtime::DType::kF32);
  Fixture q8_f16 = Load("tiny-mistral/model-q8_0.gguf", runtime::DType::kF16);
  ASSERT_NE(q8_f16.model, nullptr);
  EXPECT_EQ(q8_f16.model->weights().layers[0].w_down.dtype(), runtime::DType::kF16);
  EXPECT_EQ(q8_f16.model->weights().layers[0].ffn_norm.dtype(), runtime::DType::kF32);
}

TEST(LlamaForwardTest, F16WeightsTrackTheF32Ones) {
  // Rounding the matrices to f16 moves tiny-llama3's logits by ~3e-4; a wrong
  // conversion (bf16 bits, or the norm offset applied to a matrix) by far more.
  Fixture f32 = Load("tiny-llama3");
  Fixture f16 = Load("tiny-llama3", runtime::DType::kF16);
  ASSERT_NE(f32.model, nullptr);
  ASSERT_NE(f16.model, nullptr);
  EXPECT_EQ(f16.model->weights().embed.dtype(), runtime::DType::kF16);
  std::vector<float> expected, logits;
  for (Fixture* f : {&f32, &f16}) {
    auto kv = KvCacheStorage::Create(f->backend.get(), f->model->KvShape(4, 16));
    ASSERT_TRUE(kv.ok()) << kv.status();
    Sequence seq;
    for (int32_t t = 0; t < 40; ++t)
      seq.tokens.push_back((t * 37 + 11) % static_cast<int32_t>(f->model->config().vocab_size));
    seq.blocks = {0, 1, 2};
    ASSERT_TRUE(RunStep(*f->model, **kv, {&seq}, {40}, f == &f32 ? &expected : &logits).ok());
  }
  ASSERT_EQ(logits.size(), expected.size());
  float worst = 0;
  for (size_t i = 0; i < logits.size(); ++i)
    worst = std::max(worst, std::abs(logits[i] - expected[i]));
  EXPECT_GT(worst, 0.0f);
  EXPECT_LE(worst, kF16Tolerance);
}

TEST(LlamaForwardTest, RejectsAnEmptyBudget) {
  auto files = ModelFiles::Open(std::string(SY_SOURCE_DIR) + "/models/tiny-qwen2/model.gguf");
  ASSERT_TRUE(files.ok());
  auto backend = runtime::CreateCpuBackend();
  ASSERT_TRUE(backend.ok());
  LlamaModelOptions options;
  options.max_num_batched_tokens = 0;
  auto model = LlamaModel::Create(**files, backend->get(), options);
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace switchyard::model
