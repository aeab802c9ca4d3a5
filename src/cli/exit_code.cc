#include "cli/exit_code.h"

#include <cstdio>
#include <string>

#include "absl/strings/cord.h"

namespace switchyard::cli {
namespace {

// The payload that InputError sets; its presence is the mark.
constexpr char kInputErrorPayload[] = "switchyard.cli/input-error";

}  // namespace

absl::Status InputError(absl::Status status) {
  if (!status.ok())
    status.SetPayload(kInputErrorPayload, absl::Cord());
  return status;
}

int ExitCode(const absl::Status& status) {
  if (status.ok())
    return 0;
  std::fprintf(stderr, "error: %s\n", std::string(status.message()).c_str());
  const bool usage = status.code() == absl::StatusCode::kInvalidArgument &&
                     !status.GetPayload(kInputErrorPayload).has_value();
  return usage ? 2 : 1;
}

}  // namespace switchyard::cli
