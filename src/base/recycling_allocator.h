// RecyclingAllocator: a standard allocator that keeps the blocks of T freed on a thread and
// hands them out again on that thread, for objects made and dropped per request by the
// thousand per second (a proxied call, its upstream call, its responder; through
// std::allocate_shared). glibc's malloc caches only 7 freed blocks per size class per thread;
// with dozens of requests in flight, the rest of a burst of frees goes to its unsorted bins,
// and the next allocations pay for sorting them. Here each thread keeps up to kMaxKept blocks
// per type.
//
// Only single objects are recycled (arrays go to operator new). A block freed on another
// thread than the one that allocated it joins the freeing thread's list. Under ASan and TSan
// every block goes back to the heap, so that the sanitizers see each object's lifetime.
//
// Threads: any; each thread has its own lists, freed when the thread exits.
#pragma once

#include <cstddef>
#include <new>
#include <vector>

namespace switchyard::base {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SY_RECYCLING_ALLOCATOR_KEEPS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SY_RECYCLING_ALLOCATOR_KEEPS 0
#endif
#endif
#ifndef SY_RECYCLING_ALLOCATOR_KEEPS
#define SY_RECYCLING_ALLOCATOR_KEEPS 1
#endif

template <typename T>
class RecyclingAllocator {
 public:
  using value_type = T;

  static constexpr size_t kMaxKept = SY_RECYCLING_ALLOCATOR_KEEPS ? 256 : 0;

  RecyclingAllocator() = default;
  template <typename U>
  RecyclingAllocator(const RecyclingAllocator<U>& /*other*/) {}  // NOLINT: rebinding

  T* allocate(size_t n) {
    if (KeptBlocks* kept = n == 1 ? Kept() : nullptr; kept != nullptr && !kept->blocks.empty()) {
      void* block = kept->blocks.back();
      kept->blocks.pop_back();
      return static_cast<T*>(block);
    }
    return static_cast<T*>(::operator new(n * sizeof(T)));
  }

  void deallocate(T* p, size_t n) {
    if (KeptBlocks* kept = n == 1 ? Kept() : nullptr;
        kept != nullptr && kept->blocks.size() < kMaxKept) {
      kept->blocks.push_back(p);
      return;
    }
    ::operator delete(p);
  }

  template <typename U>
  bool operator==(const RecyclingAllocator<U>& /*other*/) const {
    return true;
  }

 private:
  struct KeptBlocks {
    explicit KeptBlocks(bool* gone_flag) : gone(gone_flag) { blocks.reserve(kMaxKept); }
    ~KeptBlocks() {
      *gone = true;
      for (void* block : blocks)
        ::operator delete(block);
    }
    bool* const gone;
    std::vector<void*> blocks;
  };

  // The calling thread's kept blocks of T; null once the thread's exit destroyed them (a
  // block freed later goes to the heap).
  static KeptBlocks* Kept() {
    thread_local bool gone = false;  // trivially destructible: readable until the thread ends
    if (kMaxKept == 0 || gone)
      return nullptr;
    thread_local KeptBlocks kept(&gone);
    return &kept;
  }
};

}  // namespace switchyard::base
