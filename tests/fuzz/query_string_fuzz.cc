// Fuzz target: a request target's query (untrusted client bytes) through the query-string
// parser and its boolean reader. Checks, besides memory safety: decoding never lengthens
// (each pair is no longer than its bytes), and parameters written back fully escaped parse
// to the same parameters.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "net/query_string.h"

namespace {

void Check(bool ok) {
  if (!ok)
    std::abort();
}

std::string Escaped(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    out.push_back('%');
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 15]);
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using switchyard::net::ParseQueryBool;
  using switchyard::net::ParseQueryString;
  const std::string_view query(reinterpret_cast<const char*>(data), size);
  auto params = ParseQueryString(query);
  if (!params.ok())
    return 0;
  size_t decoded = 0;
  std::string again;
  for (const auto& [name, value] : *params) {
    decoded += name.size() + value.size();
    (void)ParseQueryBool(value);
    if (!again.empty())
      again.push_back('&');
    again += Escaped(name) + "=" + Escaped(value);
  }
  Check(decoded <= size);
  auto reparsed = ParseQueryString(again);
  Check(reparsed.ok() && *reparsed == *params);
  return 0;
}
