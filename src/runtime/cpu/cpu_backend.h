// The CPU backend: Backend on host memory, running every kernel to completion on one
// fixed thread pool sized to the cores. Kernels come in a portable (auto-vectorized) form
// and AVX2 / AVX-512 forms compiled with per-function target attributes and chosen at run
// time from the CPU's features, so the build itself stays portable.
//
// Threads: as for Backend (one driving thread). The backend owns its pool.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string_view>

#include "absl/status/statusor.h"

#include "runtime/backend.h"

namespace switchyard::runtime {

// Instruction-set level of the kernels; each includes the previous ones' requirements.
enum class CpuIsa : uint8_t {
  kPortable,  // Plain C++.
  kAvx2,      // AVX2 + FMA + F16C.
  kAvx512,    // kAvx2 + AVX-512 F/BW/VL.
};

std::string_view CpuIsaName(CpuIsa isa);  // "portable", "avx2", "avx512".
std::optional<CpuIsa> ParseCpuIsa(std::string_view name);

// Whether this CPU can run kernels of level `isa`.
bool CpuSupportsIsa(CpuIsa isa);
// The highest level this CPU supports.
CpuIsa BestCpuIsa();

struct CpuBackendOptions {
  // Compute threads, the caller's thread included. 0 means one per hardware thread.
  size_t num_threads = 0;
  // Kernel level. Unset means the environment variable SY_CPU_ISA
  // (portable|avx2|avx512) if set, else BestCpuIsa().
  std::optional<CpuIsa> isa = std::nullopt;
  // MatMul by block-quantized weights (Q8_0 and GGML's Q4/Q5/K types) on int8 dot
  // products, as llama.cpp does: activation rows are quantized to blocks of 32 (scale
  // max|x|/127, f32), which adds up to half a quantization step per activation to the
  // result's error. Used where the kernels have such a path (avx512 with AVX-512 VNNI:
  // every MatMul; avx2: up to 48 activation rows, decode); false keeps f32 activations
  // against dequantized weights (exact up to f32 summation order).
  bool quantize_q8_0_activations = true;
  // BF16 MatMul on bf16 dot products, as llama.cpp does: activation rows are rounded to
  // bf16 (nearest even), which moves each product by up to 2^-9 of itself (plus f32
  // summation). Used where the kernels have such a path (avx512 with AVX512_BF16); false
  // keeps f32 activations against widened weights (exact up to f32 summation order).
  bool round_bf16_activations = true;
  // PackMatMulWeights lays BF16 and Q8_0 weights out as their GEMM's panels once (where
  // the bf16 / int8 panel kernels run), in memory of its own: as much again as those
  // weights, for no repacking per call. false keeps no copies. Q8_0's panels are 6% larger
  // than its blocks, yet even one decode stream runs faster on them than on the row-wise
  // kernel (bench-135m Q8_0: 1.9x; SmolLM2 Q4_1's Q8_0 lm_head: 1.2x the whole step).
  bool pack_matmul_weights = true;
};

// Errors: InvalidArgument if SY_CPU_ISA holds an unknown name; FailedPrecondition if the
// requested ISA is not supported by this CPU.
absl::StatusOr<std::unique_ptr<Backend>> CreateCpuBackend(const CpuBackendOptions& options = {});

}  // namespace switchyard::runtime
