#include "runtime/cpu/internal/kernels.h"

namespace switchyard::runtime::cpu {

// Below this many scalar operations, waking the pool costs more than it saves.
constexpr int64_t kMinParallelWork = int64_t{32} * 1024;

void KernelContext::ParallelFor(int64_t n, int64_t work,
                                const std::function<void(int64_t, int64_t)>& fn) const {
  if (n <= 0)
    return;
  if (n == 1 || work < kMinParallelWork || pool == nullptr) {
    fn(0, n);
    return;
  }
  pool->ParallelFor(static_cast<size_t>(n), [&fn](size_t begin, size_t end) {
    fn(static_cast<int64_t>(begin), static_cast<int64_t>(end));
  });
}

bool CpuSupportsAvx512Vnni() {
#if defined(__x86_64__) || defined(__i386__)
  return CpuSupportsIsa(CpuIsa::kAvx512) && __builtin_cpu_supports("avx512vnni");
#else
  return false;
#endif
}

bool CpuSupportsAvx512Bf16() {
#if defined(__x86_64__) || defined(__i386__)
  return CpuSupportsIsa(CpuIsa::kAvx512) && __builtin_cpu_supports("avx512bf16");
#else
  return false;
#endif
}

const IsaKernels& KernelsFor(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kAvx512:
      return Avx512Kernels();
    case CpuIsa::kAvx2:
      return Avx2Kernels();
    case CpuIsa::kPortable:
      break;
  }
  return PortableKernels();
}

}  // namespace switchyard::runtime::cpu
