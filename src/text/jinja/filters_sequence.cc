// Sequence filters: length, first/last, join, sorting, selecting, mapping, batching.
#include <algorithm>

#include "fmt/format.h"

#include "base/status_macros.h"
#include "text/jinja/filter_helpers.h"

namespace switchyard::text::jinja {
namespace {

absl::StatusOr<Value> List_(const std::vector<Value>& items) {
  return Value::MakeList(items);
}

absl::StatusOr<Value> FLength(Interpreter&, const Value& v, CallArgs&) {
  if (v.is_namespace())
    return WantType("length", "a sized value", v);
  SY_ASSIGN_OR_RETURN(int64_t n, Length(v));
  return Value(n);
}

absl::StatusOr<Value> FFirst(Interpreter&, const Value& v, CallArgs&) {
  SY_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  if (items.empty())
    return Value::MakeUndefined("No first item, sequence was empty.");
  return items.front();
}

absl::StatusOr<Value> FLast(Interpreter&, const Value& v, CallArgs&) {
  SY_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  if (items.empty())
    return Value::MakeUndefined("No last item, sequence was empty.");
  return items.back();
}

absl::StatusOr<Value> FJoin(Interpreter& in, const Value& v, CallArgs& args) {
  std::string sep;
  if (const Value* d = Arg(args, 0, "d"); d != nullptr) {
    SY_ASSIGN_OR_RETURN(sep, ToStr(*d));
  }
  SY_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  const Value* attribute = Arg(args, 1, "attribute");
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0)
      out += sep;
    Value item = items[i];
    if (attribute != nullptr && !attribute->is_none()) {
      SY_ASSIGN_OR_RETURN(item, AttrPath(in, item, *attribute));
    }
    SY_ASSIGN_OR_RETURN(std::string s, ToStr(item));
    out += s;
    SY_RETURN_IF_ERROR(in.CheckSize(out.size()));
  }
  return Value(std::move(out));
}

absl::StatusOr<Value> FItems(Interpreter& in, const Value& v, CallArgs&) {
  if (v.is_undefined())
    return Value::MakeList({});
  if (!v.is_dict())
    return WantType("items", "a mapping", v);
  CallArgs none;
  return CallMethod(in, v, "items", none);
}

absl::StatusOr<Value> FList(Interpreter&, const Value& v, CallArgs&) {
  SY_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  return List_(items);
}

absl::StatusOr<Value> FReverse(Interpreter&, const Value& v, CallArgs&) {
  if (v.is_string())
    return SliceValue(v, Value::None(), Value::None(), Value(int64_t{-1}));
  SY_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  std::reverse(items.begin(), items.end());
  return List_(items);
}

absl::StatusOr<bool> Less(Interpreter& in, const Value& a, const Value& b, bool case_sensitive) {
  if (!case_sensitive && a.is_string() && b.is_string()) {
    return ToLower(a.as_string()) < ToLower(b.as_string());
  }
  (void)in;
  return LessThan(a, b);
}

// Stable sort of (key, item) pairs by key, as Python's sorted(key=...); the first failed
// comparison is the result.
absl::Status SortKeyed(Interpreter& in, std::vector<std::pair<Value, Value>>* keyed, bool reverse,
                       bool case_sensitive) {
  absl::Status error;
  std::stable_sort(keyed->begin(), keyed->end(), [&](const auto& x, const auto& y) {
    if (!error.ok())
      return false;
    auto r = reverse ? Less(in, y.first, x.first, case_sensitive)
                     : Less(in, x.first, y.first, case_sensitive);
    if (!r.ok()) {
      error = r.status();
      return false;
    }
    return *r;
  });
  return error;
}

absl::StatusOr<Value> SortBy(Interpreter& in, std::vector<Value> items, bool reverse,
                             bool case_sensitive, const Value* attribute) {
  std::vector<std::pair<Value, Value>> keyed;
  for (Value& item : items) {
    Value key = item;
    if (attribute != nullptr && !attribute->is_none()) {
      SY_ASSIGN_OR_RETURN(key, AttrPath(in, item, *attribute));
    }
    keyed.emplace_back(std::move(key), std::move(item));
  }
  SY_RETURN_IF_ERROR(SortKeyed(in, &keyed, reverse, case_sensitive));
  std::vector<Value> out;
  out.reserve(keyed.size());
  for (auto& [k, v] : keyed)
    out.push_back(std::move(v));
  return List_(out);
}

