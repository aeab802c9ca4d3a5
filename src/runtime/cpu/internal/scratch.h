// Per-thread scratch for kernels: a thread_local vector that grows once to the largest size
// asked for and is reused by every later call, so steady-state calls allocate nothing.
#pragma once

#include <cstddef>
#include <vector>

namespace switchyard::runtime::cpu {

// v's data, after growing v to at least `size` elements (never shrinking it).
template <typename T>
T* Grow(std::vector<T>& v, size_t size) {
  if (v.size() < size)
    v.resize(size);
  return v.data();
}

}  // namespace switchyard::runtime::cpu
