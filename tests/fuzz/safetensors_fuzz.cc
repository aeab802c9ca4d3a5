// Fuzz target: arbitrary bytes as a safetensors file image. Parsing must fail cleanly or
// yield views that lie inside the input.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "model/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = switchyard::model::SafetensorsFile::Parse({data, size}, "fuzz.safetensors");
  if (!file.ok()) {
    return 0;
  }
  for (const switchyard::model::TensorView& t : (*file)->tensors()) {
    if (t.data < data || t.byte_size > size || t.data + t.byte_size > data + size) {
      std::abort();
    }
  }
  return 0;
}
