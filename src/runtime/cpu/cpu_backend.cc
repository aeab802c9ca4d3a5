#include "runtime/cpu/cpu_backend.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <thread>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "fmt/format.h"

#include "base/status_macros.h"
#include "base/thread_pool.h"
#include "runtime/cpu/internal/host_memory.h"
#include "runtime/cpu/internal/kernels.h"
#include "runtime/cpu/internal/packed_weights.h"

namespace switchyard::runtime {
namespace {

using cpu::KernelContext;

absl::Status Invalid(std::string_view kernel, const std::string& what) {
  return absl::InvalidArgumentError(fmt::format("{}: {}", kernel, what));
}

absl::Status ExpectDType(std::string_view kernel, std::string_view operand, const Tensor& t,
                         DType dtype) {
  if (t.dtype() != dtype) {
    return Invalid(
        kernel, fmt::format("{} must be {}, got {}", operand, DTypeName(dtype), t.DebugString()));
  }
  if (t.data() == nullptr && t.num_elements() != 0) {
    return Invalid(kernel, fmt::format("{} has no data", operand));
  }
  return absl::OkStatus();
}

absl::Status ExpectSameCount(std::string_view kernel, std::string_view name_a, const Tensor& a,
                             std::string_view name_b, const Tensor& b) {
  if (a.num_elements() != b.num_elements()) {
    return Invalid(kernel, fmt::format("{} {} and {} {} differ in size", name_a, a.DebugString(),
                                       name_b, b.DebugString()));
  }
  return absl::OkStatus();
}

// Inverse frequencies plus a cos/sin table by position, grown on demand (in steps of
// kRopeTableStep positions) by the one thread driving the backend, so Rope never
// evaluates trigonometry for a position twice.
class CpuRopeTable final : public RopeTable {
 public:
  static constexpr int64_t kRopeTableStep = 1024;

  CpuRopeTable(RopeParams params, std::vector<double> inv_freq)
      : params_(std::move(params)), inv_freq_(std::move(inv_freq)) {}
  const RopeParams& params() const override { return params_; }

  // Row p: cos of each pair's angle at position p, then sin ([2 * pairs] floats), for p
  // in [0, max_position]. Valid until the next call.
  const float* CosSin(int64_t max_position) const {
    const int64_t pairs = static_cast<int64_t>(inv_freq_.size());
    if (max_position >= positions_) {
      const int64_t grown = (max_position / kRopeTableStep + 1) * kRopeTableStep;
      cos_sin_.resize(static_cast<size_t>(grown * 2 * pairs));
      for (int64_t p = positions_; p < grown; ++p) {
        float* row = cos_sin_.data() + p * 2 * pairs;
        cpu::RopeAngles(inv_freq_, static_cast<double>(p), row, row + pairs);
      }
      positions_ = grown;
    }
    return cos_sin_.data();
  }

 private:
  RopeParams params_;
  std::vector<double> inv_freq_;
  mutable std::vector<float> cos_sin_;
  mutable int64_t positions_ = 0;
};

class CpuBackend final : public Backend {
 public:
  // q8, quant: the int8 kernels for Q8_0 and for the other block types, and their name in
  // name() ("vnni", "int8"); both null for none.
  CpuBackend(size_t num_threads, CpuIsa isa, const cpu::Q8Kernels* q8,
             const cpu::QuantKernels* quant, std::string_view q8_name, bool bf16_dot,
             bool pack_weights)
      // The driving thread is one of the num_threads compute threads.
      : pool_(num_threads > 1 ? std::make_unique<base::ThreadPool>(num_threads - 1, "sy-cpu")
                              : nullptr),
        ctx_{pool_.get(), &cpu::KernelsFor(isa), q8, quant,
             bf16_dot ? &cpu::Avx512Bf16Kernels() : nullptr},
        name_(fmt::format("cpu({}{}{}{}, {} threads)", CpuIsaName(isa), q8 != nullptr ? "+" : "",
                          q8 != nullptr ? q8_name : "", bf16_dot ? "+bf16" : "", num_threads)),
        packed_(pack_weights) {}

  std::string_view name() const override { return name_; }

