// Backend: the seam between model code and a compute device. The forward pass in model/
// is written only against this interface (plus Tensor/Buffer), so a CUDA or other
// accelerator backend can replace the CPU one without touching model code.
//
// Execution model: kernels are *enqueued* in call order on the backend's one stream and
// may run asynchronously; results are visible to later kernels on the same backend at
// once and to the host after Synchronize() (CopyToHost synchronizes itself). The CPU
// backend runs each kernel to completion before returning, on its fixed thread pool.
//
// Threads: one thread at a time drives a Backend (the engine loop); it is not thread-safe.
// Ownership: Buffers returned by Allocate/WrapHost own their memory and must not outlive
// the Backend. Tensors are views; kernels never retain them past the call.
//
// Kernel conventions, for all methods below:
// - Shapes are outermost first, contiguous row-major. "[n, d]" means rank 2 with those
//   dims; a rank-3 [n, h, hd] tensor is also accepted where [n, h*hd] is, and vice versa,
//   when the element counts match (kernels look at rows()/cols() unless stated).
// - Activations are F32. Weights may be F32, F16, BF16 or block-quantized (Q8_0, Q4_0,
//   Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K) where stated.
// - An output may alias an input only where the contract says so.
// - Shape or dtype mismatches return InvalidArgument naming the kernel and operand and
//   leave outputs unspecified; they never crash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "runtime/rope.h"
#include "runtime/tensor.h"

namespace switchyard::runtime {

// Backend-owned precomputed rotary tables (inverse frequencies), made once per model by
// Backend::CreateRopeTable and passed to every Rope call.
class RopeTable {
 public:
  virtual ~RopeTable() = default;
  virtual const RopeParams& params() const = 0;
};

// One sequence's part of a PagedAttention step. Host memory; valid for the call only.
struct AttentionSequence {
  // Rows [q_begin, q_begin + q_len) of q/out are this sequence's new tokens, in order.
  int64_t q_begin = 0;
  int64_t q_len = 0;
  // Tokens of this sequence in the KV cache, INCLUDING the q_len new ones (already
  // written by WriteKv). Query row i (0-based within q_len) sits at position
  // t = context_len - q_len + i and attends to KV positions [0, t]: causal, and decode is
  // just q_len == 1. With a sliding window W (PagedAttention's `window` > 0) it attends to
  // [max(0, t - W + 1), t] only: the last W positions, itself included.
  int64_t context_len = 0;
  // KV position p lives in block block_table[p / block_size] at offset p % block_size.
  // Any block ids, in any order. REQUIRES: size >= ceil(context_len / block_size). With a
  // window, the entries of blocks that end before row 0's window starts are never read
  // and may hold anything (e.g. -1 for blocks the cache has already dropped).
  std::span<const int32_t> block_table = {};

  // The first KV position query row i sees under `window` (0: no window).
  int64_t WindowStart(int64_t i, int64_t window) const {
    const int64_t t = context_len - q_len + i;
    return window > 0 && t >= window ? t - window + 1 : 0;
  }
};

// Which of a backend's MatMul shapes runs: the backend's own pick by the number of
// activation rows (kAuto); the one that streams each weight row once against all rows
// (kStreaming: a backend takes it only up to its streaming row limit); or the one that packs
// weight panels and multiplies every row against each (kPanel: only where the weight dtype
// has panels). Where the asked one is not available, the backend's pick runs.
enum class MatMulPath : uint8_t { kAuto, kStreaming, kPanel };

class Backend {
 public:
  virtual ~Backend() = default;

  // "cpu(avx512, 2 threads)" and the like, for logs.
  virtual std::string_view name() const = 0;

  // ---- Memory --------------------------------------------------------------------

  // Device memory of `size_bytes` bytes (64-byte aligned, contents unspecified).
  // Errors: ResourceExhausted when the device is out of memory.
  virtual absl::StatusOr<Buffer> Allocate(size_t size_bytes) = 0;

