#include "text/internal/post_processor.h"

#include <string>

#include "fmt/format.h"

#include "base/status_macros.h"

namespace switchyard::text::internal {
namespace {

// Reads a [token, id] pair (RobertaProcessing/BertProcessing "cls"/"sep").
absl::StatusOr<int32_t> PairId(simdjson::dom::element json, std::string_view key,
                               const base::JsonPath& at) {
  SY_ASSIGN_OR_RETURN(simdjson::dom::array pair,
                      base::RequiredField<simdjson::dom::array>(json, key, at));
  int64_t id = 0;
  if (pair.size() != 2 || pair.at(1).get_int64().get(id) != simdjson::SUCCESS || id < 0 ||
      id > INT32_MAX) {
    return at.Child(key).Error("expected [token, id]");
  }
  return static_cast<int32_t>(id);
}

// Fills prefix/suffix from a TemplateProcessing "single" template.
absl::Status ParseTemplate(simdjson::dom::element json, const base::JsonPath& at,
                           std::vector<int32_t>* prefix, std::vector<int32_t>* suffix) {
  SY_ASSIGN_OR_RETURN(simdjson::dom::array single,
                      base::RequiredField<simdjson::dom::array>(json, "single", at));
  SY_ASSIGN_OR_RETURN(std::optional<simdjson::dom::element> specials,
                      base::OptionalField(json, "special_tokens", at));
  base::JsonPath single_at = at.Child("single");
  bool seen_sequence = false;
  size_t i = 0;
  for (simdjson::dom::element item : single) {
    base::JsonPath item_at = single_at.Index(i++);
    SY_ASSIGN_OR_RETURN(std::optional<simdjson::dom::element> special,
                        base::OptionalField(item, "SpecialToken", item_at));
    if (!special) {
      SY_ASSIGN_OR_RETURN(simdjson::dom::element seq,
                          base::RequiredField(item, "Sequence", item_at));
      (void)seq;
      if (seen_sequence)
        return item_at.Error("the single template has two sequences");
      seen_sequence = true;
      continue;
    }
    SY_ASSIGN_OR_RETURN(std::string name, base::RequiredField<std::string>(
                                              *special, "id", item_at.Child("SpecialToken")));
    base::JsonPath specials_at = at.Child("special_tokens");
    if (!specials)
      return specials_at.Error(fmt::format("missing entry for \"{}\"", name));
    SY_ASSIGN_OR_RETURN(std::optional<simdjson::dom::element> entry,
                        base::OptionalField(*specials, name, specials_at));
    if (!entry)
      return specials_at.Error(fmt::format("missing entry for \"{}\"", name));
    base::JsonPath entry_at = specials_at.Child(name);
    SY_ASSIGN_OR_RETURN(simdjson::dom::array ids,
                        base::RequiredField<simdjson::dom::array>(*entry, "ids", entry_at));
    for (simdjson::dom::element id : ids) {
      int64_t value = 0;
      if (id.get_int64().get(value) != simdjson::SUCCESS || value < 0 || value > INT32_MAX) {
        return entry_at.Child("ids").Error("expected token ids");
      }
      (seen_sequence ? suffix : prefix)->push_back(static_cast<int32_t>(value));
    }
  }
  return absl::OkStatus();
}

absl::Status ParseInto(simdjson::dom::element json, const base::JsonPath& at,
                       std::vector<int32_t>* prefix, std::vector<int32_t>* suffix) {
  SY_ASSIGN_OR_RETURN(std::string type, base::RequiredField<std::string>(json, "type", at));
  if (type == "TemplateProcessing")
    return ParseTemplate(json, at, prefix, suffix);
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    SY_ASSIGN_OR_RETURN(int32_t cls, PairId(json, "cls", at));
    SY_ASSIGN_OR_RETURN(int32_t sep, PairId(json, "sep", at));
    prefix->push_back(cls);
    suffix->push_back(sep);
    return absl::OkStatus();
  }
  if (type == "ByteLevel")
    return absl::OkStatus();
  if (type == "Sequence") {
    SY_ASSIGN_OR_RETURN(simdjson::dom::array list,
                        base::RequiredField<simdjson::dom::array>(json, "processors", at));
    base::JsonPath list_at = at.Child("processors");
    size_t i = 0;
    for (simdjson::dom::element item : list) {
      // Each step wraps the result of the previous ones.
      std::vector<int32_t> p, s;
      SY_RETURN_IF_ERROR(ParseInto(item, list_at.Index(i++), &p, &s));
      prefix->insert(prefix->begin(), p.begin(), p.end());
      suffix->insert(suffix->end(), s.begin(), s.end());
    }
    return absl::OkStatus();
  }
  return at.Child("type").Error(fmt::format("unsupported post-processor type \"{}\"", type));
}

}  // namespace

void PostProcessor::Apply(std::vector<int32_t>* ids) const {
  ids->insert(ids->begin(), prefix_.begin(), prefix_.end());
  ids->insert(ids->end(), suffix_.begin(), suffix_.end());
}

absl::StatusOr<std::unique_ptr<PostProcessor>> ParsePostProcessor(simdjson::dom::element json,
                                                                  const base::JsonPath& at) {
  std::vector<int32_t> prefix, suffix;
  SY_RETURN_IF_ERROR(ParseInto(json, at, &prefix, &suffix));
  return std::make_unique<PostProcessor>(std::move(prefix), std::move(suffix));
}

}  // namespace switchyard::text::internal