absl::StatusOr<Value> FSort(Interpreter& in, const Value& v, CallArgs& args) {
  SY_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  const Value* reverse = Arg(args, 0, "reverse");
  const Value* cs = Arg(args, 1, "case_sensitive");
  return SortBy(in, std::move(items), reverse != nullptr && reverse->Truthy(),
                cs != nullptr && cs->Truthy(), Arg(args, 2, "attribute"));
}

absl::StatusOr<Value> FDictSort(Interpreter& in, const Value& v, CallArgs& args) {
  if (!v.is_dict())
    return WantType("dictsort", "a mapping", v);
  const Value* cs = Arg(args, 0, "case_sensitive");
  const Value* by = Arg(args, 1, "by");
  const Value* reverse = Arg(args, 2, "reverse");
  Value pos(int64_t{by != nullptr && by->is_string() && by->as_string() == "value" ? 1 : 0});
  CallArgs none;
  SY_ASSIGN_OR_RETURN(Value pairs, CallMethod(in, v, "items", none));
  return SortBy(in, pairs.as_list().items, reverse != nullptr && reverse->Truthy(),
                cs != nullptr && cs->Truthy(), &pos);
}

absl::StatusOr<Value> FUnique(Interpreter& in, const Value& v, CallArgs& args) {
  SY_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  const Value* cs = Arg(args, 0, "case_sensitive");
  const Value* attribute = Arg(args, 1, "attribute");
  std::vector<Value> seen, out;
  for (Value& item : items) {
    Value key = item;
    if (attribute != nullptr && !attribute->is_none()) {
      SY_ASSIGN_OR_RETURN(key, AttrPath(in, item, *attribute));
    }
    if ((cs == nullptr || !cs->Truthy()) && key.is_string())
      key = Value(ToLower(key.as_string()));
    bool dup = false;
    for (const Value& s : seen)
      dup = dup || Equals(s, key);
    if (dup)
      continue;
    seen.push_back(key);
    out.push_back(std::move(item));
  }
  return List_(out);
}

absl::StatusOr<Value> MinMax(Interpreter& in, const Value& v, CallArgs& args, bool want_max) {
  SY_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  if (items.empty())
    return Value::MakeUndefined("No aggregated item, sequence was empty.");
  const Value* cs = Arg(args, 0, "case_sensitive");
  const Value* attribute = Arg(args, 1, "attribute");
  size_t best = 0;
  Value best_key;
  for (size_t i = 0; i < items.size(); ++i) {
    Value key = items[i];
    if (attribute != nullptr && !attribute->is_none()) {
      SY_ASSIGN_OR_RETURN(key, AttrPath(in, items[i], *attribute));
    }
    if (i == 0) {
      best_key = key;
      continue;
    }
    SY_ASSIGN_OR_RETURN(bool better, want_max
                                         ? Less(in, best_key, key, cs != nullptr && cs->Truthy())
                                         : Less(in, key, best_key, cs != nullptr && cs->Truthy()));
    if (better) {
      best = i;
      best_key = key;
    }
  }
  return items[best];
}

absl::StatusOr<Value> FMin(Interpreter& in, const Value& v, CallArgs& args) {
  return MinMax(in, v, args, false);
}

absl::StatusOr<Value> FMax(Interpreter& in, const Value& v, CallArgs& args) {
  return MinMax(in, v, args, true);
}

absl::StatusOr<Value> FSum(Interpreter& in, const Value& v, CallArgs& args) {
  SY_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  const Value* attribute = Arg(args, 0, "attribute");
  const Value* start = Arg(args, 1, "start");
  Value total = start != nullptr ? *start : Value(int64_t{0});
  for (const Value& item : items) {
    Value x = item;
    if (attribute != nullptr && !attribute->is_none()) {
      SY_ASSIGN_OR_RETURN(x, AttrPath(in, item, *attribute));
    }
    SY_ASSIGN_OR_RETURN(total, BinaryOp("+", total, x, in));
  }
  return total;
}

