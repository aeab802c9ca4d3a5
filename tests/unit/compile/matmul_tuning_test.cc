// MatMul tuning: every distinct MatMul shape of a step is measured once on both paths and
// gets the faster one; the step still computes what eager does; the choices survive their
// JSON form, and a document that is not one is refused by name.
#include "compile/matmul_tuning.h"

#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "tiny_model_support.h"

namespace switchyard::compile {
namespace {

using ::testing::HasSubstr;

TEST(MatMulTuningTest, EachShapeOnceAndEveryNodeOnItsChoice) {
  const TinyModel t = LoadTinyModel();
  ASSERT_NE(t.model, nullptr);
  std::unique_ptr<StepProgram> program = CompileTinyStep(t, {8, 8});
  ASSERT_NE(program, nullptr);

  auto choices = TuneMatMuls(program.get(), 3);
  ASSERT_TRUE(choices.ok()) << choices.status();
  // tiny-llama3: q and o (64 x 64), k and v (32 x 64), gate and up (128 x 64), down
  // (64 x 128), the lm_head (1024 x 64): five shapes of 8 rows.
  std::set<std::tuple<int64_t, int64_t>> shapes;
  for (const MatMulChoice& c : *choices) {
    EXPECT_EQ(c.rows, 8);
    EXPECT_GT(c.streaming_us, 0.0);
    EXPECT_GT(c.panel_us, 0.0);
    EXPECT_EQ(c.path == runtime::MatMulPath::kPanel,
              c.panel_us < c.streaming_us * (1.0 - kPanelMargin));
    shapes.emplace(c.m, c.k);
  }
  EXPECT_EQ(choices->size(), 5u);
  EXPECT_EQ(shapes.size(), 5u);
  const std::vector<StepNode>& nodes = program->graph().nodes;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].op != StepOp::kMatMul) {
      EXPECT_EQ(program->path(i), runtime::MatMulPath::kAuto);
      continue;
    }
    const auto& w = nodes[i].inputs[1].shape;
    bool found = false;
    for (const MatMulChoice& c : *choices) {
      if (c.m == w[0] && c.k == w[1]) {
        EXPECT_EQ(program->path(i), c.path) << "node " << i;
        found = true;
      }
    }
    EXPECT_TRUE(found) << "node " << i;
  }
}

TEST(MatMulTuningTest, LeavesShapesAlonePastTheStreamingLimit) {
  // 64 rows: past every CPU kernel table's streaming limit, so both paths are the panel
  // kernel and nothing is measured.
  const TinyModel t = LoadTinyModel({.max_num_batched_tokens = 64});
  ASSERT_NE(t.model, nullptr);
  std::vector<float> w_data(64 * 64);
  const runtime::Tensor w(runtime::DType::kF32, {64, 64}, w_data.data());
  EXPECT_FALSE(t.backend->MatMulPathsDiffer(w, 64));
  EXPECT_TRUE(t.backend->MatMulPathsDiffer(w, 8));
  std::unique_ptr<StepProgram> program = CompileTinyStep(t, {32, 32});
  ASSERT_NE(program, nullptr);
  auto choices = TuneMatMuls(program.get(), 1);
  ASSERT_TRUE(choices.ok()) << choices.status();
  EXPECT_TRUE(choices->empty());
  for (size_t i = 0; i < program->graph().nodes.size(); ++i)
    EXPECT_EQ(program->path(i), runtime::MatMulPath::kAuto) << "node " << i;
}

TEST(MatMulTuningTest, ChoicesSurviveTheirJson) {
  const std::vector<MatMulChoice> choices = {
      {runtime::DType::kQ8_0, 16, 576, 1536, runtime::MatMulPath::kPanel, 812.5, 640.25},
      {runtime::DType::kQ4_K, 1, 256, 49152, runtime::MatMulPath::kStreaming, 0.001, 1e6},
  };
  auto decoded = DecodeMatMulChoices(EncodeMatMulChoices(choices));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, choices);
  auto empty = DecodeMatMulChoices(EncodeMatMulChoices({}));
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

TEST(MatMulTuningTest, RefusesWhatIsNotAChoiceList) {
  const std::string one = R"("dtype":"Q8_0","rows":1,"k":32,"m":2,"streaming_us":1,"panel_us":2)";
  for (const auto& [bytes, says] : std::vector<std::pair<std::string, std::string>>{
           {"", "matmul choices"},
           {"[]", "expected an object"},
           {R"({"format":2,"choices":[]})", "format 2"},
           {R"({"format":1})", "choices: missing required field"},
           {R"({"format":1,"choices":[{)" + one + R"(,"path":"fast"}]})", "choices[0].path"},
           {R"({"format":1,"choices":[{"dtype":"Q9","rows":1,"k":32,"m":2,"path":"panel",)"
            R"("streaming_us":1,"panel_us":2}]})",
            "unknown dtype Q9"},
           {R"({"format":1,"choices":[{"dtype":"F32","rows":0,"k":32,"m":2,"path":"panel",)"
            R"("streaming_us":1,"panel_us":2}]})",
            "must be positive"},
       }) {
    auto decoded = DecodeMatMulChoices(bytes);
    ASSERT_FALSE(decoded.ok()) << bytes;
    EXPECT_EQ(decoded.status().code(), absl::StatusCode::kInvalidArgument) << bytes;
    EXPECT_THAT(decoded.status().message(), HasSubstr(says)) << bytes;
  }
}

}  // namespace
}  // namespace switchyard::compile
