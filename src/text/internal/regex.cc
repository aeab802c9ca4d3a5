#define PCRE2_CODE_UNIT_WIDTH 8
#include "text/internal/regex.h"

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

std::string RewriteUnicodeClasses(std::string_view p) {
  std::string out;
  out.reserve(p.size() + 64);
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      char n = p[i + 1];
      if ((n == 'p' || n == 'P') && i + 2 < p.size()) {
        // \pL or \p{Lu}; \p{^Lu} means \P{Lu}.
        size_t end = i + 3;
        std::string_view name = p.substr(i + 2, 1);
        if (p[i + 2] == '{') {
          end = p.find('}', i + 3);
          // Unclosed: left as written for PCRE2 to report.
          name = end == std::string_view::npos ? std::string_view() : p.substr(i + 3, end - i - 3);
          end = end == std::string_view::npos ? p.size() : end + 1;
        }
        const bool caret = name.starts_with('^');
        const bool negated = (n == 'P') != caret;
        const std::string_view base = name.substr(caret ? 1 : 0);
        const std::string added = ClassBodyAddedSince14(base);
        if (added.empty() || (negated && in_class)) {
          // PCRE2 cannot subtract inside a class: a negated class there keeps 14.0's data.
          out.append(p.substr(i, end - i));
        } else {
          const std::string positive = fmt::format("\\p{{{}}}{}", base, added);
          out.append(in_class ? positive : fmt::format("{}{}]", negated ? "[^" : "[", positive));
        }
        i = end - 1;
        continue;
      }
      if (n == 's') {
        if (in_class) {
          out.append(kWhiteSpaceBody);
        } else {
          out.append("[").append(kWhiteSpaceBody).append("]");
        }
        ++i;
        continue;
      }
      if (n == 'S' && !in_class) {
        out.append("[^").append(kWhiteSpaceBody).append("]");
        ++i;
        continue;
      }
      out.push_back(c);
      out.push_back(n);
      ++i;
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out.push_back(c);
      // A ']' right after '[' or '[^' is a literal.
      if (i + 1 < p.size() && p[i + 1] == '^')
        out.push_back(p[++i]);
      if (i + 1 < p.size() && p[i + 1] == ']')
        out.push_back(p[++i]);
      continue;
    }
    if (in_class && c == ']')
      in_class = false;
    out.push_back(c);
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