  absl::StatusOr<Buffer> Allocate(size_t size_bytes) override {
    void* data = size_bytes == 0 ? nullptr : cpu::AllocateHostMemory(size_bytes);
    if (size_bytes != 0 && data == nullptr) {
      return absl::ResourceExhaustedError(
          fmt::format("cpu backend: cannot allocate {} bytes", size_bytes));
    }
    return Buffer(data, size_bytes, MemorySpace::kDevice, [](void* p, size_t) { std::free(p); });
  }

  absl::StatusOr<Buffer> WrapHost(const void* host, size_t size_bytes) override {
    return Buffer(const_cast<void*>(host), size_bytes, MemorySpace::kDevice, nullptr);
  }

  absl::Status CopyToDevice(const void* host, const Tensor& dst) override {
    if (dst.size_bytes() != 0)
      std::memcpy(dst.data(), host, dst.size_bytes());
    return absl::OkStatus();
  }

  absl::Status CopyToHost(const Tensor& src, void* host) override {
    if (src.size_bytes() != 0)
      std::memcpy(host, src.data(), src.size_bytes());
    return absl::OkStatus();
  }

  absl::Status Copy(const Tensor& src, const Tensor& dst) override {
    if (src.size_bytes() != dst.size_bytes()) {
      return Invalid("Copy", fmt::format("src {} and dst {} differ in bytes", src.DebugString(),
                                         dst.DebugString()));
    }
    if (src.size_bytes() != 0 && src.data() != dst.data()) {
      std::memmove(dst.data(), src.data(), src.size_bytes());
    }
    return absl::OkStatus();
  }

  absl::Status Synchronize() override { return absl::OkStatus(); }

  absl::Status Embedding(const Tensor& table, const Tensor& ids, const Tensor& out) override {
    constexpr std::string_view kName = "Embedding";
    if (table.rank() != 2 || !IsWeightDType(table.dtype())) {
      return Invalid(kName, "table must be a [vocab, d] weight, got " + table.DebugString());
    }
    SY_RETURN_IF_ERROR(ExpectDType(kName, "ids", ids, DType::kI32));
    SY_RETURN_IF_ERROR(ExpectDType(kName, "out", out, DType::kF32));
    if (out.cols() != table.dim(1) || out.rows() != ids.num_elements()) {
      return Invalid(kName, fmt::format("out {} must be [{}, {}]", out.DebugString(),
                                        ids.num_elements(), table.dim(1)));
    }
    const auto* id_data = ids.data_as<const int32_t>();
    for (int64_t i = 0; i < ids.num_elements(); ++i) {
      if (id_data[i] < 0 || id_data[i] >= table.dim(0)) {
        return absl::OutOfRangeError(
            fmt::format("Embedding: ids[{}] = {} outside [0, {})", i, id_data[i], table.dim(0)));
      }
    }
    cpu::EmbeddingKernel(ctx_, table, id_data, out);
    return absl::OkStatus();
  }

  absl::Status RmsNorm(const Tensor& x, const Tensor& weight, float eps,
                       const Tensor& out) override {
    constexpr std::string_view kName = "RmsNorm";
    SY_RETURN_IF_ERROR(ExpectDType(kName, "x", x, DType::kF32));
    SY_RETURN_IF_ERROR(ExpectDType(kName, "out", out, DType::kF32));
    if (DTypeBlockElems(weight.dtype()) != 1 || weight.dtype() == DType::kI32 ||
        weight.num_elements() != x.cols() || weight.rows() != 1) {
      return Invalid(kName, fmt::format("weight {} must be F32/F16/BF16 [{}]", weight.DebugString(),
                                        x.cols()));
    }
    if (out.rows() != x.rows() || out.cols() != x.cols()) {
      return Invalid(kName,
                     fmt::format("out {} must match x {}", out.DebugString(), x.DebugString()));
    }
    cpu::RmsNormKernel(ctx_, x, weight, eps, out);
    return absl::OkStatus();
  }

  absl::StatusOr<std::unique_ptr<RopeTable>> CreateRopeTable(const RopeParams& params) override {
    SY_ASSIGN_OR_RETURN(std::vector<double> inv_freq, RopeInverseFrequencies(params));
    return std::make_unique<CpuRopeTable>(params, std::move(inv_freq));
  }

