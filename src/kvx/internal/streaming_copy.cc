#include "kvx/internal/streaming_copy.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace switchyard::kvx::internal {

#if defined(__SSE2__)

void StreamingCopy(std::byte* dst, const std::byte* src, size_t bytes) {
  // Plain stores up to dst's first 16-byte boundary; non-temporal stores need it aligned.
  const size_t head = std::min(bytes, (0 - reinterpret_cast<uintptr_t>(dst)) & 15);
  std::memcpy(dst, src, head);
  size_t i = head;
  // A cache line per step: four loads, then four stores that fill one write-combining buffer.
  for (; i + 64 <= bytes; i += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 32));
    const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 48), d);
  }
  for (; i + 16 <= bytes; i += 16)
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
  std::memcpy(dst + i, src + i, bytes - i);
}

void StreamingCopyFence() {
  _mm_sfence();
}

#else

void StreamingCopy(std::byte* dst, const std::byte* src, size_t bytes) {
  std::memcpy(dst, src, bytes);
}

void StreamingCopyFence() {}

#endif

}  // namespace switchyard::kvx::internal
