// The compiled step's fusion pass: element-wise chains of a recorded StepGraph become row
// kernels (row_kernels.h), generated for the graph's shapes, where the backend runs them
// (Backend::RunsRowKernels):
//  - Add(a, b) -> s followed at once by RmsNorm(s, w) -> h (the residual stream and the
//    next layer's norm): one kernel reads a and b once and writes s and h;
//  - an RmsNorm (fused or alone) whose output is read only by MatMuls whose weights the
//    backend multiplies on bf16 activations (Backend::MatMulTakesBf16Activations): the
//    kernel writes h in BF16 and those MatMuls read it so, instead of each rounding the
//    same F32 rows again (Q, K and V read one norm's output, gate and up another).
// Each fused node computes what the nodes it replaces did, bit for bit (row_kernels.h).
// Only where operands alias harmlessly (each output disjoint from or the same view as each
// input, a BF16 output disjoint from all of them) and the norm weight is F32.
#pragma once

#include <span>
#include <string_view>

#include "compile/step_graph.h"
#include "runtime/backend.h"

namespace switchyard::compile {

// `graph` with its fusable chains fused (unchanged where the backend runs no row kernels).
// Values named in `outputs` (read after the step) keep their dtype.
StepGraph FuseRowKernels(StepGraph graph, const runtime::Backend& backend,
                         std::span<const std::string_view> outputs);

}  // namespace switchyard::compile
