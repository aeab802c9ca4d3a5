#include "runtime/cpu/internal/packed_weights.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "fmt/format.h"

#include "runtime/cpu/internal/host_memory.h"

namespace switchyard::runtime::cpu {
namespace {

size_t RoundUp(size_t n, size_t to) {
  return (n + to - 1) / to * to;
}

// Packs w's panels into `packed`, in parallel.
void PackPanels(const KernelContext& ctx, const Tensor& w, const PackedPanels& packed) {
  const int64_t m = w.dim(0);
  const int64_t k = w.dim(1);
  const auto* wd = static_cast<const uint8_t*>(w.data());
  const size_t row_bytes = w.row_bytes();
  ctx.ParallelFor(NumPanels(m), m * k, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      const int64_t j0 = p * kPanelRows;
      const int64_t rows = std::min(kPanelRows, m - j0);
      auto* dst = const_cast<uint8_t*>(packed.panel(p));
      if (w.dtype() == DType::kQ8_0) {
        ctx.q8->pack_panel(wd, row_bytes, j0, rows, 0, k / kQ8_0BlockElems, dst);
        continue;
      }
      for (int64_t t0 = 0; t0 < k; t0 += kMaxPackColumns) {
        ctx.bf16->pack_panel(wd + static_cast<size_t>(j0) * row_bytes, row_bytes, rows, t0,
                             std::min(kMaxPackColumns, k - t0),
                             reinterpret_cast<uint32_t*>(dst) + t0 / 2 * kPanelRows);
      }
    }
  });
}

}  // namespace

size_t PackedWeights::PanelBytes(const KernelContext& ctx, DType dtype, int64_t m,
                                 int64_t k) const {
  if (!enabled_ || m <= 0 || k <= 0)
    return 0;
  if (dtype == DType::kBF16 && ctx.bf16 != nullptr && k % 2 == 0)
    return static_cast<size_t>(k / 2 * kPanelRows) * sizeof(uint32_t);
  if (dtype == DType::kQ8_0 && ctx.q8 != nullptr && ctx.q8->pack_panel != nullptr)
    return static_cast<size_t>(k / kQ8_0BlockElems * kQ8PanelStride);
  return 0;
}

size_t PackedWeights::CopyBytes(const KernelContext& ctx, DType dtype, int64_t m, int64_t k) const {
  return RoundUp(PanelBytes(ctx, dtype, m, k) * static_cast<size_t>(NumPanels(m)), 64);
}

absl::StatusOr<Buffer> PackedWeights::Pack(const KernelContext& ctx,
                                           std::span<const Tensor> weights) {
  // Which weights to pack (each once, none a live Buffer holds), where, and their panels.
  struct Todo {
    const Tensor* w;
    size_t offset;
    size_t panel_bytes;
  };
  std::vector<Todo> todo;
  size_t total = 0;
  {
    base::MutexLock lock(&mu_);
    for (const Tensor& w : weights) {
      if (w.rank() != 2 || w.data() == nullptr)
        continue;
      const size_t panel_bytes = PanelBytes(ctx, w.dtype(), w.dim(0), w.dim(1));
      const bool seen = std::any_of(todo.begin(), todo.end(),
                                    [&w](const Todo& t) { return t.w->data() == w.data(); });
      if (panel_bytes == 0 || seen || entries_.contains(w.data()))
        continue;
      todo.push_back({&w, total, panel_bytes});
      total += CopyBytes(ctx, w.dtype(), w.dim(0), w.dim(1));
    }
  }
  if (todo.empty())
    return Buffer();
  auto* arena = static_cast<uint8_t*>(AllocateHostMemory(total));
  if (arena == nullptr) {
    return absl::ResourceExhaustedError(
        fmt::format("cpu backend: cannot allocate {} bytes of packed weights", total));
  }
  for (const auto& [w, offset, panel_bytes] : todo) {
    const PackedPanels packed{arena + offset, panel_bytes};
    PackPanels(ctx, *w, packed);
    base::MutexLock lock(&mu_);
    entries_[w->data()] = {w->dtype(), w->dim(0), w->dim(1), packed};
  }
  return Buffer(arena, total, MemorySpace::kDevice, [this](void* data, size_t size) {
    Release(data, static_cast<uint8_t*>(data) + size);
    std::free(data);
  });
}

std::optional<PackedPanels> PackedWeights::Find(const Tensor& w) const {
  base::MutexLock lock(&mu_);
  const auto it = entries_.find(w.data());
  if (it == entries_.end())
    return std::nullopt;
  const Entry& e = it->second;
  if (e.dtype != w.dtype() || w.rank() != 2 || e.m != w.dim(0) || e.k != w.dim(1))
    return std::nullopt;
  return e.packed;
}

void PackedWeights::Release(const void* begin, const void* end) {
  base::MutexLock lock(&mu_);
  const auto lo = reinterpret_cast<uintptr_t>(begin);
  const auto hi = reinterpret_cast<uintptr_t>(end);
  std::erase_if(entries_, [lo, hi](const auto& entry) {
    const auto copy = reinterpret_cast<uintptr_t>(entry.second.packed.panels);
    return copy >= lo && copy < hi;
  });
}

}  // namespace switchyard::runtime::cpu
