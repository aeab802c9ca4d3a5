// The step graph recorded from the model code eager mode runs: its ops in order, its
// operands named by their place in the model, and an identity (Digest) that follows the
// bucket and the model but not where the weights happen to sit in memory.
#include "compile/record_llama_step.h"

#include <memory>
#include <string>
#include <vector>

#include "fmt/format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "compile/graph_recorder.h"
#include "tiny_model_support.h"

namespace switchyard::compile {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr int64_t kBlockSize = 16;

TinyModel Load(const std::string& name) {
  return LoadTinyModel({.name = name, .kv_caches = 0});
}

StepGraph Record(const TinyModel& l, StepBucket bucket) {
  auto graph = RecordLlamaStep(l.model->weights(), runtime::DType::kF16, kBlockSize, bucket);
  EXPECT_TRUE(graph.ok()) << graph.status();
  return graph.ok() ? *std::move(graph) : StepGraph{};
}

std::vector<StepOp> Ops(const StepGraph& g) {
  std::vector<StepOp> ops;
  for (const StepNode& n : g.nodes)
    ops.push_back(n.op);
  return ops;
}

const GraphValue& ValueOf(const StepGraph& g, const TensorRef& ref) {
  return g.values.at(static_cast<size_t>(ref.value));
}

TEST(RecordLlamaStepTest, RecordsEveryOpOfTheStepInOrder) {
  const TinyModel l = Load("tiny-llama3");
  const StepGraph g = Record(l, {4, 2});
  const int64_t layers = l.model->config().num_hidden_layers;
  using enum StepOp;
  std::vector<StepOp> expected = {kEmbedding};
  for (int64_t i = 0; i < layers; ++i) {
    expected.insert(expected.end(),
                    {kRmsNorm, kMatMul, kMatMul, kMatMul, kRope, kRope, kWriteKv, kPagedAttention,
                     kMatMul, kAdd, kRmsNorm, kMatMul, kMatMul, kSwiGlu, kMatMul, kAdd});
  }
  expected.insert(expected.end(), {kEmbedding, kRmsNorm, kMatMul});
  EXPECT_EQ(Ops(g), expected);

  // The first projection: layer 0's normed input times its wq, into q, cut to the bucket.
  const StepNode& wq = g.nodes[2];
  const int64_t d = l.model->config().hidden_size;
  EXPECT_EQ(ValueOf(g, wq.inputs[0]).name, "h");
  EXPECT_EQ(wq.inputs[0].shape, (std::vector<int64_t>{4, d}));
  EXPECT_EQ(ValueOf(g, wq.inputs[1]).name, "layers.0.wq");
  EXPECT_EQ(ValueOf(g, wq.inputs[1]).kind, ValueKind::kWeight);
  EXPECT_FALSE(wq.inputs[2].present());  // no bias
  EXPECT_EQ(ValueOf(g, wq.outputs[0]).name, "q");
  // The KV write goes to layer 0's pools; the head's rows are the bucket's two.
  const StepNode& write = g.nodes[7];
  EXPECT_EQ(ValueOf(g, write.inputs[2]).kind, ValueKind::kInput);
  EXPECT_EQ(ValueOf(g, write.outputs[0]).name, "k_pool.0");
  EXPECT_EQ(ValueOf(g, write.outputs[1]).name, "v_pool.0");
  const StepNode& lm_head = g.nodes.back();
  EXPECT_EQ(ValueOf(g, lm_head.outputs[0]).name, "logits");
  EXPECT_EQ(lm_head.outputs[0].shape[0], 2);
}

TEST(RecordLlamaStepTest, NoLogitRowsMeansNoHead) {
  const TinyModel l = Load("tiny-llama3");
  const StepGraph g = Record(l, {8, 0});
  EXPECT_EQ(g.nodes.back().op, StepOp::kAdd);
}

TEST(RecordLlamaStepTest, FamiliesRecordTheirOwnOps) {
  // Qwen2: biased projections. Qwen3: per-head q/k norms. Gemma 3: sandwich norms, scaled
  // embeddings, GeGLU and a second rotary table for the sliding layers.
  const StepGraph qwen2 = Record(Load("tiny-qwen2"), {2, 1});
  EXPECT_TRUE(qwen2.nodes[2].inputs[2].present());
  EXPECT_THAT(qwen2.Canonical(), HasSubstr("layers.0.bq"));
  EXPECT_THAT(Record(Load("tiny-qwen3"), {2, 1}).Canonical(), HasSubstr("layers.0.q_norm"));
  const StepGraph gemma = Record(Load("tiny-gemma3"), {2, 1});
  EXPECT_EQ(gemma.nodes[1].op, StepOp::kScale);
  EXPECT_EQ(gemma.ropes.size(), 2u);
  const std::string text = gemma.Canonical();
  EXPECT_THAT(text, HasSubstr("gelu_tanh_glu"));
  EXPECT_THAT(text, HasSubstr("layers.0.post_attn_norm"));
}

TEST(RecordLlamaStepTest, MixtureOfExpertsIsNotRecordable) {
  const TinyModel l = Load("tiny-qwen3-moe");
  auto graph = RecordLlamaStep(l.model->weights(), runtime::DType::kF16, kBlockSize, {2, 1});
  EXPECT_EQ(graph.status().code(), absl::StatusCode::kUnimplemented) << graph.status();
}

TEST(RecordLlamaStepTest, RejectsBadBuckets) {
  const TinyModel l = Load("tiny-llama3");
  for (StepBucket bad : {StepBucket{0, 0}, StepBucket{2, 3}, StepBucket{2, -1}}) {
    EXPECT_EQ(
        RecordLlamaStep(l.model->weights(), runtime::DType::kF16, kBlockSize, bad).status().code(),
        absl::StatusCode::kInvalidArgument);
  }
}

TEST(RecordLlamaStepTest, IdentityFollowsTheGraphNotTheAddresses) {
  // The same model loaded twice sits at other addresses: one identity.
  const TinyModel a = Load("tiny-llama3");
  const TinyModel b = Load("tiny-llama3");
  const StepGraph g = Record(a, {4, 4});
  const std::string text = g.Canonical();
  EXPECT_EQ(text, Record(b, {4, 4}).Canonical());
  EXPECT_EQ(g.Digest(), Record(b, {4, 4}).Digest());
  EXPECT_EQ(g.Digest().size(), 64u);
  for (const TinyModel* l : {&a, &b}) {
    const auto address = reinterpret_cast<uintptr_t>(l->model->weights().embed.data());
    EXPECT_THAT(text, Not(HasSubstr(fmt::format("{:x}", address))));
  }
  // Another bucket, another KV dtype or block size, another model: another identity.
  EXPECT_NE(g.Digest(), Record(a, {8, 4}).Digest());
  EXPECT_NE(g.Digest(), Record(a, {4, 1}).Digest());
  auto f32_kv = RecordLlamaStep(a.model->weights(), runtime::DType::kF32, kBlockSize, {4, 4});
  ASSERT_TRUE(f32_kv.ok());
  EXPECT_NE(g.Digest(), f32_kv->Digest());
  auto blocks32 = RecordLlamaStep(a.model->weights(), runtime::DType::kF16, 32, {4, 4});
  ASSERT_TRUE(blocks32.ok());
  EXPECT_NE(g.Digest(), blocks32->Digest());
  EXPECT_NE(g.Digest(), Record(Load("tiny-qwen2"), {4, 4}).Digest());
}

TEST(GraphRecorderTest, OperandsOutsideKnownMemoryAreRefused) {
  auto recorder = GraphRecorder::Create();
  ASSERT_TRUE(recorder.ok());
  auto buffer = (*recorder)->Allocate(64 * sizeof(float));
  ASSERT_TRUE(buffer.ok());
  const runtime::Tensor x = buffer->View(runtime::DType::kF32, {4, 16});
  std::vector<float> outside(64);
  const runtime::Tensor stranger(runtime::DType::kF32, {4, 16}, outside.data());
  EXPECT_EQ((*recorder)->Add(x, stranger, x).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE((*recorder)->Add(x, x, x).ok());
  EXPECT_EQ((*recorder)->graph().nodes.size(), 1u);
  // A view that runs past its buffer's end is outside too.
  const runtime::Tensor past(runtime::DType::kF32, {8, 16}, buffer->data());
  EXPECT_EQ((*recorder)->Add(past, past, past).code(), absl::StatusCode::kInvalidArgument);
  // Binding memory that overlaps a known range in part is refused; the same range again
  // keeps its first name.
  EXPECT_TRUE((*recorder)->Bind(ValueKind::kWeight, "w", stranger).ok());
  EXPECT_TRUE((*recorder)->Bind(ValueKind::kWeight, "tied", stranger).ok());
  EXPECT_EQ((*recorder)->graph().Find("tied"), -1);
  const runtime::Tensor half(runtime::DType::kF32, {4, 16}, outside.data() + 32);
  EXPECT_EQ((*recorder)->Bind(ValueKind::kWeight, "half", half).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*recorder)->CopyToHost(x, outside.data()).code(), absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace switchyard::compile
