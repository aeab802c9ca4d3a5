// MatMul tuning: a compiled step's kernel-variant selection, measured when the step is
// compiled. For every distinct MatMul shape of a program (weight dtype, activation rows, k,
// m) where the backend's two shapes (MatMulPath::kStreaming and kPanel) are different
// kernels (Backend::MatMulPathsDiffer), both run on the program's own operands,
// alternately, `repetitions` times each after a warm-up, and the one with the lower median
// runs that shape from then on (streaming unless panels win by more than kPanelMargin: a
// tie is noise). Elsewhere the backend's own pick stands.
//
// The choices are the compiled step's artefact (the compile cache keeps them): encoded as
// JSON, {"format": 1, "choices": [{"dtype": "Q8_0", "rows": 16, "k": 576, "m": 1536,
// "path": "panel", "streaming_us": 812.5, "panel_us": 640.0}, ...]}.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

#include "compile/step_program.h"
#include "runtime/backend.h"
#include "runtime/dtype.h"

namespace switchyard::compile {

inline constexpr double kPanelMargin = 0.03;

struct MatMulChoice {
  runtime::DType dtype = runtime::DType::kF32;
  int64_t rows = 0;
  int64_t k = 0;
  int64_t m = 0;
  runtime::MatMulPath path = runtime::MatMulPath::kStreaming;
  double streaming_us = 0.0;  // medians measured
  double panel_us = 0.0;
  friend bool operator==(const MatMulChoice&, const MatMulChoice&) = default;
};

// Measures and applies (ApplyMatMulChoices) the program's choices; its arena's contents are
// overwritten. Errors: a node's (the backend's).
absl::StatusOr<std::vector<MatMulChoice>> TuneMatMuls(StepProgram* program, int repetitions = 5);

// Sets the path of every MatMul node whose shape a choice names; the others keep theirs.
void ApplyMatMulChoices(const std::vector<MatMulChoice>& choices, StepProgram* program);

std::string EncodeMatMulChoices(const std::vector<MatMulChoice>& choices);
// InvalidArgument for bytes that are not such a document (another format included).
absl::StatusOr<std::vector<MatMulChoice>> DecodeMatMulChoices(std::string_view bytes);

}  // namespace switchyard::compile
