#include "compile/kernel_library.h"

#include <dlfcn.h>

#include <string>
#include <utility>

#include "fmt/format.h"

#include "base/file.h"
#include "base/status_macros.h"
#include "compile/cache_key.h"
#include "compile/entry_files.h"
#include "compile/host_compiler.h"
#include "compile/internal/scratch_directory.h"

namespace switchyard::compile {
namespace {

KeyFactors KernelFactors(const std::string& source, const HostCompiler& compiler,
                         std::string_view isa) {
  KeyFactors f;
  f.Set("artefact", "row_kernels")
      .Set("source_sha256", Sha256Hex(source))
      .Set("compiler", compiler.version)
      .Set("compiler_flags", compiler.flags)
      .Set("isa_features", std::vector<std::string>{std::string(isa)})
      .Set("project_version", std::string(ProjectVersion()));
  return f;
}

}  // namespace

KernelLibrary::~KernelLibrary() {
  if (handle_ != nullptr)
    ::dlclose(handle_);
}

absl::StatusOr<std::shared_ptr<KernelLibrary>> KernelLibrary::Load(const std::string& path,
                                                                   size_t count) {
  auto library = std::shared_ptr<KernelLibrary>(new KernelLibrary());
  library->handle_ = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library->handle_ == nullptr) {
    const char* why = ::dlerror();
    return absl::InternalError(
        fmt::format("generated kernels do not load: {}", why != nullptr ? why : path));
  }
  for (size_t i = 0; i < count; ++i) {
    void* symbol = ::dlsym(library->handle_, RowKernelSymbol(i).c_str());
    if (symbol == nullptr) {
      return absl::InternalError(
          fmt::format("generated kernels lack {} ({})", RowKernelSymbol(i), path));
    }
    library->kernels_.push_back(reinterpret_cast<runtime::Backend::RowKernel>(symbol));
  }
  return library;
}

absl::StatusOr<std::shared_ptr<const KernelLibrary>> KernelLibrary::Build(
    std::span<const RowKernelSpec> specs, std::string_view isa, ArtefactCache* cache,
    CacheLevel* found_in) {
  const std::string source = GenerateRowKernelSource(specs);
  SY_ASSIGN_OR_RETURN(const HostCompiler compiler, FindHostCompiler(isa));
  *found_in = CacheLevel::kCompiled;
  if (cache == nullptr) {
    SY_ASSIGN_OR_RETURN(const std::string object, BuildSharedObject(compiler, source));
    SY_ASSIGN_OR_RETURN(internal::ScratchDirectory scratch, internal::ScratchDirectory::Create());
    const std::string path = scratch.File("kernels.so");
    SY_RETURN_IF_ERROR(base::WriteFile(path, object));
    // Loaded, the object no longer needs its file.
    return Load(path, specs.size());
  }
  const CacheKey key = ComputeCacheKey(KernelFactors(source, compiler, isa),
                                       NonSemanticFactors::Default(cache->host().root()));
  SY_ASSIGN_OR_RETURN(const ArtefactLookup found,
                      cache->GetOrCompile(key, [&]() -> absl::StatusOr<CompiledArtefact> {
                        SY_ASSIGN_OR_RETURN(std::string object,
                                            BuildSharedObject(compiler, source));
                        return CompiledArtefact{std::move(object), {std::string(isa)}};
                      }));
  *found_in = found.found_in;
  SY_ASSIGN_OR_RETURN(std::shared_ptr<KernelLibrary> library,
                      Load(found.entry->artefact_path(), specs.size()));
  library->entry_ = found.entry;
  return library;
}

}  // namespace switchyard::compile
