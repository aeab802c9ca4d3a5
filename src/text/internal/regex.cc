#define PCRE2_CODE_UNIT_WIDTH 8
#include "text/internal/regex.h"

#include <vector>

#include "fmt/format.h"
#include <pcre2.h>

#include "text/internal/unicode.h"

namespace switchyard::text::internal {
namespace {

// The Unicode White_Space property, as a class body.
constexpr std::string_view kWhiteSpaceBody =
    "\\t\\n\\x{0B}\\f\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}"
    "\\x{202F}\\x{205F}\\x{3000}";

constexpr size_t kJitStackMax = 16 << 20;

pcre2_jit_stack* ThreadJitStack(void*) {
  // One stack per thread, reclaimed at thread exit.
  struct Holder {
    pcre2_jit_stack* stack = pcre2_jit_stack_create(32 << 10, kJitStackMax, nullptr);
    ~Holder() { pcre2_jit_stack_free(stack); }
  };
  thread_local Holder holder;
  return holder.stack;
}

}  // namespace

namespace {

// A \p or \P escape: the category it names, its length in the pattern, whether it is negated.
struct Property {
  std::string_view name;  // empty when the braces are unclosed
  size_t length;
  bool negated;
};

// REQUIRES: p[i] == '\\', p[i + 1] is 'p' or 'P', i + 2 < p.size().
Property ParseProperty(std::string_view p, size_t i) {
  std::string_view name = p.substr(i + 2, 1);  // \pL
  size_t end = i + 3;
  if (p[i + 2] == '{') {
    const size_t close = p.find('}', i + 3);
    if (close == std::string_view::npos)
      return {{}, p.size() - i, false};
    name = p.substr(i + 3, close - i - 3);
    end = close + 1;
  }
  const bool caret = name.starts_with('^');  // \p{^Lu} is \P{Lu}
  return {name.substr(caret ? 1 : 0), end - i, (p[i + 1] == 'P') != caret};
}

// `atom` (one character wide) widened by `added`, a class body of 15.0-16.0 additions. The
// additions stay in a class of their own: PCRE2's JIT bounds-checks a class of plain ranges
// before testing them, while one that also holds a property tests every range for every
// character (2.5x slower on gpt-oss's pattern).
void AppendWidened(std::string_view atom, bool negated, const std::string& added,
                   std::string* out) {
  if (added.empty())
    out->append(atom);
  else if (negated)
    out->append(fmt::format("(?:(?![{}]){})", added, atom));
  else
    out->append(fmt::format("(?:{}|[{}])", atom, added));
}

// Rewrites the class opening at p[start] == '['; returns the index just past it.
size_t RewriteClass(std::string_view p, size_t start, std::string* out) {
  size_t i = start + 1;
  const bool negated = i < p.size() && p[i] == '^';
  if (negated)
    ++i;
  std::string body;
  std::vector<std::string_view> categories;
  bool subtracts = false;  // a \P inside: PCRE2 cannot subtract the additions there
  for (bool first = true; i < p.size(); ++i, first = false) {
    const char c = p[i];
    if (c == ']' && !first)  // a ']' first in the class is a literal
      break;
    if (c == '[' && i + 1 < p.size() && p[i + 1] == ':') {  // [:alpha:]
      const size_t close = p.find(":]", i + 2);
      if (close != std::string_view::npos) {
        body.append(p.substr(i, close + 2 - i));
        i = close + 1;
        continue;
      }
    }
    if (c == '\\' && i + 1 < p.size()) {
      const char n = p[i + 1];
      if (n == 's') {
        body.append(kWhiteSpaceBody);
        ++i;
      } else if ((n == 'p' || n == 'P') && i + 2 < p.size()) {
        const Property property = ParseProperty(p, i);
        if (property.negated)
          subtracts = true;
        else
          categories.push_back(property.name);
        body.append(p.substr(i, property.length));
        i += property.length - 1;
      } else {
        body.append(p.substr(i, 2));
        ++i;
      }
      continue;
    }
    body.push_back(c);
  }
  if (i >= p.size()) {  // unclosed: left as written for PCRE2 to report
    out->append(p.substr(start));
    return p.size();
  }
  const std::string added = subtracts ? std::string() : ClassBodyAddedSince14(categories);
  AppendWidened(fmt::format("[{}{}]", negated ? "^" : "", body), negated, added, out);
  return i + 1;
}

}  // namespace

std::string RewriteUnicodeClasses(std::string_view p) {
  std::string out;
  out.reserve(p.size() + 64);
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '[') {
      i = RewriteClass(p, i, &out) - 1;
      continue;
    }
    if (c != '\\' || i + 1 == p.size()) {
      out.push_back(c);
      continue;
    }
    const char n = p[i + 1];
    if (n == 's' || n == 'S') {
      out.append(n == 's' ? "[" : "[^").append(kWhiteSpaceBody).append("]");
      ++i;
    } else if ((n == 'p' || n == 'P') && i + 2 < p.size()) {
      const Property property = ParseProperty(p, i);
      const std::string_view name = property.name;
      AppendWidened(p.substr(i, property.length), property.negated,
                    ClassBodyAddedSince14({&name, 1}), &out);
      i += property.length - 1;
    } else {
      out.append(p.substr(i, 2));
      ++i;
    }
  }
  return out;
}

