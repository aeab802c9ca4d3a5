#include "compile/matmul_tuning.h"

#include <algorithm>
#include <chrono>
#include <iterator>
#include <memory>
#include <optional>

#include "fmt/format.h"

#include "base/json.h"
#include "base/json_fields.h"
#include "base/status_macros.h"

namespace switchyard::compile {
namespace {

constexpr int64_t kFormat = 1;
constexpr std::string_view kSource = "matmul choices";

// The MatMul shape of node `node`: weight dtype, activation rows, k, m.
MatMulChoice ShapeOf(const StepNode& node) {
  MatMulChoice c;
  const TensorRef& x = node.inputs[0];
  const TensorRef& w = node.inputs[1];
  c.dtype = w.dtype;
  c.k = x.shape.back();
  c.rows = 1;
  for (size_t i = 0; i + 1 < x.shape.size(); ++i)
    c.rows *= x.shape[i];
  c.m = w.shape.front();
  return c;
}

bool SameShape(const MatMulChoice& a, const MatMulChoice& b) {
  return a.dtype == b.dtype && a.rows == b.rows && a.k == b.k && a.m == b.m;
}

// Median microseconds of `repetitions` runs of node i on each path, alternating.
absl::Status Measure(StepProgram* program, size_t i, int repetitions, MatMulChoice* choice) {
  std::vector<double> times[2];
  const runtime::MatMulPath paths[2] = {runtime::MatMulPath::kStreaming,
                                        runtime::MatMulPath::kPanel};
  for (int r = -1; r < repetitions; ++r) {  // r = -1: warm-up
    for (int p = 0; p < 2; ++p) {
      program->SetPath(i, paths[p]);
      const auto start = std::chrono::steady_clock::now();
      SY_RETURN_IF_ERROR(program->RunNode(i));
      SY_RETURN_IF_ERROR(program->backend()->Synchronize());
      const std::chrono::duration<double, std::micro> took =
          std::chrono::steady_clock::now() - start;
      if (r >= 0)
        times[p].push_back(took.count());
    }
  }
  const auto median = [](std::vector<double>& v) {
    std::nth_element(v.begin(), v.begin() + static_cast<ptrdiff_t>(v.size() / 2), v.end());
    return v[v.size() / 2];
  };
  choice->streaming_us = median(times[0]);
  choice->panel_us = median(times[1]);
  choice->path = choice->panel_us < choice->streaming_us * (1.0 - kPanelMargin)
                     ? runtime::MatMulPath::kPanel
                     : runtime::MatMulPath::kStreaming;
  return absl::OkStatus();
}

std::optional<runtime::DType> DTypeNamed(std::string_view name) {
  for (int d = 0; d <= static_cast<int>(runtime::DType::kQ3_K); ++d) {
    const auto dtype = static_cast<runtime::DType>(d);
    if (runtime::DTypeName(dtype) == name)
      return dtype;
  }
  return std::nullopt;
}

}  // namespace

absl::StatusOr<std::vector<MatMulChoice>> TuneMatMuls(StepProgram* program, int repetitions) {
  std::vector<MatMulChoice> choices;
  const std::vector<StepNode>& nodes = program->graph().nodes;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].op != StepOp::kMatMul)
      continue;
    MatMulChoice shape = ShapeOf(nodes[i]);
    if (!program->backend()->MatMulPathsDiffer(program->input(i, 1), shape.rows))
      continue;
    const bool seen = std::any_of(choices.begin(), choices.end(),
                                  [&shape](const MatMulChoice& c) { return SameShape(c, shape); });
    if (seen)
      continue;
    SY_RETURN_IF_ERROR(Measure(program, i, std::max(1, repetitions), &shape));
    choices.push_back(shape);
  }
  ApplyMatMulChoices(choices, program);
  return choices;
}

void ApplyMatMulChoices(const std::vector<MatMulChoice>& choices, StepProgram* program) {
  const std::vector<StepNode>& nodes = program->graph().nodes;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].op != StepOp::kMatMul)
      continue;
    const MatMulChoice shape = ShapeOf(nodes[i]);
    for (const MatMulChoice& c : choices) {
      if (SameShape(c, shape))
        program->SetPath(i, c.path);
    }
  }
}

std::string EncodeMatMulChoices(const std::vector<MatMulChoice>& choices) {
  std::string out = fmt::format("{{\"format\":{},\"choices\":[", kFormat);
  for (size_t i = 0; i < choices.size(); ++i) {
    const MatMulChoice& c = choices[i];
    fmt::format_to(std::back_inserter(out),
                   "{}{{\"dtype\":\"{}\",\"rows\":{},\"k\":{},\"m\":{},\"path\":\"{}\","
                   "\"streaming_us\":{},\"panel_us\":{}}}",
                   i == 0 ? "" : ",", runtime::DTypeName(c.dtype), c.rows, c.k, c.m,
                   MatMulPathName(c.path), c.streaming_us, c.panel_us);
  }
  out += "]}";
  return out;
}

absl::StatusOr<std::vector<MatMulChoice>> DecodeMatMulChoices(std::string_view bytes) {
  SY_ASSIGN_OR_RETURN(std::unique_ptr<base::JsonDocument> doc,
                      base::JsonDocument::Parse(bytes, kSource));
  const base::JsonPath root(kSource);
  SY_ASSIGN_OR_RETURN(const int64_t format,
                      base::RequiredField<int64_t>(doc->root(), "format", root));
  if (format != kFormat)
    return root.Child("format").Error(
        fmt::format("format {}, this build reads {}", format, kFormat));
  SY_ASSIGN_OR_RETURN(const simdjson::dom::array list,
                      base::RequiredField<simdjson::dom::array>(doc->root(), "choices", root));
  std::vector<MatMulChoice> choices;
  size_t i = 0;
  for (simdjson::dom::element e : list) {
    const base::JsonPath at = root.Child("choices").Index(i++);
    MatMulChoice c;
    SY_ASSIGN_OR_RETURN(const std::string_view dtype,
                        base::RequiredField<std::string_view>(e, "dtype", at));
    const std::optional<runtime::DType> parsed = DTypeNamed(dtype);
    if (!parsed.has_value())
      return at.Child("dtype").Error(fmt::format("unknown dtype {}", std::string(dtype)));
    c.dtype = *parsed;
    SY_ASSIGN_OR_RETURN(c.rows, base::RequiredField<int64_t>(e, "rows", at));
    SY_ASSIGN_OR_RETURN(c.k, base::RequiredField<int64_t>(e, "k", at));
    SY_ASSIGN_OR_RETURN(c.m, base::RequiredField<int64_t>(e, "m", at));
    if (c.rows <= 0 || c.k <= 0 || c.m <= 0)
      return at.Error("rows, k and m must be positive");
    SY_ASSIGN_OR_RETURN(const std::string_view path,
                        base::RequiredField<std::string_view>(e, "path", at));
    if (path == "streaming") {
      c.path = runtime::MatMulPath::kStreaming;
    } else if (path == "panel") {
      c.path = runtime::MatMulPath::kPanel;
    } else {
      return at.Child("path").Error("expected \"streaming\" or \"panel\"");
    }
    SY_ASSIGN_OR_RETURN(c.streaming_us, base::RequiredField<double>(e, "streaming_us", at));
    SY_ASSIGN_OR_RETURN(c.panel_us, base::RequiredField<double>(e, "panel_us", at));
    choices.push_back(c);
  }
  return choices;
}

}  // namespace switchyard::compile
