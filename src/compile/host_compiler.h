// The host's C++ compiler, which builds a compiled step's generated kernels
// (row_kernels.h) into shared objects, as PyTorch Inductor's CPU backend does: the
// compiler named by $SWITCHYARD_CXX, else `c++` on the PATH.
//
// Flags: C++17 at -O3, position-independent, no floating-point contraction (the kernels
// must round as the backend's own code does), and the vector extensions of the backend's
// ISA level ("avx512": AVX-512 F/BW/VL/DQ with AVX2, FMA, F16C; "avx2": AVX2, FMA, F16C;
// "portable": none), never -march=native, so that what one host builds another with the
// same features can load. The compiler's identity (its --version line) and the flags are
// part of a kernel artefact's cache key.
//
// Runs the compiler as a child process; any thread.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace switchyard::compile {

struct HostCompiler {
  std::string command;             // run through the PATH
  std::string version;             // the first line of `command --version`
  std::vector<std::string> flags;  // for the ISA level, before the source and output
};

// The compiler for `isa` ("portable", "avx2", "avx512"). Errors: NotFound when it does not
// run; InvalidArgument for an ISA level it has no flags for.
absl::StatusOr<HostCompiler> FindHostCompiler(std::string_view isa);

// Compiles `source` (C++) into a shared object and returns its bytes. Errors: Internal
// with the compiler's first lines of diagnostics.
absl::StatusOr<std::string> BuildSharedObject(const HostCompiler& compiler,
                                              std::string_view source);

}  // namespace switchyard::compile