  absl::Status Rope(const RopeTable& table, const Tensor& x, const Tensor& positions) override {
    constexpr std::string_view kName = "Rope";
    const auto* cpu_table = dynamic_cast<const CpuRopeTable*>(&table);
    if (cpu_table == nullptr)
      return Invalid(kName, "table was not made by this backend");
    const RopeParams& params = cpu_table->params();
    SY_RETURN_IF_ERROR(ExpectDType(kName, "x", x, DType::kF32));
    SY_RETURN_IF_ERROR(ExpectDType(kName, "positions", positions, DType::kI32));
    const int64_t n = positions.num_elements();
    if (x.rank() < 1 || x.dim(0) != n || (n != 0 && x.num_elements() % (n * params.head_dim))) {
      return Invalid(
          kName, fmt::format("x {} must be [{}, heads, {}]", x.DebugString(), n, params.head_dim));
    }
    const auto* pos = positions.data_as<const int32_t>();
    int32_t max_position = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (pos[i] < 0) {
        return absl::OutOfRangeError(fmt::format("Rope: positions[{}] = {} < 0", i, pos[i]));
      }
      max_position = std::max(max_position, pos[i]);
    }
    if (n == 0)
      return absl::OkStatus();
    const int64_t rotary_dim = params.rotary_dim == 0 ? params.head_dim : params.rotary_dim;
    cpu::RopeKernel(ctx_, cpu_table->CosSin(max_position), params.head_dim, rotary_dim,
                    params.style == RopeStyle::kInterleaved, x, pos);
    return absl::OkStatus();
  }

  absl::Status MatMul(const Tensor& x, const Tensor& w, const Tensor* bias,
                      const Tensor& out) override {
    return MatMulOnPath(x, w, bias, out, MatMulPath::kAuto);
  }

  absl::Status MatMulOnPath(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& out,
                            MatMulPath path) override {
    SY_RETURN_IF_ERROR(CheckMatMul(x, w, bias, out));
    cpu::MatMulKernel(ctx_, x, w, bias, out, path, packed_.Find(w));
    return absl::OkStatus();
  }

  absl::Status MatMuls(const Tensor& x, std::span<const MatMulTerm> terms) override {
    absl::InlinedVector<cpu::MatMulsTerm, 4> kernel_terms;
    for (const MatMulTerm& t : terms) {
      SY_RETURN_IF_ERROR(CheckMatMul(x, *t.w, t.bias, *t.out));
      kernel_terms.push_back({t.w, t.bias, t.out, packed_.Find(*t.w)});
    }
    cpu::MatMulsKernel(ctx_, x, kernel_terms);
    return absl::OkStatus();
  }

  bool MatMulTakesBf16Activations(DType w_dtype) const override {
    return w_dtype == DType::kBF16 && ctx_.bf16 != nullptr;
  }

  bool MatMulPathsDiffer(const Tensor& w, int64_t rows) const override {
    if (packed_.Find(w).has_value())
      return false;  // every row count takes the packed panels
    return cpu::MatMulPathsDiffer(ctx_, w.dtype(), rows, w.cols());
  }

  absl::StatusOr<Buffer> PackMatMulWeights(std::span<const Tensor> weights) override {
    return packed_.Pack(ctx_, weights);
  }

  size_t PackedMatMulWeightBytes(DType dtype, int64_t m, int64_t k) const override {
    return packed_.CopyBytes(ctx_, dtype, m, k);
  }

  absl::Status SwiGlu(const Tensor& gate, const Tensor& up, const Tensor& out) override {
    constexpr std::string_view kName = "SwiGlu";
    SY_RETURN_IF_ERROR(ExpectDType(kName, "gate", gate, DType::kF32));
    SY_RETURN_IF_ERROR(ExpectDType(kName, "up", up, DType::kF32));
    SY_RETURN_IF_ERROR(ExpectDType(kName, "out", out, DType::kF32));
    SY_RETURN_IF_ERROR(ExpectSameCount(kName, "gate", gate, "up", up));
    SY_RETURN_IF_ERROR(ExpectSameCount(kName, "gate", gate, "out", out));
    cpu::SwiGluKernel(ctx_, gate, up, out);
    return absl::OkStatus();
  }

