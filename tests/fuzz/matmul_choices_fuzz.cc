// Arbitrary bytes as a compiled step's MatMul choices read back from the compile cache
// (compile/matmul_tuning.h): decoding may fail but must not crash; choices that decode must
// survive an encode and decode unchanged.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "compile/matmul_tuning.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace compile = switchyard::compile;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const auto choices = compile::DecodeMatMulChoices(bytes);
  if (!choices.ok())
    return 0;
  const auto again = compile::DecodeMatMulChoices(compile::EncodeMatMulChoices(*choices));
  if (!again.ok() || *again != *choices)
    std::abort();
  return 0;
}
