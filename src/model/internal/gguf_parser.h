// The byte-level GGUF parser behind GgufFile, and the scalar decoding that GgufFile's
// array getters share with it. Pure functions over a caller-owned buffer; callable from
// any thread. Views in the result point into the buffer.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

#include "model/gguf.h"
#include "model/tensor_view.h"

namespace switchyard::model::internal {

struct GgufContents {
  uint32_t version = 0;
  uint64_t alignment = kDefaultGgufAlignment;
  uint64_t data_offset = 0;
  std::vector<GgufMetadataEntry> metadata;
  std::vector<TensorView> tensors;
};

// Parses and validates a whole GGUF image; errors name `source` and the field.
absl::StatusOr<GgufContents> ParseGgufContents(std::span<const uint8_t> bytes,
                                               std::string_view source);

// Bytes per element of a fixed-size type; 0 for strings and arrays.
uint64_t GgufScalarBytes(GgufType type);
// Decodes one fixed-size element at `p` into the numeric fields of `v`.
// REQUIRES: GgufScalarBytes(type) > 0 and `p` has that many readable bytes.
void DecodeGgufScalar(GgufType type, const uint8_t* p, GgufValue* v);
bool IsUnsignedGgufType(GgufType type);
bool IsSignedGgufType(GgufType type);
bool IsFloatGgufType(GgufType type);

}  // namespace switchyard::model::internal
