// CompilationConfig: which steps run compiled, from vLLM's flags: `--compilation-config
// JSON` turns compiled steps on, with `compile_sizes` (the token buckets) or, without it,
// the decode batches up to max_num_seqs (1, 2, 4, 8, ... and max_num_seqs itself);
// `--enforce-eager` runs every step eagerly whatever the config says. Without either flag
// steps run eagerly: compiled steps do not yet beat eager ones on the CPU backend (see
// docs/design-notes.md), and become the default when they do. A step with more tokens than
// the largest bucket (a long prefill) runs eagerly; a smaller one runs in the next larger
// bucket, padded.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace switchyard::compile {

struct CompilationConfig {
  std::vector<int64_t> compile_sizes;  // empty: eager only
};

// `json` is --compilation-config's text ("" when not given): an object whose only key is
// "compile_sizes", an array of token counts in [1, max_num_batched_tokens]. Errors
// (InvalidArgument) name the flag and what is wrong, an unknown key included.
absl::StatusOr<CompilationConfig> ParseCompilationConfig(std::string_view json, bool enforce_eager,
                                                         int64_t max_num_seqs,
                                                         int64_t max_num_batched_tokens);

}  // namespace switchyard::compile