  // Device memory holding the `size_bytes` bytes at `host` (e.g. mmapped weights). The
  // CPU backend wraps them without copying; others copy. Either way:
  // REQUIRES: the host bytes stay valid and unchanged while the Buffer lives, and nothing
  // writes through the returned Buffer.
  virtual absl::StatusOr<Buffer> WrapHost(const void* host, size_t size_bytes) = 0;

  // Copies dst.size_bytes() bytes from host memory into dst.
  virtual absl::Status CopyToDevice(const void* host, const Tensor& dst) = 0;
  // Waits for queued work, then copies src.size_bytes() bytes of src into host memory.
  virtual absl::Status CopyToHost(const Tensor& src, void* host) = 0;
  // Device-to-device copy. REQUIRES: same size_bytes(); no partial overlap.
  virtual absl::Status Copy(const Tensor& src, const Tensor& dst) = 0;

  // Returns when all enqueued work has finished.
  virtual absl::Status Synchronize() = 0;

  // ---- Kernels ---------------------------------------------------------------------

  // out[i, :] = table[ids[i], :] converted to F32.
  // table: [vocab, d], any weight dtype. ids: I32 [n], each in [0, vocab) (an id out of
  // range is OutOfRange). out: F32 [n, d]. With an F32 table this is also a row gather
  // (e.g. picking the last hidden row of each sequence before the lm_head).
  virtual absl::Status Embedding(const Tensor& table, const Tensor& ids, const Tensor& out) = 0;

  // out[i, :] = x[i, :] / sqrt(mean(x[i, :]^2) + eps) * weight.
  // x: F32 [n, d]. weight: [d] F32/F16/BF16. out: F32 [n, d]; may alias x.
  virtual absl::Status RmsNorm(const Tensor& x, const Tensor& weight, float eps,
                               const Tensor& out) = 0;

  // Precomputes inverse frequencies for `params` (see RopeInverseFrequencies for errors).
  virtual absl::StatusOr<std::unique_ptr<RopeTable>> CreateRopeTable(const RopeParams& params) = 0;

  // Rotates each head of x in place by its row's position.
  // x: F32 [n, heads, head_dim] with head_dim == table.params().head_dim (or [n,
  // heads*head_dim]). positions: I32 [n], each >= 0.
  // Angle for pair j at position p: p * inv_freq[j] computed in f32 from double
  // inv_freq; pairs follow table.params().style. Call once for q and once for k.
  virtual absl::Status Rope(const RopeTable& table, const Tensor& x, const Tensor& positions) = 0;

  // out = x * w^T (+ bias): out[i, j] = sum_k x[i, k] * w[j, k] (+ bias[j]).
  // x: F32 [n, k], or BF16 [n, k] where MatMulTakesBf16Activations(w.dtype()) says so (k
  // even): the activations as the backend would have rounded them itself, used as they are.
  // w: [m, k], any weight dtype (k a multiple of its block). bias: nullptr
  // or F32 [m]. out: F32 [n, m]; must not alias x. Accumulates in f32, so results match
  // an f32 reference of the (decoded) weights up to summation order, except that a backend
  // may quantize activations for block-quantized weights to int8 blocks of 32 as llama.cpp
  // does (see its options, e.g. CpuBackendOptions::quantize_q8_0_activations).
  virtual absl::Status MatMul(const Tensor& x, const Tensor& w, const Tensor* bias,
                              const Tensor& out) = 0;

  // One term of MatMuls: out = x * w^T (+ bias), as MatMul's operands.
  struct MatMulTerm {
    const Tensor* w = nullptr;
    const Tensor* bias = nullptr;
    const Tensor* out = nullptr;
  };

  // MatMul of one x against several weights (a layer's q, k and v projections, or its gate
  // and up), each term under MatMul's contract and with its results, in one call: a backend
  // may prepare x once and split the rows of all the terms over its threads together, where
  // MatMul one by one would wait for its threads once per weight. No out may alias x. The
  // default runs MatMul per term, in order, stopping at the first error.
  virtual absl::Status MatMuls(const Tensor& x, std::span<const MatMulTerm> terms) {
    for (const MatMulTerm& term : terms) {
      if (absl::Status status = MatMul(x, *term.w, term.bias, *term.out); !status.ok())
        return status;
    }
    return absl::OkStatus();
  }