absl::StatusOr<Value> FMap(Interpreter& in, const Value& v, CallArgs& args) {
  SY_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  std::vector<Value> out;
  if (const Value* attribute = args.Keyword("attribute"); attribute != nullptr) {
    const Value* dflt = args.Keyword("default");
    for (const Value& item : items) {
      SY_ASSIGN_OR_RETURN(Value x, AttrPath(in, item, *attribute));
      if (x.is_undefined() && dflt != nullptr)
        x = *dflt;
      out.push_back(std::move(x));
    }
    return List_(out);
  }
  if (args.positional.empty() || !args.positional[0].is_string()) {
    return absl::InvalidArgumentError(
        "FilterArgumentError: map requires a filter name or attribute=");
  }
  std::string name = args.positional[0].as_string();
  CallArgs rest;
  rest.positional.assign(args.positional.begin() + 1, args.positional.end());
  rest.keyword = args.keyword;
  for (const Value& item : items) {
    CallArgs a = rest;
    SY_ASSIGN_OR_RETURN(Value x, in.ApplyFilter(name, item, a));
    out.push_back(std::move(x));
  }
  return List_(out);
}

absl::StatusOr<Value> Select(Interpreter& in, const Value& v, CallArgs& args, bool by_attr,
                             bool keep) {
  SY_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  size_t next = 0;
  Value attribute;
  if (by_attr) {
    if (args.positional.empty())
      return absl::InvalidArgumentError("TypeError: missing attribute");
    attribute = args.positional[next++];
  }
  std::string test;
  if (next < args.positional.size()) {
    if (!args.positional[next].is_string())
      return absl::InvalidArgumentError("TypeError: test name must be a string");
    test = args.positional[next++].as_string();
  }
  CallArgs rest;
  rest.positional.assign(args.positional.begin() + std::min(next, args.positional.size()),
                         args.positional.end());
  rest.keyword = args.keyword;
  std::vector<Value> out;
  for (const Value& item : items) {
    Value x = item;
    if (by_attr) {
      SY_ASSIGN_OR_RETURN(x, AttrPath(in, item, attribute));
    }
    bool passed;
    if (test.empty()) {
      passed = x.Truthy();
    } else {
      CallArgs a = rest;
      SY_ASSIGN_OR_RETURN(passed, in.ApplyTest(test, x, a));
    }
    if (passed == keep)
      out.push_back(item);
  }
  return List_(out);
}

absl::StatusOr<Value> FSelect(Interpreter& in, const Value& v, CallArgs& a) {
  return Select(in, v, a, false, true);
}

absl::StatusOr<Value> FReject(Interpreter& in, const Value& v, CallArgs& a) {
  return Select(in, v, a, false, false);
}

absl::StatusOr<Value> FSelectAttr(Interpreter& in, const Value& v, CallArgs& a) {
  return Select(in, v, a, true, true);
}

absl::StatusOr<Value> FRejectAttr(Interpreter& in, const Value& v, CallArgs& a) {
  return Select(in, v, a, true, false);
}

absl::StatusOr<Value> FBatch(Interpreter&, const Value& v, CallArgs& args) {
  SY_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  const Value* size = Arg(args, 0, "linecount");
  if (size == nullptr || !size->is_int() || size->as_int() <= 0)
    return WantType("batch", "a positive size", v);
  const Value* fill = Arg(args, 1, "fill_with");
  std::vector<Value> out, cur;
  for (Value& item : items) {
    cur.push_back(std::move(item));
    if (static_cast<int64_t>(cur.size()) == size->as_int()) {
      SY_ASSIGN_OR_RETURN(Value b, List_(cur));
      out.push_back(std::move(b));
      cur.clear();
    }
  }
  if (!cur.empty()) {
    while (fill != nullptr && !fill->is_none() && static_cast<int64_t>(cur.size()) < size->as_int())
      cur.push_back(*fill);
    SY_ASSIGN_OR_RETURN(Value b, List_(cur));
    out.push_back(std::move(b));
  }
  return List_(out);
}

absl::StatusOr<Value> FCount(Interpreter& in, const Value& v, CallArgs& args) {
  return FLength(in, v, args);
}

