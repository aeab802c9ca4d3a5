#include "structured/char_class.h"

#include <algorithm>
#include <array>
#include <string>

#include "absl/container/flat_hash_map.h"

#include "base/utf8.h"

namespace switchyard::structured {
namespace {

constexpr uint32_t kSurrogateLo = 0xD800;
constexpr uint32_t kSurrogateHi = 0xDFFF;

// The code points of one UTF-8 length whose encodings are a product of byte ranges:
// position i takes any byte in [lo[i], hi[i]].
struct ByteRanges {
  size_t len = 0;
  std::array<uint8_t, 4> lo{};
  std::array<uint8_t, 4> hi{};
};

// Splits [lo, hi] (no surrogates) into ranges whose encodings are byte-range products: first
// where the encoded length changes, then wherever a range starts or ends inside the span of
// one lead (or continuation) byte value.
void Split(uint32_t lo, uint32_t hi, std::vector<ByteRanges>* out) {
  for (uint32_t last : {0x7Fu, 0x7FFu, 0xFFFFu}) {
    if (lo <= last && hi > last) {
      Split(lo, last, out);
      Split(last + 1, hi, out);
      return;
    }
  }
  std::string first;
  std::string second;
  base::AppendUtf8(lo, &first);
  base::AppendUtf8(hi, &second);
  const size_t len = first.size();
  for (size_t i = 1; i < len; ++i) {
    const uint32_t low_bits = (1u << (6 * i)) - 1;  // the payload of the last i bytes
    if ((lo & ~low_bits) == (hi & ~low_bits))
      continue;
    if ((lo & low_bits) != 0) {
      Split(lo, lo | low_bits, out);
      Split((lo | low_bits) + 1, hi, out);
      return;
    }
    if ((hi & low_bits) != low_bits) {
      Split(lo, (hi & ~low_bits) - 1, out);
      Split(hi & ~low_bits, hi, out);
      return;
    }
  }
  ByteRanges r;
  r.len = len;
  for (size_t i = 0; i < len; ++i) {
    r.lo[i] = static_cast<uint8_t>(first[i]);
    r.hi[i] = static_cast<uint8_t>(second[i]);
  }
  out->push_back(r);
}

}  // namespace

std::vector<CodeRange> NormalizeClass(std::vector<CodeRange> ranges) {
  std::sort(ranges.begin(), ranges.end(),
            [](const CodeRange& a, const CodeRange& b) { return a.lo < b.lo; });
  std::vector<CodeRange> merged;
  for (const CodeRange& r : ranges) {
    if (!merged.empty() && r.lo <= merged.back().hi + 1) {
      merged.back().hi = std::max(merged.back().hi, r.hi);
    } else {
      merged.push_back(r);
    }
  }
  std::vector<CodeRange> out;
  out.reserve(merged.size() + 1);
  for (const CodeRange& r : merged) {
    if (r.hi < kSurrogateLo || r.lo > kSurrogateHi) {
      out.push_back(r);
      continue;
    }
    if (r.lo < kSurrogateLo)
      out.push_back({r.lo, kSurrogateLo - 1});
    if (r.hi > kSurrogateHi)
      out.push_back({kSurrogateHi + 1, r.hi});
  }
  return out;
}

std::vector<CodeRange> ComplementClass(std::span<const CodeRange> ranges) {
  std::vector<CodeRange> gaps;
  uint32_t next = 0;
  for (const CodeRange& r : ranges) {
    if (r.lo > next)
      gaps.push_back({next, r.lo - 1});
    next = r.hi + 1;
  }
  if (next <= kMaxCodePoint)
    gaps.push_back({next, kMaxCodePoint});
  return NormalizeClass(std::move(gaps));
}

std::vector<CodeRange> ShorthandClass(char c) {
  std::vector<CodeRange> ranges;
  switch (c) {
    case 'd':
    case 'D':
      ranges = {{'0', '9'}};
      break;
    case 'w':
    case 'W':
      ranges = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
      break;
    default:  // s, S
      ranges = {{'\t', '\r'}, {' ', ' '}};
      break;
  }
  return c >= 'a' ? ranges : ComplementClass(ranges);
}

void AddClass(GrammarBuilder* b, std::span<const CodeRange> ranges, int32_t from, int32_t to) {
  std::vector<ByteRanges> products;
  for (const CodeRange& r : ranges)
    Split(r.lo, r.hi, &products);
  // cont[k]: the state from which k continuation bytes (any of 0x80-0xBF) lead to `to`,
  // shared by every sequence that ends that way.
  std::array<int32_t, 4> cont = {to, -1, -1, -1};
  const auto continuation = [&](size_t k) {
    for (size_t j = 1; j <= k; ++j) {
      if (cont[j] < 0) {
        cont[j] = b->NewState();
        b->AddBytes(cont[j], 0x80, 0xBF, cont[j - 1]);
      }
    }
    return cont[k];
  };
  // Sequences that share leading byte ranges share states (a trie keyed by state and range).
  absl::flat_hash_map<uint64_t, int32_t> trie;
  for (const ByteRanges& p : products) {
    size_t tail = 0;
    while (tail + 1 < p.len && p.lo[p.len - 1 - tail] == 0x80 && p.hi[p.len - 1 - tail] == 0xBF)
      ++tail;
    const size_t head = p.len - tail;
    int32_t at = from;
    for (size_t i = 0; i + 1 < head; ++i) {
      const uint64_t key = (static_cast<uint64_t>(at) << 16) | (uint64_t{p.lo[i]} << 8) | p.hi[i];
      auto [it, fresh] = trie.try_emplace(key, 0);
      if (fresh) {
        it->second = b->NewState();
        b->AddBytes(at, p.lo[i], p.hi[i], it->second);
      }
      at = it->second;
    }
    b->AddBytes(at, p.lo[head - 1], p.hi[head - 1], continuation(tail));
  }
}

}  // namespace switchyard::structured
