// How a subcommand's result becomes the process's exit code (commands.h): 0 when it
// succeeded; otherwise its message goes to stderr as "error: MESSAGE" and the code is 2 for a
// usage error, 1 for any other failure.
//
// A usage error is an InvalidArgument the command returns: a flag value, or a configuration
// its flags point at, that it refuses. A command whose job is to read an input (a model file,
// a template, a tokenizer) passes that input's errors through InputError: they stay
// failures (1) even when InvalidArgument, since the command line was fine and the file was not.
// Main thread only (it writes stderr).
#pragma once

#include "absl/status/status.h"

namespace switchyard::cli {

// `status` marked as a failure of the command's input, not of its command line.
absl::Status InputError(absl::Status status);

// 0 for OK; else prints the message on stderr and returns 2 (usage error) or 1.
int ExitCode(const absl::Status& status);

}  // namespace switchyard::cli
