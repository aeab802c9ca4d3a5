#include "runtime/tensor.h"

#include <utility>

#include "fmt/format.h"

#include "base/logging.h"

namespace switchyard::runtime {

Tensor::Tensor(DType dtype, std::span<const int64_t> shape, void* data, MemorySpace space)
    : dtype_(dtype), rank_(static_cast<int>(shape.size())), data_(data), space_(space) {
  SY_CHECK(shape.size() <= static_cast<size_t>(kMaxRank));
  for (size_t i = 0; i < shape.size(); ++i) {
    SY_CHECK(shape[i] >= 0);
    dims_[i] = shape[i];
  }
  SY_CHECK(cols() % DTypeBlockElems(dtype) == 0);
}

Tensor::Tensor(DType dtype, std::initializer_list<int64_t> shape, void* data, MemorySpace space)
    : Tensor(dtype, std::span<const int64_t>(shape.begin(), shape.size()), data, space) {}

int64_t Tensor::num_elements() const {
  return rows() * cols();
}

int64_t Tensor::rows() const {
  int64_t rows = 1;
  for (int i = 0; i + 1 < rank_; ++i)
    rows *= dims_[static_cast<size_t>(i)];
  return rows;
}

Tensor Tensor::Reshaped(std::initializer_list<int64_t> shape) const {
  Tensor result(dtype_, shape, data_, space_);
  SY_CHECK(result.num_elements() == num_elements());
  return result;
}

Tensor Tensor::Slice(int64_t begin, int64_t count) const {
  SY_CHECK(rank_ >= 1 && begin >= 0 && count >= 0 && begin + count <= dims_[0]);
  Tensor result = *this;
  result.dims_[0] = count;
  const size_t outer_bytes = dims_[0] == 0 ? 0 : size_bytes() / static_cast<size_t>(dims_[0]);
  result.data_ = static_cast<char*>(data_) + static_cast<size_t>(begin) * outer_bytes;
  return result;
}

std::string Tensor::DebugString() const {
  std::string out = fmt::format("{}[", DTypeName(dtype_));
  for (int i = 0; i < rank_; ++i) {
    out += fmt::format("{}{}", i == 0 ? "" : ", ", dims_[static_cast<size_t>(i)]);
  }
  out += "]";
  return out;
}

Buffer::Buffer(void* data, size_t size_bytes, MemorySpace space, Releaser release)
    : data_(data), size_bytes_(size_bytes), space_(space), release_(std::move(release)) {}

Buffer::~Buffer() {
  Reset();
}

Buffer::Buffer(Buffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_bytes_(std::exchange(other.size_bytes_, 0)),
      space_(other.space_),
      release_(std::exchange(other.release_, nullptr)) {}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    Reset();
    data_ = std::exchange(other.data_, nullptr);
    size_bytes_ = std::exchange(other.size_bytes_, 0);
    space_ = other.space_;
    release_ = std::exchange(other.release_, nullptr);
  }
  return *this;
}

void Buffer::Reset() {
  if (release_)
    release_(data_, size_bytes_);
  release_ = nullptr;
  data_ = nullptr;
  size_bytes_ = 0;
}

Tensor Buffer::View(DType dtype, std::initializer_list<int64_t> shape, size_t offset) const {
  return View(dtype, std::span<const int64_t>(shape.begin(), shape.size()), offset);
}

Tensor Buffer::View(DType dtype, std::span<const int64_t> shape, size_t offset) const {
  Tensor view(dtype, shape, static_cast<char*>(data_) + offset, space_);
  SY_CHECK(offset + view.size_bytes() <= size_bytes_);
  return view;
}

}  // namespace switchyard::runtime
