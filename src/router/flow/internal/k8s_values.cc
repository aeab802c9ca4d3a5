#include "router/flow/internal/k8s_values.h"

#include <array>
#include <limits>
#include <utility>

#include "absl/numeric/int128.h"

namespace switchyard::router::flow::internal {
namespace {

constexpr int kMaxDigits = 30;  // 10^30 times a suffix of at most 2^60 still fits 128 bits

bool IsDigit(char c) {
  return c >= '0' && c <= '9';
}

absl::uint128 Pow10(int n) {
  absl::uint128 p = 1;
  for (int i = 0; i < n; ++i)
    p *= 10;
  return p;
}

// A decimal number at the front of `text`: its digits as one integer and how many of them
// follow the point. Consumes what it reads; nullopt when there is no digit or too many.
struct Decimal {
  absl::uint128 digits = 0;
  int fraction_digits = 0;
};
std::optional<Decimal> TakeDecimal(std::string_view* text) {
  Decimal d;
  int count = 0;
  bool point = false;
  size_t i = 0;
  for (; i < text->size(); ++i) {
    const char c = (*text)[i];
    if (c == '.' && !point) {
      point = true;
      continue;
    }
    if (!IsDigit(c))
      break;
    if (++count > kMaxDigits)
      return std::nullopt;
    d.digits = d.digits * 10 + static_cast<unsigned>(c - '0');
    if (point)
      ++d.fraction_digits;
  }
  if (count == 0)
    return std::nullopt;
  text->remove_prefix(i);
  return d;
}

bool TakeSign(std::string_view* text) {
  if (text->empty() || (text->front() != '-' && text->front() != '+'))
    return false;
  const bool negative = text->front() == '-';
  text->remove_prefix(1);
  return negative;
}

constexpr absl::uint128 kInt64Max = std::numeric_limits<int64_t>::max();

}  // namespace

std::optional<int64_t> ParseQuantity(std::string_view text) {
  const bool negative = TakeSign(&text);
  const std::optional<Decimal> number = TakeDecimal(&text);
  if (!number.has_value())
    return std::nullopt;
  absl::uint128 multiplier = 1;
  int exponent = 0;  // a power of ten, from a decimal suffix or an exponent
  static constexpr std::array<std::pair<std::string_view, int>, 6> kBinary = {
      {{"Ki", 10}, {"Mi", 20}, {"Gi", 30}, {"Ti", 40}, {"Pi", 50}, {"Ei", 60}}};
  static constexpr std::array<std::pair<std::string_view, int>, 6> kDecimal = {
      {{"k", 3}, {"M", 6}, {"G", 9}, {"T", 12}, {"P", 15}, {"E", 18}}};
  bool matched = text.empty();
  for (const auto& [suffix, shift] : kBinary) {
    if (!matched && text == suffix) {
      multiplier = absl::uint128(1) << shift;
      matched = true;
    }
  }
  for (const auto& [suffix, power] : kDecimal) {
    if (!matched && text == suffix) {
      exponent = power;
      matched = true;
    }
  }
  if (!matched && (text.front() == 'e' || text.front() == 'E')) {
    text.remove_prefix(1);
    const bool negative_exponent = TakeSign(&text);
    if (text.empty() || text.size() > 2)
      return std::nullopt;
    for (const char c : text) {
      if (!IsDigit(c))
        return std::nullopt;
      exponent = exponent * 10 + (c - '0');
    }
    exponent = negative_exponent ? -exponent : exponent;
    matched = true;
  }
  if (!matched)
    return std::nullopt;
  // value = digits * multiplier * 10^exponent / 10^fraction_digits, rounded up.
  const int scale = exponent - number->fraction_digits;
  if (scale > kMaxDigits)
    return std::nullopt;
  absl::uint128 numerator = number->digits;
  if (numerator > std::numeric_limits<absl::uint128>::max() / multiplier)
    return std::nullopt;
  numerator *= multiplier;
  absl::uint128 value = numerator;
  if (scale >= 0) {
    const absl::uint128 factor = Pow10(scale);
    if (numerator != 0 && numerator > std::numeric_limits<absl::uint128>::max() / factor)
      return std::nullopt;
    value = numerator * factor;
  } else if (-scale > 38) {
    value = numerator == 0 ? 0 : 1;
  } else {
    const absl::uint128 divisor = Pow10(-scale);
    value = numerator / divisor + (numerator % divisor != 0 ? 1 : 0);
  }
  if (value > kInt64Max)
    return std::nullopt;
  const auto result = static_cast<int64_t>(value);
  return negative ? -result : result;
}

std::optional<std::chrono::nanoseconds> ParseGoDuration(std::string_view text) {
  const bool negative = TakeSign(&text);
  if (text == "0")
    return std::chrono::nanoseconds(0);
  if (text.empty())
    return std::nullopt;
  // The first that matches is taken: "ms" before "m".
  static constexpr std::array<std::pair<std::string_view, int64_t>, 8> kUnits = {{
      {"ns", 1},
      {"us", 1'000},
      {"\u00b5s", 1'000},  // micro sign
      {"\u03bcs", 1'000},  // Greek mu
      {"ms", 1'000'000},
      {"s", 1'000'000'000},
      {"m", 60'000'000'000},
      {"h", 3'600'000'000'000},
  }};
  absl::uint128 total = 0;
  while (!text.empty()) {
    const std::optional<Decimal> number = TakeDecimal(&text);
    if (!number.has_value())
      return std::nullopt;
    std::optional<int64_t> unit;
    for (const auto& [name, ns] : kUnits) {
      if (!unit.has_value() && text.starts_with(name)) {
        unit = ns;
        text.remove_prefix(name.size());
      }
    }
    if (!unit.has_value())
      return std::nullopt;
    // Whole part exactly; the fraction truncated to nanoseconds, as Go does (its first 18
    // digits: beyond them it is below a nanosecond even in hours).
    const absl::uint128 one = Pow10(number->fraction_digits);
    const absl::uint128 whole = number->digits / one;
    absl::uint128 fraction = number->digits % one;
    absl::uint128 fraction_one = one;
    if (number->fraction_digits > 18) {
      fraction_one = Pow10(18);
      fraction /= Pow10(number->fraction_digits - 18);
    }
    if (whole > kInt64Max)
      return std::nullopt;
    total += whole * static_cast<uint64_t>(*unit) +
             fraction * static_cast<uint64_t>(*unit) / fraction_one;
    if (total > kInt64Max)
      return std::nullopt;
  }
  const auto ns = static_cast<int64_t>(total);
  return std::chrono::nanoseconds(negative ? -ns : ns);
}

}  // namespace switchyard::router::flow::internal
