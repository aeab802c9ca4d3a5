#include "cli/compilation_flags.h"

namespace switchyard::cli {

void AddCompilationFlags(CLI::App* cmd, bool* enforce_eager, std::string* compilation_config) {
  cmd->add_flag("--enforce-eager", *enforce_eager,
                "run every step op by op, whatever --compilation-config says (eager is the "
                "default today)");
  cmd->add_option("--compilation-config", *compilation_config,
                  "JSON as vLLM's CompilationConfig: run steps compiled, in the token buckets "
                  "'{\"compile_sizes\": [1, 2, 4, 8]}' ('{}': 1, 2, 4, ... up to "
                  "--max-num-seqs)");
}

}  // namespace switchyard::cli
