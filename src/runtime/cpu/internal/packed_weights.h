// PackedWeights: the CPU backend's copies of MatMul weights laid out as its GEMM panels
// (Backend::PackMatMulWeights), found again by the weight they were made from.
//
// Why: a MatMul of more rows than the streaming limit packs every weight panel anew on each
// call; for a model's weights during batched decode that repacking is a pass over all the
// weights' bytes per step (29% of a 32-stream bf16 step, profiled). Packed once at load,
// a step streams the panels straight into the GEMM, and the few-row calls take the same
// panels (bf16: at 1 row as fast as the row-wise kernel, at 4-32 rows 2-3x faster). llama.cpp
// (its CPU "repack" buffers) and vLLM's CPU backend (oneDNN's prepacked weights) do the
// same. The cost is the copy's memory; the originals stay where they are (MatMul no longer
// reads them, so pages mapped from a file go cold and the kernel may reclaim them; they
// are not dropped here, which would also evict them from the page cache a restart or a
// second engine on the same file reads).
//
// Layouts: panels of kPanelRows rows (rows past m zero), one after the other, each over all
// of k as the panel kernels read it (PackedPanels):
// - BF16 [m, k], k even, where the bf16 dot-product kernels run: as Bf16Kernels::pack_panel
//   lays out one k block, word q * kPanelRows + r being row r's elements 2q and 2q + 1; the
//   k block from t0 starts at word t0 / 2 * kPanelRows of its panel.
// - Q8_0 [m, k], where the int8 kernels have panels (AVX-512 VNNI): one kQ8PanelStride block
//   per Q8_0 block (isa_kernels.h), 6% more bytes than the Q8_0 rows.
//
// Threads: lookups come from the thread driving the backend; a Buffer of copies may be
// released on another, so the table is locked.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>

#include "absl/status/statusor.h"

#include "base/mutex.h"
#include "runtime/cpu/internal/kernels.h"
#include "runtime/tensor.h"

namespace switchyard::runtime::cpu {

class PackedWeights {
 public:
  // enabled: make the layouts below (each only where its kernels run); false: none.
  explicit PackedWeights(bool enabled) : enabled_(enabled) {}

  // Packs those of `weights` that have a layout here (see above) into one arena, 2 MiB
  // aligned with huge pages asked for (every step reads all of it, so TLB reach matters:
  // 4 KiB pages cost 10-20% of a batch-1 decode step), in parallel on ctx's pool. Each is
  // registered until the returned Buffer is destroyed; a weight some live Buffer already
  // holds is skipped. Empty Buffer when none has a layout.
  absl::StatusOr<Buffer> Pack(const KernelContext& ctx, std::span<const Tensor> weights);

  // The copy of w (same data, dtype and shape), if there is one.
  std::optional<PackedPanels> Find(const Tensor& w) const;

  // Bytes Pack allocates for a [m, k] weight of `dtype` (0 where it makes no copy).
  size_t CopyBytes(const KernelContext& ctx, DType dtype, int64_t m, int64_t k) const;

 private:
  struct Entry {
    DType dtype;
    int64_t m, k;
    PackedPanels packed;
  };
  // Bytes of one panel of a [m, k] weight of `dtype` where it has a layout to make, else 0.
  size_t PanelBytes(const KernelContext& ctx, DType dtype, int64_t m, int64_t k) const;
  // Forgets the entries whose copies lie in [begin, end).
  void Release(const void* begin, const void* end);

  const bool enabled_;

  mutable base::Mutex mu_;
  std::map<const void*, Entry> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace switchyard::runtime::cpu
