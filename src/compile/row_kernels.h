// Row kernels: the fused element-wise work of a compiled step (fusion.h finds it), as C++
// generated for the step's shapes and built into a loadable object (kernel_library.h).
//
// Two kinds:
// - kRmsNorm, an RMSNorm that may take a residual add before it:
//     residual: s = a + b (written out), then h = RmsNorm(s, w); else h = RmsNorm(x, w).
//   Operands, in order: residual: a, b, w, s, h; else x, w, h (w F32, of one row).
//   The CPU backend's Add and RmsNorm step for step (squares summed in eight double lanes,
//   the mean rounded to f32, 1 / sqrt in f32).
// - kSwiGlu: out = silu(gate) * up, silu(g) = g / (1 + exp(-g)). Operands: gate, up, out.
//   exp is the CPU backend's vector one (Cephes' expf: the same polynomial, fused
//   multiply-adds and rounding), on every ISA level that has bf16 MatMuls.
// Rows of `cols` elements, F32 in; out (h) is F32, or BF16 rounded to nearest even as the
// backend's bf16 MatMul rounds. So a fused step gives the same bits as the ops it replaces;
// the generated code is built without floating-point contraction so that the compiler
// keeps it so.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "runtime/dtype.h"

namespace switchyard::compile {

enum class RowKernelKind : uint8_t { kRmsNorm, kSwiGlu };

struct RowKernelSpec {
  RowKernelKind kind = RowKernelKind::kRmsNorm;
  bool residual = false;  // kRmsNorm
  int64_t cols = 0;
  float eps = 0.0f;                                 // kRmsNorm
  runtime::DType out_dtype = runtime::DType::kF32;  // F32 or BF16

  friend bool operator==(const RowKernelSpec&, const RowKernelSpec&) = default;
};

// Operands of a kernel of `spec`: inputs, then outputs.
int RowKernelInputs(const RowKernelSpec& spec);
int RowKernelOutputs(const RowKernelSpec& spec);
// Scalar operations per row, roughly, for splitting rows over threads.
int64_t RowKernelWork(const RowKernelSpec& spec);

// A deterministic one-line text form (part of a step graph's canonical text).
std::string RowKernelCanonical(const RowKernelSpec& spec);

// The symbol of kernel i in a generated source: "sy_row_kernel_<i>".
std::string RowKernelSymbol(size_t i);

// C++ source defining RowKernelSymbol(i) for each spec i, with the signature of
// runtime::Backend::RowKernel, extern "C". Self-contained (standard headers only).
std::string GenerateRowKernelSource(std::span<const RowKernelSpec> specs);

}  // namespace switchyard::compile
