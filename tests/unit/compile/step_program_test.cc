// A recorded step run as a StepProgram against the same step run eagerly
// (LlamaModel::Forward), over the same weights, each on its own KV cache: the logits are
// bit-identical when the step fills its bucket (the same kernels on the same shapes in the
// same order), and within f32 summation noise when the step is padded to a larger bucket
// (other shapes may block the sums differently). The arena plan is checked on its own.
#include "compile/step_program.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "compile/arena_plan.h"
#include "compile/record_llama_step.h"
#include "tiny_model_support.h"

namespace switchyard::compile {
namespace {

constexpr int64_t kBlockSize = 4;
constexpr int64_t kBlocks = 16;
constexpr float kPaddedTolerance = 1e-5f;

// Two KV caches: kEagerKv for eager steps, kProgramKv for the program's.
constexpr size_t kEagerKv = 0;
constexpr size_t kProgramKv = 1;

TinyModel Load(const std::string& name, std::optional<runtime::DType> weight_dtype = std::nullopt) {
  return LoadTinyModel({.name = name,
                        .num_threads = 2,
                        .max_num_batched_tokens = 16,
                        .kv_caches = 2,
                        .kv_blocks = kBlocks,
                        .kv_block_size = kBlockSize,
                        .weight_dtype = weight_dtype});
}

std::unique_ptr<StepProgram> Compile(const TinyModel& l, StepBucket bucket, bool fuse) {
  auto program = CompileTinyStep(l, bucket, kProgramKv, fuse);
  if (program != nullptr && fuse) {
    // Every layer's residual add meets the next norm: the fused kernels are in the graph.
    EXPECT_FALSE(program->graph().kernels.empty());
  }
  return program;
}

// One sequence's tokens in one step; blocks `first_block`, `first_block` + 1, ...
struct Part {
  std::vector<int32_t> tokens;
  int64_t done = 0;  // tokens already in the cache
  int32_t first_block = 0;
};

struct Batch {
  std::vector<int32_t> tokens, positions, slots, rows;
  std::vector<std::vector<int32_t>> tables;
  std::vector<runtime::AttentionSequence> sequences;
};

Batch MakeBatch(const std::vector<Part>& parts) {
  Batch b;
  b.tables.reserve(parts.size());
  for (const Part& p : parts) {
    const int64_t context = p.done + static_cast<int64_t>(p.tokens.size());
    std::vector<int32_t>& table = b.tables.emplace_back();
    for (int64_t i = 0; i * kBlockSize < context; ++i)
      table.push_back(p.first_block + static_cast<int32_t>(i));
    runtime::AttentionSequence s;
    s.q_begin = static_cast<int64_t>(b.tokens.size());
    s.q_len = static_cast<int64_t>(p.tokens.size());
    s.context_len = context;
    s.block_table = table;
    b.sequences.push_back(s);
    for (size_t i = 0; i < p.tokens.size(); ++i) {
      const int64_t pos = p.done + static_cast<int64_t>(i);
      b.rows.push_back(static_cast<int32_t>(b.tokens.size()));
      b.tokens.push_back(p.tokens[i]);
      b.positions.push_back(static_cast<int32_t>(pos));
      b.slots.push_back(static_cast<int32_t>(
          table[static_cast<size_t>(pos / kBlockSize)] * kBlockSize + pos % kBlockSize));
    }
  }
  return b;
}

std::vector<float> RunEager(TinyModel& l, const Batch& b) {
  std::vector<float> logits(b.rows.size() * static_cast<size_t>(l.model->config().vocab_size));
  const model::ForwardBatch batch{b.tokens, b.positions, b.slots, b.sequences, b.rows};
  const absl::Status status = l.model->Forward(batch, *l.kv[kEagerKv], logits);
  EXPECT_TRUE(status.ok()) << status;
  return logits;
}

// Pads the batch to the program's bucket as StepProgram's contract says.
std::vector<float> RunProgram(TinyModel& l, StepProgram& program, StepBucket bucket, Batch b) {
  const size_t wanted = b.rows.size();
  b.tokens.resize(static_cast<size_t>(bucket.tokens), 0);
  b.positions.resize(static_cast<size_t>(bucket.tokens), 0);
  b.slots.resize(static_cast<size_t>(bucket.tokens), -1);
  b.rows.resize(static_cast<size_t>(bucket.logit_rows), b.rows.front());
  runtime::Backend& backend = *l.backend;
  const auto copy_in = [&](std::string_view name, const std::vector<int32_t>& v) {
    auto view = program.View(name, runtime::DType::kI32, {static_cast<int64_t>(v.size())});
    ASSERT_TRUE(view.ok()) << view.status();
    ASSERT_TRUE(backend.CopyToDevice(v.data(), *view).ok());
  };
  copy_in("tokens", b.tokens);
  copy_in("positions", b.positions);
  copy_in("slots", b.slots);
  copy_in("rows", b.rows);
  const absl::Status status = program.Run(b.sequences);
  EXPECT_TRUE(status.ok()) << status;
  const int64_t vocab = l.model->config().vocab_size;
  auto logits = program.View("logits", runtime::DType::kF32, {bucket.logit_rows, vocab});
  EXPECT_TRUE(logits.ok()) << logits.status();
  std::vector<float> out(static_cast<size_t>(bucket.logit_rows * vocab));
  EXPECT_TRUE(backend.CopyToHost(*logits, out.data()).ok());
  out.resize(wanted * static_cast<size_t>(vocab));
  return out;
}

void ExpectBitIdentical(const std::vector<float>& a, const std::vector<float>& b) {
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
}

void ExpectNear(const std::vector<float>& a, const std::vector<float>& b) {
  ASSERT_EQ(a.size(), b.size());
  float worst = 0.0f;
  for (size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::abs(a[i] - b[i]));
  EXPECT_LE(worst, kPaddedTolerance);
}

// A prefill of two sequences in one step, then a decode step of both, then a decode step
// of one padded into a larger bucket; as recorded, and fused (fusion.h: the generated
// kernels compute what the ops they replace did, so the same bits).
void CheckProgramMatchesEager(const std::string& model_name,
                              std::optional<runtime::DType> weight_dtype = std::nullopt) {
  for (const bool fuse : {false, true}) {
    SCOPED_TRACE(model_name + (fuse ? " fused" : ""));
    TinyModel l = Load(model_name, weight_dtype);
    const Batch prefill = MakeBatch({{{5, 9, 2, 7, 1}, 0, 0}, {{3, 8, 4}, 0, 4}});
    auto program = Compile(l, {8, 8}, fuse);
    ExpectBitIdentical(RunEager(l, prefill), RunProgram(l, *program, {8, 8}, prefill));

    const Batch decode = MakeBatch({{{6}, 5, 0}, {{11}, 3, 4}});
    program = Compile(l, {2, 2}, fuse);
    ExpectBitIdentical(RunEager(l, decode), RunProgram(l, *program, {2, 2}, decode));

    const Batch one = MakeBatch({{{12}, 6, 0}});
    program = Compile(l, {4, 4}, fuse);
    ExpectNear(RunEager(l, one), RunProgram(l, *program, {4, 4}, one));
  }
}

TEST(StepProgramTest, MatchesEagerLlama3) {
  CheckProgramMatchesEager("tiny-llama3");
}

TEST(StepProgramTest, MatchesEagerQwen2) {
  CheckProgramMatchesEager("tiny-qwen2");
}

TEST(StepProgramTest, MatchesEagerQwen3) {
  CheckProgramMatchesEager("tiny-qwen3");
}

TEST(StepProgramTest, MatchesEagerMistralSlidingWindow) {
  CheckProgramMatchesEager("tiny-mistral-swa");
}

TEST(StepProgramTest, MatchesEagerGemma3) {
  CheckProgramMatchesEager("tiny-gemma3");
}

// BF16 matrices: where the backend multiplies them on bf16 products, the norms before Q/K/V,
// gate/up and the lm_head, and SwiGLU before down, write their rows in bf16 for those
// MatMuls; only the attention output reaches its MatMul in F32.
TEST(StepProgramTest, MatchesEagerLlama3Bf16) {
  CheckProgramMatchesEager("tiny-llama3", runtime::DType::kBF16);
  TinyModel l = Load("tiny-llama3", runtime::DType::kBF16);
  if (!l.backend->MatMulTakesBf16Activations(runtime::DType::kBF16))
    GTEST_SKIP() << "no bf16 dot products on this CPU";
  auto program = Compile(l, {8, 8}, /*fuse=*/true);
  ASSERT_NE(program, nullptr);
  int64_t matmuls = 0;
  int64_t bf16_reads = 0;
  for (const StepNode& n : program->graph().nodes) {
    matmuls += n.op == StepOp::kMatMul ? 1 : 0;
    bf16_reads += n.op == StepOp::kMatMul && n.inputs[0].dtype == runtime::DType::kBF16 ? 1 : 0;
  }
  EXPECT_EQ(bf16_reads, matmuls - l.model->config().num_hidden_layers);
}

TEST(StepProgramTest, RefusesAModelWithoutTheRecordedWeights) {
  TinyModel llama = Load("tiny-llama3");
  TinyModel qwen = Load("tiny-qwen2");
  auto graph = RecordLlamaStep(qwen.model->weights(), runtime::DType::kF16, kBlockSize, {2, 1});
  ASSERT_TRUE(graph.ok());
  const std::string_view outputs[] = {"logits"};
  // tiny-llama3 has no q/k/v biases: the resolver does not find layers.0.bq.
  auto program = StepProgram::Create(
      *std::move(graph), llama.backend.get(),
      ResolveLlamaExternals(llama.model->weights(), *llama.kv[kProgramKv]), outputs);
  EXPECT_FALSE(program.ok());
}

StepGraph ChainGraph() {
  // a0 -> a1 -> a2 -> a3 through three adds; a0 is an input.
  StepGraph g;
  for (int i = 0; i < 4; ++i) {
    g.values.push_back(
        {i == 0 ? ValueKind::kInput : ValueKind::kActivation, "a" + std::to_string(i), 100});
  }
  for (int32_t i = 0; i < 3; ++i) {
    const TensorRef src{i, 0, runtime::DType::kF32, {25}};
    const TensorRef dst{i + 1, 0, runtime::DType::kF32, {25}};
    g.nodes.push_back({StepOp::kAdd, {src, src}, {dst}});
  }
  return g;
}

TEST(ArenaPlanTest, ValuesShareBytesOnlyWhenNotLiveTogether) {
  const StepGraph g = ChainGraph();
  const std::string_view outputs[] = {"a3"};
  const ArenaPlan plan = PlanArena(g, outputs);
  // a0 (input) lives until node 0, a1 over nodes 0-1, a2 over 1-2, a3 from 2 to the end:
  // a2 may take a0's bytes, a3 a1's; neighbours never share.
  const auto offset = [&plan](int v) { return *plan.offsets[static_cast<size_t>(v)]; };
  EXPECT_NE(offset(0), offset(1));
  EXPECT_NE(offset(1), offset(2));
  EXPECT_NE(offset(2), offset(3));
  EXPECT_EQ(plan.size_bytes, 2 * kArenaAlignment * 2);
  for (int v = 0; v < 4; ++v)
    EXPECT_EQ(offset(v) % kArenaAlignment, 0u);
}

TEST(ArenaPlanTest, OutputsAndInputsKeepTheirBytesForTheWholeStep) {
  const StepGraph g = ChainGraph();
  const std::string_view outputs[] = {"a1", "a3"};
  const ArenaPlan plan = PlanArena(g, outputs);
  // a1 now lives to the end, so a3 cannot reuse it; weights would get no offset at all.
  EXPECT_NE(*plan.offsets[1], *plan.offsets[3]);
  EXPECT_NE(*plan.offsets[2], *plan.offsets[3]);
}

}  // namespace
}  // namespace switchyard::compile
