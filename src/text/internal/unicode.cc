#include "text/internal/unicode.h"

#include <algorithm>
#include <array>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "fmt/format.h"

#include "base/utf8.h"
#include "text/internal/unicode_tables.h"

namespace switchyard::text::internal {
namespace {

constexpr uint32_t kMaxCodePoint = 0x10FFFF;

// Two-level lookup built once from the run-length table: block index per 256 code points,
// blocks deduplicated.
struct CategoryTable {
  std::vector<uint16_t> block_of;
  std::vector<std::array<uint8_t, 256>> blocks;

  CategoryTable() {
    std::vector<uint8_t> flat(kMaxCodePoint + 1, 0);
    for (size_t i = 0; i < kNumCategoryRuns; ++i) {
      const CategoryRun& r = kCategoryRuns[i];
      std::fill(flat.begin() + r.first, flat.begin() + r.last + 1, r.flags);
    }
    block_of.resize((kMaxCodePoint + 1) / 256);
    absl::flat_hash_map<std::string, uint16_t> index;
    for (size_t b = 0; b < block_of.size(); ++b) {
      std::string key(flat.begin() + b * 256, flat.begin() + (b + 1) * 256);
      auto [it, inserted] = index.emplace(std::move(key), blocks.size());
      if (inserted) {
        blocks.emplace_back();
        std::copy(flat.begin() + b * 256, flat.begin() + (b + 1) * 256, blocks.back().begin());
      }
      block_of[b] = it->second;
    }
  }
};

const CategoryTable& GetCategoryTable() {
  static const CategoryTable* table = new CategoryTable();
  return *table;
}

uint8_t CombiningClass(uint32_t cp) {
  if (cp < 0x300)
    return 0;
  size_t lo = 0, hi = kNumCccRuns;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (kCccRuns[mid].last < cp) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  if (lo < kNumCccRuns && kCccRuns[lo].first <= cp)
    return kCccRuns[lo].ccc;
  return 0;
}

const Mapping* FindMapping(const Mapping* table, size_t n, uint32_t cp) {
  const Mapping* end = table + n;
  const Mapping* it = std::lower_bound(
      table, end, cp, [](const Mapping& m, uint32_t c) { return m.code_point < c; });
  if (it != end && it->code_point == cp)
    return it;
  return nullptr;
}

constexpr uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr uint32_t kLCount = 19, kVCount = 21, kTCount = 28;
constexpr uint32_t kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

std::vector<uint32_t> Decompose(std::string_view s, bool compat) {
  const Mapping* table = compat ? kCompatDecompositions : kCanonicalDecompositions;
  size_t n = compat ? kNumCompatDecompositions : kNumCanonicalDecompositions;
  std::vector<uint32_t> out;
  out.reserve(s.size());
  size_t pos = 0;
  while (pos < s.size()) {
    uint32_t cp = NextCodePoint(s, &pos);
    if (cp >= kSBase && cp < kSBase + kSCount) {
      uint32_t index = cp - kSBase;
      out.push_back(kLBase + index / kNCount);
      out.push_back(kVBase + (index % kNCount) / kTCount);
      if (index % kTCount != 0)
        out.push_back(kTBase + index % kTCount);
      continue;
    }
    const Mapping* m = cp < 0xA0 ? nullptr : FindMapping(table, n, cp);
    if (m == nullptr) {
      out.push_back(cp);
    } else {
      out.insert(out.end(), kMappingPool + m->offset, kMappingPool + m->offset + m->length);
    }
  }
  // Canonical ordering: stable sort of each run of non-starters by combining class.
  for (size_t i = 0; i < out.size();) {
    if (CombiningClass(out[i]) == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < out.size() && CombiningClass(out[j]) != 0)
      ++j;
    std::stable_sort(out.begin() + i, out.begin() + j,
                     [](uint32_t a, uint32_t b) { return CombiningClass(a) < CombiningClass(b); });
    i = j;
  }
  return out;
}

uint32_t ComposePair(uint32_t a, uint32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount) {
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  }
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase &&
      b < kTBase + kTCount) {
    return a + (b - kTBase);
  }
  const Composition* end = kCompositions + kNumCompositions;
  const Composition* it =
      std::lower_bound(kCompositions, end, std::make_pair(a, b),
                       [](const Composition& c, const std::pair<uint32_t, uint32_t>& key) {
                         return std::make_pair(c.first, c.second) < key;
                       });
  if (it != end && it->first == a && it->second == b)
    return it->composite;
  return 0;
}

void Compose(std::vector<uint32_t>* cps) {
  std::vector<uint32_t>& v = *cps;
  if (v.empty())
    return;
  size_t out = 0;
  long starter = -1;
  uint8_t last_cc = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    uint32_t c = v[i];
    uint8_t cc = CombiningClass(c);
    if (starter >= 0 && (last_cc == 0 ? out == static_cast<size_t>(starter) + 1 : last_cc < cc)) {
      uint32_t composite = ComposePair(v[starter], c);
      if (composite != 0) {
        v[starter] = composite;
        continue;
      }
    }
    if (cc == 0) {
      starter = static_cast<long>(out);
      last_cc = 0;
    } else {
      last_cc = cc;
    }
    v[out++] = c;
  }
  v.resize(out);
}

