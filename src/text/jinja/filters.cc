// Jinja's builtin filter lookup, the filters that apply to any value (default, attr) and
// the helpers shared by the filter files.
#include <algorithm>

#include "fmt/format.h"

#include "base/status_macros.h"
#include "text/jinja/filter_helpers.h"

namespace switchyard::text::jinja {
namespace {

absl::StatusOr<Value> FDefault(Interpreter&, const Value& v, CallArgs& args) {
  const Value* dflt = Arg(args, 0, "default_value");
  const Value* boolean = Arg(args, 1, "boolean");
  bool use_default = v.is_undefined() || (boolean != nullptr && boolean->Truthy() && !v.Truthy());
  if (!use_default)
    return v;
  return dflt != nullptr ? *dflt : Value("");
}

absl::StatusOr<Value> FAttr(Interpreter& in, const Value& v, CallArgs& args) {
  const Value* name = Arg(args, 0, "name");
  if (name == nullptr || !name->is_string())
    return WantType("attr", "a name", v);
  return in.GetAttr(v, name->as_string());
}

std::span<const FilterEntry> GeneralFilters() {
  static constexpr FilterEntry kTable[] = {
      {"attr", FAttr},
      {"d", FDefault},
      {"default", FDefault},
  };
  return kTable;
}

}  // namespace

absl::Status WantType(std::string_view filter, std::string_view what, const Value& got) {
  return absl::InvalidArgumentError(
      fmt::format("TypeError: filter '{}' expected {}, got {}", filter, what, got.TypeName()));
}

absl::StatusOr<Value> AttrPath(Interpreter& in, const Value& v, const Value& attribute) {
  if (!attribute.is_string())
    return in.GetItem(v, attribute);
  Value cur = v;
  std::string_view path = attribute.as_string();
  while (true) {
    size_t dot = path.find('.');
    std::string_view part = path.substr(0, dot);
    bool digits = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    Value key = digits ? Value(static_cast<int64_t>(std::atoll(std::string(part).c_str())))
                       : Value(std::string(part));
    SY_ASSIGN_OR_RETURN(cur, in.GetItem(cur, key));
    if (dot == std::string_view::npos)
      return cur;
    path.remove_prefix(dot + 1);
  }
}

FilterFn FindFilter(std::string_view name) {
  for (auto group : {GeneralFilters(), StringFilters(), SequenceFilters(), NumberFilters()}) {
    for (const FilterEntry& f : group) {
      if (f.name == name)
        return f.fn;
    }
  }
  return nullptr;
}

}  // namespace switchyard::text::jinja
