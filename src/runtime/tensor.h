// Tensor: a non-owning view of a dense, contiguous, row-major array (rank 0..4, outermost
// dimension first) in some backend's memory. Buffer: an owning handle to a backend
// allocation, freed (through the backend that made it) when destroyed.
//
// A Tensor is a plain value: copying it copies the view, never the data. Whoever owns the
// Buffer it points into must keep it alive while the view is used. Neither type is
// thread-safe; distinct objects may be used from distinct threads.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <span>
#include <string>

#include "runtime/dtype.h"

namespace switchyard::runtime {

inline constexpr int kMaxRank = 4;

// Which memory a pointer refers to. The CPU backend's device memory is host memory, so it
// accepts both; an accelerator backend accepts only kDevice in kernels.
enum class MemorySpace : uint8_t { kHost, kDevice };

class Tensor {
 public:
  Tensor() = default;
  // REQUIRES: shape.size() <= kMaxRank, every dim >= 0, and the last dim a multiple of
  // DTypeBlockElems(dtype) (so Q8_0 rows are whole blocks).
  Tensor(DType dtype, std::span<const int64_t> shape, void* data,
         MemorySpace space = MemorySpace::kDevice);
  Tensor(DType dtype, std::initializer_list<int64_t> shape, void* data,
         MemorySpace space = MemorySpace::kDevice);

  DType dtype() const { return dtype_; }
  int rank() const { return rank_; }
  std::span<const int64_t> shape() const { return {dims_.data(), static_cast<size_t>(rank_)}; }
  // REQUIRES: 0 <= i < rank(). Negative i counts from the end (-1 = innermost).
  int64_t dim(int i) const { return dims_[static_cast<size_t>(i < 0 ? rank_ + i : i)]; }
  void* data() const { return data_; }
  template <typename T>
  T* data_as() const {
    return static_cast<T*>(data_);
  }
  MemorySpace space() const { return space_; }

  int64_t num_elements() const;
  // Size of the innermost dimension (1 for rank 0).
  int64_t cols() const { return rank_ == 0 ? 1 : dims_[static_cast<size_t>(rank_ - 1)]; }
  // Product of all dimensions but the innermost (1 for rank <= 1).
  int64_t rows() const;
  size_t row_bytes() const { return RowBytes(dtype_, cols()); }
  size_t size_bytes() const { return static_cast<size_t>(rows()) * row_bytes(); }

  // Same data, another shape. REQUIRES: same element count; last dim a multiple of the
  // dtype's block size.
  Tensor Reshaped(std::initializer_list<int64_t> shape) const;
  // Rows [begin, begin + count) of the outermost dimension.
  // REQUIRES: rank() >= 1, 0 <= begin, begin + count <= dim(0).
  Tensor Slice(int64_t begin, int64_t count) const;

  // "BF16[2048, 8192]" for messages.
  std::string DebugString() const;

 private:
  DType dtype_ = DType::kF32;
  int rank_ = 0;
  std::array<int64_t, kMaxRank> dims_{};
  void* data_ = nullptr;
  MemorySpace space_ = MemorySpace::kDevice;
};

// Move-only owner of one backend allocation (or of nothing). Backends construct these;
// model code receives them from Backend::Allocate / Backend::WrapHost.
class Buffer {
 public:
  using Releaser = std::function<void(void* data, size_t size_bytes)>;

  Buffer() = default;
  // For backends: `release` is called once with (data, size_bytes) on destruction.
  Buffer(void* data, size_t size_bytes, MemorySpace space, Releaser release);
  ~Buffer();
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return data_; }
  size_t size_bytes() const { return size_bytes_; }
  MemorySpace space() const { return space_; }

  // A view of this buffer's bytes from byte `offset`.
  // REQUIRES: offset + the view's size_bytes() <= size_bytes(); offset keeps the dtype's
  // alignment (4 for F32/I32, 2 otherwise).
  Tensor View(DType dtype, std::initializer_list<int64_t> shape, size_t offset = 0) const;
  Tensor View(DType dtype, std::span<const int64_t> shape, size_t offset = 0) const;

 private:
  void Reset();

  void* data_ = nullptr;
  size_t size_bytes_ = 0;
  MemorySpace space_ = MemorySpace::kDevice;
  Releaser release_;
};

}  // namespace switchyard::runtime
