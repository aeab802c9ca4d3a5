// Element types that runtime tensors hold on a device, and their byte geometry. Pure
// functions over constants; callable from any thread.
//
// The quantized types use GGML's block layouts so GGUF weights upload without repacking:
// rows are split into blocks (32 elements for Q8_0 and the Q4/Q5 types, 256 for the K
// types), stored back to back without padding. Q8_0: an IEEE fp16 scale followed by 32
// int8 values (34 bytes); element j of a block is scale * qs[j]. The others' layouts are
// in runtime/ggml_blocks.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace switchyard::runtime {

enum class DType : uint8_t {
  kF32,
  kF16,   // IEEE 754 binary16.
  kBF16,  // Upper 16 bits of an f32.
  kQ8_0,  // Weights only; see the file comment.
  kI32,   // Token ids, positions, slot ids.
  kQ4_0,  // Weights only, as the rest: GGML's layouts (runtime/ggml_blocks.h).
  kQ4_1,
  kQ5_0,
  kQ5_1,
  kQ4_K,
  kQ5_K,
  kQ6_K,
  kQ2_K,
  kQ3_K,
};

inline constexpr int64_t kQ8_0BlockElems = 32;
inline constexpr int64_t kQ8_0BlockBytes = 34;

// One Q8_0 block exactly as stored; sizeof == kQ8_0BlockBytes.
struct BlockQ8_0 {
  uint16_t scale_f16;
  int8_t qs[kQ8_0BlockElems];
};
static_assert(sizeof(BlockQ8_0) == kQ8_0BlockBytes);

// "F32", "F16", "BF16", "Q8_0", "I32", "Q4_0", ... (GGML's spelling).
std::string_view DTypeName(DType dtype);

// Elements per block: 32 for Q8_0 and Q4/Q5, 256 for the K types, 1 otherwise.
int64_t DTypeBlockElems(DType dtype);
// Bytes per block: 34 for Q8_0, GGML's block size for the other quantized types, the
// element size otherwise.
int64_t DTypeBlockBytes(DType dtype);

// True for the block-quantized types other than Q8_0 (Q4_0 ... Q6_K, Q2_K, Q3_K): those whose
// MatMul may take the generic int8 kernels of runtime/cpu/ (see QuantKernels).
bool IsGgmlQuantDType(DType dtype);

// Bytes that `n` consecutive elements occupy.
// REQUIRES: n >= 0 and n % DTypeBlockElems(dtype) == 0.
size_t RowBytes(DType dtype, int64_t n);

// True for the dtypes a MatMul/Embedding weight may have (all but I32).
bool IsWeightDType(DType dtype);

}  // namespace switchyard::runtime
