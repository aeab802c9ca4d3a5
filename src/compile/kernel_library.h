// KernelLibrary: a compiled step's generated row kernels (row_kernels.h), built by the host
// compiler (host_compiler.h) into a shared object and loaded with dlopen.
//
// With a compile cache the shared object is the cached artefact: keyed by the generated
// source's SHA-256, the compiler's identity and flags, the ISA level and the project
// version (the buckets of one model share it: their kernels depend on the model's width,
// not on the bucket), built once per host (or fleet, with Redis) under the cache's
// single-flight lock, and loaded from the host directory by every later start. The cache
// checks an entry's bytes before handing it over, so a truncated or altered object is
// rebuilt, never loaded. Without a cache it is built into a scratch directory each start.
//
// Immutable once loaded; kernels may run on any thread. The object stays loaded while the
// library lives.
#pragma once

#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

#include "compile/artefact_cache.h"
#include "compile/row_kernels.h"
#include "runtime/backend.h"

namespace switchyard::compile {

class KernelLibrary {
 public:
  // The kernels of `specs` for the ISA level `isa` (host_compiler.h), from `cache` (may be
  // null) or built now; `*found_in` says which. Errors: no compiler, a failed build (both
  // with the compiler's words), an object that does not load, the cache's host directory's.
  static absl::StatusOr<std::shared_ptr<const KernelLibrary>> Build(
      std::span<const RowKernelSpec> specs, std::string_view isa, ArtefactCache* cache,
      CacheLevel* found_in);

  ~KernelLibrary();
  KernelLibrary(const KernelLibrary&) = delete;
  KernelLibrary& operator=(const KernelLibrary&) = delete;

  // Kernel i of the specs it was built for.
  runtime::Backend::RowKernel kernel(size_t i) const { return kernels_[i]; }
  size_t size() const { return kernels_.size(); }

 private:
  KernelLibrary() = default;
  // Opens the object at `path` and finds `count` kernels in it.
  static absl::StatusOr<std::shared_ptr<KernelLibrary>> Load(const std::string& path, size_t count);

  void* handle_ = nullptr;
  std::vector<runtime::Backend::RowKernel> kernels_;
  // The cache entry whose file was loaded, held so that no process removes it meanwhile.
  std::shared_ptr<const HostEntry> entry_;
};

}  // namespace switchyard::compile