  absl::Status GeluTanhGlu(const Tensor& gate, const Tensor& up, const Tensor& out) override {
    constexpr std::string_view kName = "GeluTanhGlu";
    SY_RETURN_IF_ERROR(ExpectDType(kName, "gate", gate, DType::kF32));
    SY_RETURN_IF_ERROR(ExpectDType(kName, "up", up, DType::kF32));
    SY_RETURN_IF_ERROR(ExpectDType(kName, "out", out, DType::kF32));
    SY_RETURN_IF_ERROR(ExpectSameCount(kName, "gate", gate, "up", up));
    SY_RETURN_IF_ERROR(ExpectSameCount(kName, "gate", gate, "out", out));
    cpu::GeluTanhGluKernel(ctx_, gate, up, out);
    return absl::OkStatus();
  }

  absl::Status Scale(const Tensor& x, float factor, const Tensor& out) override {
    constexpr std::string_view kName = "Scale";
    SY_RETURN_IF_ERROR(ExpectDType(kName, "x", x, DType::kF32));
    SY_RETURN_IF_ERROR(ExpectDType(kName, "out", out, DType::kF32));
    SY_RETURN_IF_ERROR(ExpectSameCount(kName, "x", x, "out", out));
    cpu::ScaleKernel(ctx_, x, factor, out);
    return absl::OkStatus();
  }

  absl::Status SoftCap(const Tensor& x, float cap, const Tensor& out) override {
    constexpr std::string_view kName = "SoftCap";
    SY_RETURN_IF_ERROR(ExpectDType(kName, "x", x, DType::kF32));
    SY_RETURN_IF_ERROR(ExpectDType(kName, "out", out, DType::kF32));
    SY_RETURN_IF_ERROR(ExpectSameCount(kName, "x", x, "out", out));
    if (!(cap > 0) || !std::isfinite(cap)) {
      return Invalid(kName, fmt::format("cap {} must be positive and finite", cap));
    }
    cpu::SoftCapKernel(ctx_, x, cap, out);
    return absl::OkStatus();
  }

  absl::Status MoeRoute(const Tensor& logits, int64_t top_k, bool normalize,
                        const Tensor& expert_ids, const Tensor& weights) override {
    constexpr std::string_view kName = "MoeRoute";
    SY_RETURN_IF_ERROR(ExpectDType(kName, "logits", logits, DType::kF32));
    SY_RETURN_IF_ERROR(ExpectDType(kName, "expert_ids", expert_ids, DType::kI32));
    SY_RETURN_IF_ERROR(ExpectDType(kName, "weights", weights, DType::kF32));
    if (top_k <= 0 || top_k > logits.cols()) {
      return Invalid(kName, fmt::format("top_k {} outside [1, {}]", top_k, logits.cols()));
    }
    for (const Tensor* t : {&expert_ids, &weights}) {
      if (t->rows() != logits.rows() || t->cols() != top_k) {
        return Invalid(kName,
                       fmt::format("{} must be [{}, {}]", t->DebugString(), logits.rows(), top_k));
      }
    }
    cpu::MoeRouteKernel(ctx_, logits, top_k, normalize, expert_ids, weights);
    return absl::OkStatus();
  }

  absl::Status MoeScatterAdd(const Tensor& y, const Tensor& rows, const Tensor& weights,
                             const Tensor& out) override {
    constexpr std::string_view kName = "MoeScatterAdd";
    SY_RETURN_IF_ERROR(ExpectDType(kName, "y", y, DType::kF32));
    SY_RETURN_IF_ERROR(ExpectDType(kName, "rows", rows, DType::kI32));
    SY_RETURN_IF_ERROR(ExpectDType(kName, "weights", weights, DType::kF32));
    SY_RETURN_IF_ERROR(ExpectDType(kName, "out", out, DType::kF32));
    if (rows.num_elements() != y.rows() || weights.num_elements() != y.rows() ||
        out.cols() != y.cols()) {
      return Invalid(kName,
                     fmt::format("y {}, rows {}, weights {} and out {} disagree", y.DebugString(),
                                 rows.DebugString(), weights.DebugString(), out.DebugString()));
    }
    if (out.data() == y.data() && out.num_elements() != 0) {
      return Invalid(kName, "out must not alias y");
    }
    const auto* row_data = rows.data_as<const int32_t>();
    for (int64_t j = 0; j < rows.num_elements(); ++j) {
      if (row_data[j] < 0 || row_data[j] >= out.rows()) {
        return absl::OutOfRangeError(fmt::format("MoeScatterAdd: rows[{}] = {} outside [0, {})", j,
                                                 row_data[j], out.rows()));
      }
    }
    cpu::MoeScatterAddKernel(ctx_, y, row_data, weights.data_as<const float>(), out);
    return absl::OkStatus();
  }

