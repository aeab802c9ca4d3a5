// Fuzz target: arbitrary bytes as a GGUF file image. Parsing must fail cleanly or yield
// views that lie inside the input; the config builder and getters run on what parses.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "model/gguf.h"
#include "model/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = switchyard::model::GgufFile::Parse({data, size}, "fuzz.gguf");
  if (!file.ok()) {
    return 0;
  }
  for (const switchyard::model::TensorView& t : (*file)->tensors()) {
    if (t.data < data || t.byte_size > size || t.data + t.byte_size > data + size) {
      std::abort();
    }
  }
  for (const switchyard::model::GgufMetadataEntry& e : (*file)->metadata()) {
    (void)(*file)->GetFloatArray(e.key);
    (void)(*file)->GetIntArray(e.key);
    (void)(*file)->GetStringArray(e.key);
  }
  (void)switchyard::model::ModelConfigFromGguf(**file);
  return 0;
}