// Jinja's slice: `slices` columns, the first len % slices of them one item longer; the
// shorter ones padded with fill_with when given. (Jinja yields them; a list prints alike
// once listed.)
absl::StatusOr<Value> FSlice(Interpreter& in, const Value& v, CallArgs& args) {
  SY_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  const Value* slices_arg = Arg(args, 0, "slices");
  if (slices_arg == nullptr || !(slices_arg->is_int() || slices_arg->is_bool()))
    return WantType("slice", "an int slice count", v);
  int64_t slices = slices_arg->as_int();
  if (slices == 0)
    return absl::InvalidArgumentError("ZeroDivisionError: integer division or modulo by zero");
  const Value* fill = Arg(args, 1, "fill_with");
  int64_t length = static_cast<int64_t>(items.size());
  std::vector<Value> out;
  if (slices > 0) {
    int64_t per_slice = length / slices;
    int64_t with_extra = length % slices;
    int64_t offset = 0;
    for (int64_t k = 0; k < slices; ++k) {
      SY_RETURN_IF_ERROR(in.Step());
      int64_t start = offset + k * per_slice;
      if (k < with_extra)
        ++offset;
      int64_t stop = offset + (k + 1) * per_slice;
      std::vector<Value> column(items.begin() + start, items.begin() + stop);
      if (fill != nullptr && !fill->is_none() && k >= with_extra)
        column.push_back(*fill);
      SY_ASSIGN_OR_RETURN(Value c, List_(column));
      out.push_back(std::move(c));
    }
  }
  return List_(out);
}

// Jinja's groupby(attribute, default=None, case_sensitive=False): items sorted by the
// attribute, runs of equal keys gathered into (grouper, list) tuples that also answer to
// .grouper and .list.
absl::StatusOr<Value> FGroupBy(Interpreter& in, const Value& v, CallArgs& args) {
  SY_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  const Value* attribute = Arg(args, 0, "attribute");
  if (attribute == nullptr)
    return absl::InvalidArgumentError("TypeError: groupby() missing argument 'attribute'");
  const Value* dflt = Arg(args, 1, "default");
  const Value* cs = Arg(args, 2, "case_sensitive");
  bool case_sensitive = cs != nullptr && cs->Truthy();
  auto key_of = [&](const Value& item, bool fold) -> absl::StatusOr<Value> {
    SY_ASSIGN_OR_RETURN(Value k, AttrPath(in, item, *attribute));
    if (k.is_undefined() && dflt != nullptr && !dflt->is_none())
      k = *dflt;
    if (fold && k.is_string())
      k = Value(ToLower(k.as_string()));
    return k;
  };
  std::vector<std::pair<Value, Value>> keyed;
  for (Value& item : items) {
    SY_ASSIGN_OR_RETURN(Value k, key_of(item, !case_sensitive));
    keyed.emplace_back(std::move(k), std::move(item));
  }
  SY_RETURN_IF_ERROR(SortKeyed(in, &keyed, /*reverse=*/false, /*case_sensitive=*/true));
  std::vector<Value> groups;
  for (size_t i = 0; i < keyed.size();) {
    size_t j = i + 1;
    while (j < keyed.size() && Equals(keyed[i].first, keyed[j].first))
      ++j;
    std::vector<Value> members;
    for (size_t k = i; k < j; ++k)
      members.push_back(keyed[k].second);
    Value grouper = keyed[i].first;
    if (!case_sensitive) {
      SY_ASSIGN_OR_RETURN(grouper, key_of(members.front(), false));
    }
    SY_ASSIGN_OR_RETURN(Value list, List_(members));
    SY_ASSIGN_OR_RETURN(Value pair, Value::MakeList({std::move(grouper), std::move(list)}, true));
    List group = pair.as_list();
    group.is_group = true;
    groups.emplace_back(std::make_shared<const List>(std::move(group)));
    i = j;
  }
  return List_(groups);
}

}  // namespace

std::span<const FilterEntry> SequenceFilters() {
  static constexpr FilterEntry kTable[] = {
      {"batch", FBatch},     {"count", FCount},     {"dictsort", FDictSort},
      {"first", FFirst},     {"groupby", FGroupBy}, {"items", FItems},
      {"join", FJoin},       {"last", FLast},       {"length", FLength},
      {"list", FList},       {"map", FMap},         {"max", FMax},
      {"min", FMin},         {"reject", FReject},   {"rejectattr", FRejectAttr},
      {"reverse", FReverse}, {"select", FSelect},   {"selectattr", FSelectAttr},
      {"slice", FSlice},     {"sort", FSort},       {"sum", FSum},
      {"unique", FUnique},
  };
  return kTable;
}

}  // namespace switchyard::text::jinja