bool AllBelow(std::string_view s, unsigned char limit_lead) {
  for (char ch : s) {
    if (static_cast<unsigned char>(ch) >= limit_lead)
      return false;
  }
  return true;
}

std::string Normalize(std::string_view s, bool compat, bool compose) {
  // ASCII is invariant under every form; text below U+0300 (lead bytes < 0xCC) is already
  // NFC, since nothing there decomposes differently or composes with a neighbour.
  if (AllBelow(s, compose && !compat ? 0xCC : 0x80))
    return std::string(s);
  std::vector<uint32_t> cps = Decompose(s, compat);
  if (compose)
    Compose(&cps);
  std::string out;
  out.reserve(s.size());
  for (uint32_t cp : cps)
    base::AppendUtf8(cp, &out);
  return out;
}

}  // namespace

uint32_t NextCodePoint(std::string_view s, size_t* pos) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data()) + *pos;
  uint32_t c = p[0];
  if (c < 0x80) {
    *pos += 1;
    return c;
  }
  if (c < 0xE0) {
    *pos += 2;
    return ((c & 0x1F) << 6) | (p[1] & 0x3F);
  }
  if (c < 0xF0) {
    *pos += 3;
    return ((c & 0x0F) << 12) | ((p[1] & 0x3F) << 6) | (p[2] & 0x3F);
  }
  *pos += 4;
  return ((c & 0x07) << 18) | ((p[1] & 0x3F) << 12) | ((p[2] & 0x3F) << 6) | (p[3] & 0x3F);
}

uint8_t CategoryFlags(uint32_t cp) {
  if (cp > kMaxCodePoint)
    return 0;
  const CategoryTable& t = GetCategoryTable();
  return t.blocks[t.block_of[cp >> 8]][cp & 0xFF];
}

bool IsWhitespace(uint32_t cp) {
  switch (cp) {
    case 0x20:
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x2000 && cp <= 0x200A);
  }
}

bool IsPunctuation(uint32_t cp) {
  if (cp < 0x80) {
    return (cp >= 0x21 && cp <= 0x2F) || (cp >= 0x3A && cp <= 0x40) || (cp >= 0x5B && cp <= 0x60) ||
           (cp >= 0x7B && cp <= 0x7E);
  }
  return (CategoryFlags(cp) & kCatPunct) != 0;
}

bool IsAlphanumeric(uint32_t cp) {
  return (CategoryFlags(cp) & (kCatLetter | kCatNumber | kCatMark)) != 0;
}

std::string ClassBodyAddedSince14(std::span<const std::string_view> categories) {
  auto wanted = [&](std::string_view category) {
    for (std::string_view name : categories) {
      if (!name.empty() && name.size() <= 2 && category.substr(0, name.size()) == name)
        return true;
    }
    return false;
  };
  // Adjacent runs (Lo next to Lu for \p{L}) merge: fewer ranges for PCRE2 to test.
  std::vector<std::pair<uint32_t, uint32_t>> ranges;
  for (size_t i = 0; i < kNumChangedSince14; ++i) {
    const GeneralCategoryRun& run = kChangedSince14[i];
    if (!wanted(run.category))
      continue;
    if (!ranges.empty() && ranges.back().second + 1 == run.first)
      ranges.back().second = run.last;
    else
      ranges.emplace_back(run.first, run.last);
  }
  std::string body;
  for (const auto& [first, last] : ranges) {
    body += fmt::format("\\x{{{:X}}}", first);
    if (last != first)
      body += fmt::format("-\\x{{{:X}}}", last);
  }
  return body;
}

std::string NormalizeNfc(std::string_view s) {
  return Normalize(s, false, true);
}
std::string NormalizeNfkc(std::string_view s) {
  return Normalize(s, true, true);
}
std::string NormalizeNfd(std::string_view s) {
  return Normalize(s, false, false);
}
std::string NormalizeNfkd(std::string_view s) {
  return Normalize(s, true, false);
}

std::string ToLower(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  while (pos < s.size()) {
    unsigned char b = static_cast<unsigned char>(s[pos]);
    if (b < 0x80) {
      out.push_back(static_cast<char>(b >= 'A' && b <= 'Z' ? b + 32 : b));
      ++pos;
      continue;
    }
    size_t start = pos;
    uint32_t cp = NextCodePoint(s, &pos);
    const Mapping* m = FindMapping(kLowercase, kNumLowercase, cp);
    if (m == nullptr) {
      out.append(s.substr(start, pos - start));
    } else {
      for (uint32_t i = 0; i < m->length; ++i)
        base::AppendUtf8(kMappingPool[m->offset + i], &out);
    }
  }
  return out;
}

}  // namespace switchyard::text::internal
