// vLLM's compilation flags, --enforce-eager and --compilation-config, shared by `switchyard
// engine`, `switchyard generate` and (through RunnerFlags) `switchyard up`. Parsed by
// compile::ParseCompilationConfig. Main thread only.
#pragma once

#include <string>

#include "CLI/CLI.hpp"

namespace switchyard::cli {

void AddCompilationFlags(CLI::App* cmd, bool* enforce_eager, std::string* compilation_config);

}  // namespace switchyard::cli
