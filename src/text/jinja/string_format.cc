// Python's str.format: {} / {0} / {name} fields with .attr and [key] lookups, !s / !r
// conversions, and the common format specs ([[fill]align][sign][0][width][.precision][type]
// with types s, d, f, F, %). Other specs fail with a clear error rather than print wrong.
#include <cmath>

#include "fmt/format.h"

#include "base/status_macros.h"
#include "text/jinja/builtins.h"

namespace switchyard::text::jinja {
namespace {

absl::Status FormatError(std::string_view msg) {
  return absl::InvalidArgumentError(fmt::format("ValueError: {}", msg));
}

struct Spec {
  std::string fill = " ";
  char align = 0;  // '<', '>', '^', '=' or 0 for the type's default.
  char sign = '-';
  int64_t width = 0;
  int64_t precision = -1;
  char type = 0;
};

absl::StatusOr<Spec> ParseSpec(std::string_view s) {
  Spec spec;
  std::vector<std::string_view> cps = SplitCodePoints(s);
  size_t i = 0;
  auto is_align = [](std::string_view c) { return c == "<" || c == ">" || c == "^" || c == "="; };
  if (cps.size() >= 2 && is_align(cps[1])) {
    spec.fill = std::string(cps[0]);
    spec.align = cps[1][0];
    i = 2;
  } else if (!cps.empty() && is_align(cps[0])) {
    spec.align = cps[0][0];
    i = 1;
  }
  if (i < cps.size() && (cps[i] == "+" || cps[i] == "-" || cps[i] == " "))
    spec.sign = cps[i++][0];
  if (i < cps.size() && cps[i] == "0") {
    if (spec.align == 0) {
      spec.fill = "0";
      spec.align = '=';
    }
    ++i;
  }
  auto digits = [&](int64_t* out) {
    bool any = false;
    *out = 0;
    while (i < cps.size() && cps[i].size() == 1 && cps[i][0] >= '0' && cps[i][0] <= '9') {
      *out = std::min<int64_t>(*out * 10 + (cps[i][0] - '0'), 1 << 20);
      any = true;
      ++i;
    }
    return any;
  };
  digits(&spec.width);
  if (i < cps.size() && cps[i] == ".") {
    ++i;
    if (!digits(&spec.precision))
      return FormatError("Format specifier missing precision");
  }
  if (i < cps.size() && cps[i].size() == 1)
    spec.type = cps[i++][0];
  if (i != cps.size())
    return FormatError(fmt::format("Invalid format specifier '{}'", s));
  return spec;
}

std::string Pad(std::string body, const Spec& spec, char default_align) {
  int64_t len = static_cast<int64_t>(SplitCodePoints(body).size());
  if (len >= spec.width)
    return body;
  int64_t pad = spec.width - len;
  auto fill = [&](int64_t n) {
    std::string out;
    for (int64_t k = 0; k < n; ++k)
      out += spec.fill;
    return out;
  };
  char align = spec.align != 0 ? spec.align : default_align;
  switch (align) {
    case '<':
      return body + fill(pad);
    case '^':
      return fill(pad / 2) + body + fill(pad - pad / 2);
    case '=': {
      size_t sign = !body.empty() && (body[0] == '-' || body[0] == '+' || body[0] == ' ') ? 1 : 0;
      return body.substr(0, sign) + fill(pad) + body.substr(sign);
    }
    default:
      return fill(pad) + body;
  }
}

absl::StatusOr<std::string> FormatValue(const Value& v, std::string_view spec_text) {
  if (spec_text.empty())
    return ToStr(v);
  SY_ASSIGN_OR_RETURN(Spec spec, ParseSpec(spec_text));
  if (v.is_string()) {
    if (spec.type != 0 && spec.type != 's')
      return FormatError(
          fmt::format("Unknown format code '{}' for object of type 'str'", spec.type));
    if (spec.align == '=')
      return FormatError("'=' alignment not allowed in string format specifier");
    std::string s = v.as_string();
    if (spec.precision >= 0) {
      std::vector<std::string_view> cps = SplitCodePoints(s);
      if (static_cast<int64_t>(cps.size()) > spec.precision) {
        std::string cut;
        for (int64_t k = 0; k < spec.precision; ++k)
          cut.append(cps[k]);
        s = std::move(cut);
      }
    }
    return Pad(std::move(s), spec, '<');
  }
  if (!v.is_number()) {
    return absl::InvalidArgumentError(
        fmt::format("TypeError: unsupported format string passed to {}.__format__", v.TypeName()));
  }
  char type = spec.type;
  if (type == 0)
    type = v.is_float() ? (spec.precision >= 0 ? 'g' : 'r') : 'd';
  std::string body;
  double x = v.as_double();
  if (type == 'd') {
    if (v.is_float())
      return FormatError("Unknown format code 'd' for object of type 'float'");
    int64_t n = v.as_int();
    body = fmt::format("{}", n);
    if (n >= 0 && spec.sign != '-')
      body.insert(body.begin(), spec.sign);
  } else if (type == 'f' || type == 'F' || type == '%' || type == 'r') {
    if (type == '%')
      x *= 100;
    int64_t precision = spec.precision >= 0 ? spec.precision : 6;
    body = type == 'r' ? FloatRepr(x) : fmt::format("{:.{}f}", x, precision);
    if (type == 'F')
      for (char& c : body)
        c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (!std::signbit(x) && spec.sign != '-')
      body.insert(body.begin(), spec.sign);
    if (type == '%')
      body += '%';
  } else {
    return FormatError(fmt::format("format code '{}' is not supported here", type));
  }
  return Pad(std::move(body), spec, '>');
}

// Resolves "name.attr[key]..." against the arguments.
absl::StatusOr<Value> ResolveField(Interpreter& in, std::string_view field, CallArgs& args,
                                   int64_t* auto_index, bool* manual) {
  size_t end = field.find_first_of(".[");
  std::string_view head = field.substr(0, end);
  Value v;
  if (head.empty() || std::all_of(head.begin(), head.end(), ::isdigit)) {
    int64_t index;
    if (head.empty()) {
      if (*manual)
        return FormatError(
            "cannot switch from manual field specification to automatic field "
            "numbering");
      index = (*auto_index)++;
    } else {
      if (*auto_index > 0)
        return FormatError(
            "cannot switch from automatic field numbering to manual field "
            "specification");
      *manual = true;
      index = std::min<int64_t>(std::atoll(std::string(head).c_str()), INT32_MAX);
    }
    if (index >= static_cast<int64_t>(args.positional.size())) {
      return absl::InvalidArgumentError(fmt::format(
          "IndexError: Replacement index {} out of range for positional args tuple", index));
    }
    v = args.positional[index];
  } else {
    const Value* kw = args.Keyword(head);
    if (kw == nullptr)
      return absl::InvalidArgumentError(fmt::format("KeyError: '{}'", head));
    v = *kw;
  }
  std::string_view rest = end == std::string_view::npos ? "" : field.substr(end);
  while (!rest.empty()) {
    if (rest[0] == '.') {
      size_t next = rest.find_first_of(".[", 1);
      std::string_view name = rest.substr(1, next == std::string_view::npos ? next : next - 1);
      SY_ASSIGN_OR_RETURN(v, in.GetAttr(v, name));
      rest = next == std::string_view::npos ? "" : rest.substr(next);
    } else {
      size_t close = rest.find(']');
      if (close == std::string_view::npos)
        return FormatError("Missing ']' in format string");
      std::string_view key = rest.substr(1, close - 1);
      Value k = !key.empty() && std::all_of(key.begin(), key.end(), ::isdigit)
                    ? Value(static_cast<int64_t>(std::atoll(std::string(key).c_str())))
                    : Value(std::string(key));
      SY_ASSIGN_OR_RETURN(v, in.GetItem(v, k));
      rest = rest.substr(close + 1);
    }
    if (v.is_undefined())
      return UndefinedError(v);
  }
  return v;
}

}  // namespace

absl::StatusOr<Value> PyStrFormat(Interpreter& in, const std::string& s, CallArgs& args) {
  std::string out;
  int64_t auto_index = 0;
  bool manual = false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '}') {
      if (i + 1 < s.size() && s[i + 1] == '}') {
        out += '}';
        ++i;
        continue;
      }
      return FormatError("Single '}' encountered in format string");
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < s.size() && s[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    size_t close = s.find('}', i + 1);
    if (close == std::string::npos)
      return FormatError("Single '{' encountered in format string");
    std::string_view field(s.data() + i + 1, close - i - 1);
    if (field.find('{') != std::string_view::npos)
      return FormatError("nested replacement fields are not supported");
    size_t colon = field.find(':');
    std::string_view spec = colon == std::string_view::npos ? "" : field.substr(colon + 1);
    field = field.substr(0, colon);
    char conversion = 0;
    if (size_t bang = field.find('!'); bang != std::string_view::npos) {
      if (bang + 2 != field.size() || (field[bang + 1] != 's' && field[bang + 1] != 'r'))
        return FormatError("unsupported conversion in format string");
      conversion = field[bang + 1];
      field = field.substr(0, bang);
    }
    SY_ASSIGN_OR_RETURN(Value v, ResolveField(in, field, args, &auto_index, &manual));
    if (conversion != 0) {
      SY_ASSIGN_OR_RETURN(std::string text, conversion == 'r' ? ToRepr(v) : ToStr(v));
      v = Value(std::move(text));
    }
    SY_ASSIGN_OR_RETURN(std::string text, FormatValue(v, spec));
    out += text;
    SY_RETURN_IF_ERROR(in.CheckSize(out.size()));
    i = close;
  }
  return Value(std::move(out));
}

}  // namespace switchyard::text::jinja
