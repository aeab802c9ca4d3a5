// The dtype names that every command's --dtype (the weights on the device) and
// --kv-cache-dtype (the KV cache) accept: vLLM's spellings, with the short names f32, f16 and
// bf16 as aliases. One parser for both flags, so that `generate` and `engine` take the same
// words; and which runtime dtype a file's dtype stays as on the device. Pure functions; any
// thread.
#pragma once

#include <optional>
#include <string_view>

#include "absl/status/statusor.h"

#include "model/dtype.h"
#include "runtime/dtype.h"

namespace switchyard::model {

// What a dtype flag sets.
enum class DTypeTarget {
  kWeights,  // the matrices: F32, F16 or BF16
  kKvCache,  // the KV cache: F32, F16 or BF16
};

// The dtype `value` names for `target`; nullopt for "auto" (weights as stored, the KV cache's
// DefaultKvDType). Names: auto; float32, float, f32; float16, half, f16; bfloat16, bf16. vLLM's
// fp8 KV cache names (fp8, fp8_e4m3, fp8_e5m2, fp8_inc, fp8_ds_mla) are known but not
// supported. Errors (InvalidArgument) name `flag`, the value and the accepted values.
absl::StatusOr<std::optional<runtime::DType>> ParseDeviceDType(std::string_view flag,
                                                               std::string_view value,
                                                               DTypeTarget target);

// The runtime dtype a file's tensors of `dtype` keep on the device as stored; nullopt for
// the file dtypes the runtime has no kernels for (they are converted on load, or refused).
std::optional<runtime::DType> RuntimeDTypeOf(DType dtype);

}  // namespace switchyard::model