  // MatMul on the given path (see MatMulPath): for a compiled step, which measured both.
  // Same contract and results up to summation order.
  virtual absl::Status MatMulOnPath(const Tensor& x, const Tensor& w, const Tensor* bias,
                                    const Tensor& out, MatMulPath path) = 0;
  // Whether MatMulOnPath's kStreaming and kPanel run different kernels for the weight w
  // against `rows` activation rows (else both run the same one, and measuring them apart
  // is moot).
  virtual bool MatMulPathsDiffer(const Tensor& w, int64_t rows) const = 0;

  // Whether MatMul takes BF16 activations (rows of k even) for weights of `w_dtype`: where
  // it multiplies such weights on bf16 products, rounding F32 activations to bf16 first, a
  // caller that produces the activations can round them there (a compiled step's fused
  // kernels) and save MatMul the pass. False unless a backend says otherwise.
  virtual bool MatMulTakesBf16Activations(DType /*w_dtype*/) const { return false; }

  // Copies of MatMul weights that serve many calls (a model's matrices) in a layout of
  // the backend's own, where it has a faster one: the CPU backend lays BF16 and Q8_0
  // weights out as its GEMM panels once, so no MatMul repacks them per call. The returned
  // Buffer owns the copies (empty where the backend keeps none); while it lives, MatMul and
  // MatMulOnPath with a w equal to one of `weights` (same data, dtype and shape) read the
  // copy, with the same results up to summation order. Repeated weights are packed once.
  // REQUIRES: the weights' memory stays valid and unchanged while the Buffer lives.
  // Errors: ResourceExhausted when the copies do not fit.
  virtual absl::StatusOr<Buffer> PackMatMulWeights(std::span<const Tensor> weights) = 0;
  // Bytes PackMatMulWeights allocates for one [m, k] weight of `dtype`, without making the
  // copy: 0 where the backend keeps none (the default). Memory estimates add it up.
  virtual size_t PackedMatMulWeightBytes(DType /*dtype*/, int64_t /*m*/, int64_t /*k*/) const {
    return 0;
  }

  // out = silu(gate) * up elementwise, silu(g) = g / (1 + exp(-g)).
  // gate, up, out: F32, same element count ([n, f]). out may alias gate or up.
  virtual absl::Status SwiGlu(const Tensor& gate, const Tensor& up, const Tensor& out) = 0;

  // out = gelu_tanh(gate) * up elementwise (GeGLU, as Gemma's MLP), with PyTorch's
  // approximate="tanh" GELU: gelu_tanh(g) = 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))).
  // gate, up, out: F32, same element count. out may alias gate or up.
  virtual absl::Status GeluTanhGlu(const Tensor& gate, const Tensor& up, const Tensor& out) = 0;

  // out = x * factor elementwise (Gemma's embedding scale). x, out: F32, same element
  // count; out may alias x.
  virtual absl::Status Scale(const Tensor& x, float factor, const Tensor& out) = 0;

  // out = cap * tanh(x / cap) elementwise (logit soft-capping). cap > 0 and finite.
  // x, out: F32, same element count; out may alias x.
  virtual absl::Status SoftCap(const Tensor& x, float cap, const Tensor& out) = 0;

  // Mixture-of-experts routing, per row i of logits: p = softmax(logits[i]) in f32, the
  // top_k experts by p in descending order (ties: the lower id first) into expert_ids[i, :]
  // and their p into weights[i, :], divided by their sum when `normalize` is set
  // (Qwen3-MoE's norm_topk_prob; Mixtral's softmax over the top-k logits is the same).
  // logits: F32 [n, E]. expert_ids: I32 [n, top_k]. weights: F32 [n, top_k].
  // REQUIRES: 0 < top_k <= E.
  virtual absl::Status MoeRoute(const Tensor& logits, int64_t top_k, bool normalize,
                                const Tensor& expert_ids, const Tensor& weights) = 0;

