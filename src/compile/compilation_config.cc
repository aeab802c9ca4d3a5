#include "compile/compilation_config.h"

#include <algorithm>
#include <memory>
#include <string>

#include "fmt/format.h"

#include "base/json.h"
#include "base/json_fields.h"
#include "base/status_macros.h"

namespace switchyard::compile {
namespace {

constexpr std::string_view kFlag = "--compilation-config";

std::vector<int64_t> DefaultSizes(int64_t max_num_seqs, int64_t max_num_batched_tokens) {
  const int64_t top = std::min(max_num_seqs, max_num_batched_tokens);
  std::vector<int64_t> sizes;
  for (int64_t s = 1; s < top; s *= 2)
    sizes.push_back(s);
  if (top >= 1)
    sizes.push_back(top);
  return sizes;
}

}  // namespace

absl::StatusOr<CompilationConfig> ParseCompilationConfig(std::string_view json, bool enforce_eager,
                                                         int64_t max_num_seqs,
                                                         int64_t max_num_batched_tokens) {
  CompilationConfig config;
  if (json.empty())
    return config;
  SY_ASSIGN_OR_RETURN(std::unique_ptr<base::JsonDocument> doc,
                      base::JsonDocument::Parse(json, kFlag));
  const base::JsonPath root(kFlag);
  SY_ASSIGN_OR_RETURN(simdjson::dom::object object,
                      base::JsonAs<simdjson::dom::object>(doc->root(), root));
  for (const auto field : object) {
    if (field.key != "compile_sizes")
      return root.Child(field.key).Error("unknown key (this engine reads compile_sizes)");
  }
  SY_ASSIGN_OR_RETURN(
      std::optional<simdjson::dom::array> sizes,
      base::OptionalField<simdjson::dom::array>(doc->root(), "compile_sizes", root));
  if (!sizes.has_value()) {
    config.compile_sizes = DefaultSizes(max_num_seqs, max_num_batched_tokens);
    if (enforce_eager)
      config.compile_sizes.clear();  // the JSON was checked all the same
    return config;
  }
  const base::JsonPath at = root.Child("compile_sizes");
  size_t i = 0;
  for (simdjson::dom::element e : *sizes) {
    SY_ASSIGN_OR_RETURN(int64_t size, base::JsonAs<int64_t>(e, at.Index(i)));
    if (size < 1 || size > max_num_batched_tokens) {
      return at.Index(i).Error(
          fmt::format("{} tokens: a step holds 1 to {} (--max-num-batched-tokens)", size,
                      max_num_batched_tokens));
    }
    config.compile_sizes.push_back(size);
    ++i;
  }
  std::sort(config.compile_sizes.begin(), config.compile_sizes.end());
  config.compile_sizes.erase(std::unique(config.compile_sizes.begin(), config.compile_sizes.end()),
                             config.compile_sizes.end());
  if (enforce_eager)
    config.compile_sizes.clear();
  return config;
}

}  // namespace switchyard::compile