  bool RunsRowKernels() const override { return true; }

  absl::Status RunRowKernel(RowKernel kernel, std::span<void* const> operands, int64_t rows,
                            int64_t work_per_row) override {
    if (kernel == nullptr || rows < 0)
      return Invalid("RunRowKernel", fmt::format("no kernel, or {} rows", rows));
    void* const* data = operands.data();
    ctx_.ParallelFor(rows, rows * work_per_row,
                     [&](int64_t begin, int64_t end) { kernel(data, begin, end); });
    return absl::OkStatus();
  }

  absl::Status Add(const Tensor& a, const Tensor& b, const Tensor& out) override {
    constexpr std::string_view kName = "Add";
    SY_RETURN_IF_ERROR(ExpectDType(kName, "a", a, DType::kF32));
    SY_RETURN_IF_ERROR(ExpectDType(kName, "b", b, DType::kF32));
    SY_RETURN_IF_ERROR(ExpectDType(kName, "out", out, DType::kF32));
    SY_RETURN_IF_ERROR(ExpectSameCount(kName, "a", a, "b", b));
    SY_RETURN_IF_ERROR(ExpectSameCount(kName, "a", a, "out", out));
    cpu::AddKernel(ctx_, a, b, out);
    return absl::OkStatus();
  }

  absl::Status WriteKv(const Tensor& k, const Tensor& v, const Tensor& slot_ids,
                       const Tensor& k_pool, const Tensor& v_pool) override {
    constexpr std::string_view kName = "WriteKv";
    SY_RETURN_IF_ERROR(ExpectDType(kName, "k", k, DType::kF32));
    SY_RETURN_IF_ERROR(ExpectDType(kName, "v", v, DType::kF32));
    SY_RETURN_IF_ERROR(ExpectDType(kName, "slot_ids", slot_ids, DType::kI32));
    SY_RETURN_IF_ERROR(CheckPools(kName, k_pool, v_pool));
    const int64_t n = slot_ids.num_elements();
    const int64_t row = k_pool.dim(2) * k_pool.dim(3);
    if (k.num_elements() != n * row || v.num_elements() != n * row) {
      return Invalid(kName, fmt::format("k {} and v {} must be [{}, {}, {}]", k.DebugString(),
                                        v.DebugString(), n, k_pool.dim(2), k_pool.dim(3)));
    }
    const auto* slots = slot_ids.data_as<const int32_t>();
    const int64_t num_slots = k_pool.dim(0) * k_pool.dim(1);
    for (int64_t i = 0; i < n; ++i) {
      if (slots[i] >= num_slots) {
        return absl::OutOfRangeError(
            fmt::format("WriteKv: slot_ids[{}] = {} >= {} slots", i, slots[i], num_slots));
      }
    }
    cpu::WriteKvKernel(ctx_, k, v, slots, k_pool, v_pool);
    return absl::OkStatus();
  }

