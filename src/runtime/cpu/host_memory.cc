#include "runtime/cpu/internal/host_memory.h"

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include <cstdlib>

namespace switchyard::runtime::cpu {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;

size_t RoundUp(size_t n, size_t to) {
  return (n + to - 1) / to * to;
}

}  // namespace

void* AllocateHostMemory(size_t bytes) {
  if (bytes < kHugePage)
    return std::aligned_alloc(64, RoundUp(bytes, 64));
  const size_t rounded = RoundUp(bytes, kHugePage);
  void* data = std::aligned_alloc(kHugePage, rounded);
#if defined(MADV_HUGEPAGE)
  if (data != nullptr)
    ::madvise(data, rounded, MADV_HUGEPAGE);
#endif
  return data;
}

}  // namespace switchyard::runtime::cpu