  // Sums experts' outputs back per token: out[i, :] = the sum, in increasing j, of
  // weights[j] * y[j, :] over the j with rows[j] == i; a row no j names becomes 0.
  // y: F32 [m, d]. rows: I32 [m], each in [0, n) (else OutOfRange). weights: F32 [m].
  // out: F32 [n, d]; must not alias y.
  virtual absl::Status MoeScatterAdd(const Tensor& y, const Tensor& rows, const Tensor& weights,
                                     const Tensor& out) = 0;

  // out = a + b elementwise (residual). a, b, out: F32, same element count. out may
  // alias a or b.
  virtual absl::Status Add(const Tensor& a, const Tensor& b, const Tensor& out) = 0;

  // Scatters new keys/values into one layer's paged pools:
  // k_pool[slot / block_size, slot % block_size] = k[i] for slot = slot_ids[i]; same for v.
  // k, v: F32 [n, kv_heads, head_dim]. slot_ids: I32 [n]; a negative slot skips the row
  // (padding); otherwise slot < num_blocks * block_size (else OutOfRange).
  // k_pool, v_pool: [num_blocks, block_size, kv_heads, head_dim], F32 (the CPU backend
  // also takes F16/BF16 pools and converts on write).
  virtual absl::Status WriteKv(const Tensor& k, const Tensor& v, const Tensor& slot_ids,
                               const Tensor& k_pool, const Tensor& v_pool) = 0;

  // Causal grouped-query attention over paged K/V for a batch that mixes prefill chunks
  // and decode tokens: for each sequence s and query row r of s, head h,
  //   out[r, h] = softmax_p(scale * q[r, h] . K[p, h / (heads / kv_heads)]) . V[p, ...]
  // over the KV positions p the row may see (see AttentionSequence). Softmax is computed
  // in a numerically stable (online) way with f32 accumulation.
  // window: 0 for full causal attention, else the sliding window W > 0: a query at
  // position t sees positions p with t - W < p <= t. This is Hugging Face's
  // `sliding_window` (Mistral: kv_idx > q_idx - sliding_window) and flash-attn's / vLLM's
  // window_size = (W - 1, 0). Blocks wholly before a row's window are not read.
  // q: F32 [n, heads, head_dim]. k_pool, v_pool: as in WriteKv. out: F32 [n, heads,
  // head_dim]; must not alias q. heads % kv_heads == 0. Rows of q that no sequence covers
  // are left untouched. Errors: a negative window, a sequence whose rows fall outside q,
  // q_len > context_len, a block table too short, or a block id outside the pool (among
  // the blocks the sequence's rows see).
  virtual absl::Status PagedAttention(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool,
                                      std::span<const AttentionSequence> sequences, float scale,
                                      int64_t window, const Tensor& out) = 0;

  // ---- Generated code --------------------------------------------------------------

  // A kernel generated for this backend's host and built into a loadable object
  // (compile/row_kernels.h): it processes rows [begin, end) of its operands, whose data
  // pointers it gets in its own order.
  using RowKernel = void (*)(void* const* operands, int64_t begin, int64_t end);

  // Whether RunRowKernel runs kernels (false by default).
  virtual bool RunsRowKernels() const { return false; }

  // Runs `kernel` over rows [0, rows), split over the backend's threads as its own row-wise
  // kernels are; `work_per_row` (scalar operations, roughly) sizes the split. Returns when
  // every row is done. Unimplemented (the default) where the backend's memory is not the
  // host's.
  virtual absl::Status RunRowKernel(RowKernel /*kernel*/, std::span<void* const> /*operands*/,
                                    int64_t /*rows*/, int64_t /*work_per_row*/) {
    return absl::UnimplementedError("this backend runs no generated host kernels");
  }
};

}  // namespace switchyard::runtime