  absl::Status PagedAttention(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool,
                              std::span<const AttentionSequence> sequences, float scale,
                              int64_t window, const Tensor& out) override {
    constexpr std::string_view kName = "PagedAttention";
    if (window < 0) {
      return Invalid(kName, fmt::format("window {} must be >= 0", window));
    }
    SY_RETURN_IF_ERROR(ExpectDType(kName, "q", q, DType::kF32));
    SY_RETURN_IF_ERROR(ExpectDType(kName, "out", out, DType::kF32));
    SY_RETURN_IF_ERROR(CheckPools(kName, k_pool, v_pool));
    const int64_t kv_heads = k_pool.dim(2);
    const int64_t head_dim = k_pool.dim(3);
    if (q.rank() != 3 || q.dim(2) != head_dim || q.dim(1) % kv_heads != 0) {
      return Invalid(kName, fmt::format("q {} must be [n, heads, {}] with heads a multiple of {}",
                                        q.DebugString(), head_dim, kv_heads));
    }
    if (out.num_elements() != q.num_elements()) {
      return Invalid(kName,
                     fmt::format("out {} must match q {}", out.DebugString(), q.DebugString()));
    }
    if (out.data() == q.data() && q.num_elements() != 0) {
      return Invalid(kName, "out must not alias q");
    }
    const int64_t block_size = k_pool.dim(1);
    for (size_t s = 0; s < sequences.size(); ++s) {
      const AttentionSequence& seq = sequences[s];
      if (seq.q_begin < 0 || seq.q_len < 0 || seq.q_begin + seq.q_len > q.dim(0) ||
          seq.q_len > seq.context_len) {
        return Invalid(kName, fmt::format("sequence {}: rows [{}, +{}) context {} do not fit q "
                                          "with {} rows",
                                          s, seq.q_begin, seq.q_len, seq.context_len, q.dim(0)));
      }
      const int64_t blocks_needed = (seq.context_len + block_size - 1) / block_size;
      if (static_cast<int64_t>(seq.block_table.size()) < blocks_needed) {
        return Invalid(kName, fmt::format("sequence {}: block table has {} blocks, needs {}", s,
                                          seq.block_table.size(), blocks_needed));
      }
      for (int64_t b = seq.WindowStart(0, window) / block_size; b < blocks_needed; ++b) {
        const int32_t id = seq.block_table[static_cast<size_t>(b)];
        if (id < 0 || id >= k_pool.dim(0)) {
          return absl::OutOfRangeError(
              fmt::format("PagedAttention: sequence {}: block_table[{}] = {} outside [0, {})", s, b,
                          id, k_pool.dim(0)));
        }
      }
    }
    cpu::PagedAttentionKernel(ctx_, q, k_pool, v_pool, sequences, scale, window, out);
    return absl::OkStatus();
  }

 private:
  // MatMul's operand checks.
  absl::Status CheckMatMul(const Tensor& x, const Tensor& w, const Tensor* bias,
                           const Tensor& out) const {
    constexpr std::string_view kName = "MatMul";
    if (x.dtype() == DType::kBF16 && MatMulTakesBf16Activations(w.dtype())) {
      SY_RETURN_IF_ERROR(ExpectDType(kName, "x", x, DType::kBF16));
      if (x.cols() % 2 != 0)
        return Invalid(kName, "bf16 activations need an even k, got " + x.DebugString());
    } else {
      SY_RETURN_IF_ERROR(ExpectDType(kName, "x", x, DType::kF32));
    }
    SY_RETURN_IF_ERROR(ExpectDType(kName, "out", out, DType::kF32));
    if (w.rank() != 2 || !IsWeightDType(w.dtype()) || w.dim(1) != x.cols()) {
      return Invalid(kName,
                     fmt::format("w {} must be a [m, {}] weight", w.DebugString(), x.cols()));
    }
    if (out.rows() != x.rows() || out.cols() != w.dim(0)) {
      return Invalid(kName,
                     fmt::format("out {} must be [{}, {}]", out.DebugString(), x.rows(), w.dim(0)));
    }
    if (bias != nullptr) {
      SY_RETURN_IF_ERROR(ExpectDType(kName, "bias", *bias, DType::kF32));
      if (bias->num_elements() != w.dim(0)) {
        return Invalid(kName, fmt::format("bias {} must be [{}]", bias->DebugString(), w.dim(0)));
      }
    }
    if (out.data() == x.data() && out.num_elements() != 0) {
      return Invalid(kName, "out must not alias x");
    }
    return absl::OkStatus();
  }

