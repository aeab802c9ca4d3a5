// A view of one tensor stored in a model file: name, element type, shape and a pointer to
// its bytes inside a memory map. The view does not own the bytes; it is valid while the
// file object that produced it (SafetensorsFile, GgufFile, ModelFiles) is alive. Views are
// immutable and may be read from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/dtype.h"

namespace switchyard::model {

struct TensorView {
  std::string name;
  DType dtype = DType::kF32;
  // Row-major, outermost dimension first (numpy order). GGUF stores dimensions innermost
  // first; GgufFile reverses them so both formats read the same.
  std::vector<int64_t> shape;
  int64_t num_elements = 0;
  const uint8_t* data = nullptr;
  uint64_t byte_size = 0;
  // Offset of the first byte within its file; useful for reporting and for readers that
  // prefer pread over the mapping.
  uint64_t file_offset = 0;
};

}  // namespace switchyard::model