absl::StatusOr<std::unique_ptr<Regex>> Regex::Compile(std::string_view pattern, Engine engine) {
  std::unique_ptr<Regex> re(new Regex());
  re->pattern_ = std::string(pattern);
  if (engine == Engine::kAuto) {
    re->known_ = RecognizeSplitPattern(pattern);
    if (re->known_)
      return re;
  }
  std::string rewritten = RewriteUnicodeClasses(pattern);
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  re->code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(rewritten.data()), rewritten.size(),
                            PCRE2_UTF | PCRE2_UCP, &error_code, &error_offset, nullptr);
  if (re->code_ == nullptr) {
    PCRE2_UCHAR buffer[256];
    pcre2_get_error_message(error_code, buffer, sizeof(buffer));
    return absl::InvalidArgumentError(
        fmt::format("invalid regex {:?}: {} (at offset {})", std::string(pattern),
                    reinterpret_cast<const char*>(buffer), static_cast<size_t>(error_offset)));
  }
  // JIT is an optimisation; the interpreter gives the same matches when it is unavailable.
  pcre2_jit_compile(re->code_, PCRE2_JIT_COMPLETE);
  re->match_context_ = pcre2_match_context_create(nullptr);
  pcre2_jit_stack_assign(re->match_context_, &ThreadJitStack, nullptr);
  return re;
}

Regex::~Regex() {
  pcre2_match_context_free(match_context_);
  pcre2_code_free(code_);
}

absl::Status Regex::FindAll(std::string_view s, ByteRanges* matches) const {
  if (known_) {
    FindKnownSplits(*known_, s, matches);
    return absl::OkStatus();
  }
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(code_, nullptr);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(s.data());
  size_t pos = 0;
  absl::Status status;
  while (pos <= s.size()) {
    int rc = pcre2_match(code_, subject, s.size(), pos, PCRE2_NO_UTF_CHECK, md, match_context_);
    if (rc == PCRE2_ERROR_NOMATCH)
      break;
    if (rc < 0) {
      PCRE2_UCHAR buffer[256];
      pcre2_get_error_message(rc, buffer, sizeof(buffer));
      status = absl::ResourceExhaustedError(fmt::format("regex {:?} failed on a {}-byte input: {}",
                                                        pattern_, s.size(),
                                                        reinterpret_cast<const char*>(buffer)));
      break;
    }
    PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    size_t begin = ov[0], end = ov[1];
    matches->emplace_back(begin, end);
    if (end > begin) {
      pos = end;
    } else {
      if (end >= s.size())
        break;
      pos = end + 1;
      while (pos < s.size() && (static_cast<unsigned char>(s[pos]) & 0xC0) == 0x80)
        ++pos;
    }
  }
  pcre2_match_data_free(md);
  return status;
}

}  // namespace switchyard::text::internal