  static absl::Status CheckPools(std::string_view kernel, const Tensor& k_pool,
                                 const Tensor& v_pool) {
    const DType d = k_pool.dtype();
    if (k_pool.rank() != 4 || (d != DType::kF32 && d != DType::kF16 && d != DType::kBF16)) {
      return Invalid(kernel,
                     "k_pool must be F32/F16/BF16 [num_blocks, block_size, kv_heads, head_dim], "
                     "got " +
                         k_pool.DebugString());
    }
    if (v_pool.dtype() != d || v_pool.rank() != 4 ||
        !std::equal(k_pool.shape().begin(), k_pool.shape().end(), v_pool.shape().begin())) {
      return Invalid(kernel, fmt::format("v_pool {} must match k_pool {}", v_pool.DebugString(),
                                         k_pool.DebugString()));
    }
    if (k_pool.dim(1) == 0 || k_pool.dim(2) == 0 || k_pool.dim(3) == 0) {
      return Invalid(kernel, "pool dims must be positive, got " + k_pool.DebugString());
    }
    return absl::OkStatus();
  }

  std::unique_ptr<base::ThreadPool> pool_;
  KernelContext ctx_;
  std::string name_;
  cpu::PackedWeights packed_;
};

}  // namespace

std::string_view CpuIsaName(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kPortable:
      return "portable";
    case CpuIsa::kAvx2:
      return "avx2";
    case CpuIsa::kAvx512:
      return "avx512";
  }
  return "?";
}

std::optional<CpuIsa> ParseCpuIsa(std::string_view name) {
  for (CpuIsa isa : {CpuIsa::kPortable, CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    if (name == CpuIsaName(isa))
      return isa;
  }
  return std::nullopt;
}

bool CpuSupportsIsa(CpuIsa isa) {
#if defined(__x86_64__) || defined(__i386__)
  // clang 14's __builtin_cpu_supports does not know "f16c": read CPUID leaf 1, ECX bit 29.
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & (1u << 29)) != 0;
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
  switch (isa) {
    case CpuIsa::kPortable:
      return true;
    case CpuIsa::kAvx2:
      return avx2;
    case CpuIsa::kAvx512:
      return avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl");
  }
  return false;
#else
  return isa == CpuIsa::kPortable;
#endif
}

CpuIsa BestCpuIsa() {
  if (CpuSupportsIsa(CpuIsa::kAvx512))
    return CpuIsa::kAvx512;
  if (CpuSupportsIsa(CpuIsa::kAvx2))
    return CpuIsa::kAvx2;
  return CpuIsa::kPortable;
}

absl::StatusOr<std::unique_ptr<Backend>> CreateCpuBackend(const CpuBackendOptions& options) {
  CpuIsa isa = BestCpuIsa();
  if (options.isa.has_value()) {
    isa = *options.isa;
  } else if (const char* env = std::getenv("SY_CPU_ISA"); env != nullptr && *env != '\0') {
    std::optional<CpuIsa> parsed = ParseCpuIsa(env);
    if (!parsed.has_value()) {
      return absl::InvalidArgumentError(
          fmt::format("SY_CPU_ISA={}: want portable, avx2 or avx512", env));
    }
    isa = *parsed;
  }
  if (!CpuSupportsIsa(isa)) {
    return absl::FailedPreconditionError(
        fmt::format("cpu backend: this CPU does not support {} kernels", CpuIsaName(isa)));
  }
  size_t num_threads = options.num_threads;
  if (num_threads == 0)
    num_threads = std::max(1u, std::thread::hardware_concurrency());
  const cpu::Q8Kernels* q8 = nullptr;
  const cpu::QuantKernels* quant = nullptr;
  std::string_view q8_name;
  if (options.quantize_q8_0_activations && isa == CpuIsa::kAvx512 && cpu::CpuSupportsAvx512Vnni()) {
    q8 = &cpu::Avx512Q8Kernels();
    quant = &cpu::Avx512QuantKernels();
    q8_name = "vnni";
  } else if (options.quantize_q8_0_activations && isa != CpuIsa::kPortable) {
    // AVX-512 machines without VNNI run AVX2 too.
    q8 = &cpu::Avx2Q8Kernels();
    quant = &cpu::Avx2QuantKernels();
    q8_name = "int8";
  }
  const bool bf16_dot =
      options.round_bf16_activations && isa == CpuIsa::kAvx512 && cpu::CpuSupportsAvx512Bf16();
  return std::make_unique<CpuBackend>(num_threads, isa, q8, quant, q8_name, bf16_dot,
                                      options.pack_matmul_weights);
}

}  // namespace switchyard::runtime
