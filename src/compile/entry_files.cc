#include "compile/entry_files.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <utility>

#include "fmt/format.h"
#include "simdjson.h"

#include "base/json.h"
#include "base/json_fields.h"
#include "base/status_macros.h"
#include "compile/cache_key.h"

namespace switchyard::compile {
namespace {

absl::Status AsDataLoss(const absl::Status& status) {
  return status.ok() ? status : absl::DataLossError(status.message());
}

absl::StatusOr<EntryMetadata> ParseMetadataFields(simdjson::dom::element root) {
  const base::JsonPath at(kMetadataFileName);
  EntryMetadata m;
  SY_ASSIGN_OR_RETURN(m.format_version, base::RequiredField<int64_t>(root, "format_version", at));
  SY_ASSIGN_OR_RETURN(m.key, base::RequiredField<std::string>(root, "key", at));
  SY_ASSIGN_OR_RETURN(m.project_version,
                      base::RequiredField<std::string>(root, "project_version", at));
  SY_ASSIGN_OR_RETURN(m.artefact_sha256,
                      base::RequiredField<std::string>(root, "artefact_sha256", at));
  SY_ASSIGN_OR_RETURN(m.artefact_bytes, base::RequiredField<int64_t>(root, "artefact_bytes", at));
  SY_ASSIGN_OR_RETURN(
      m.isa_features,
      base::ParseEach<std::string>(root, "isa_features", at,
                                   [](simdjson::dom::element item, const base::JsonPath& item_at,
                                      bool) { return base::JsonAs<std::string>(item, item_at); }));
  SY_ASSIGN_OR_RETURN(m.created_unix_s, base::RequiredField<int64_t>(root, "created_unix_s", at));
  return m;
}

std::string SummarizeValue(simdjson::dom::element value) {
  switch (value.type()) {
    case simdjson::dom::element_type::STRING:
      return std::string(value.get_string().value_unsafe());
    case simdjson::dom::element_type::ARRAY:
      return fmt::format("[{}]", value.get_array().value_unsafe().size());
    case simdjson::dom::element_type::OBJECT:
      return fmt::format("{{{}}}", value.get_object().value_unsafe().size());
    default:
      return simdjson::minify(value);
  }
}

}  // namespace

std::string_view ProjectVersion() {
  return SY_PROJECT_VERSION;
}

EntryMetadata MakeEntryMetadata(std::string_view key, std::string_view artefact,
                                std::vector<std::string> isa_features,
                                std::string_view project_version) {
  EntryMetadata m;
  m.key = std::string(key);
  m.project_version = std::string(project_version);
  m.artefact_sha256 = Sha256Hex(artefact);
  m.artefact_bytes = static_cast<int64_t>(artefact.size());
  m.isa_features = std::move(isa_features);
  m.created_unix_s = std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
  return m;
}

std::string EncodeEntryMetadata(const EntryMetadata& m) {
  std::string out = fmt::format("{{\"format_version\":{},\"key\":", m.format_version);
  base::AppendJsonString(m.key, /*ensure_ascii=*/true, &out);
  out += ",\"project_version\":";
  base::AppendJsonString(m.project_version, /*ensure_ascii=*/true, &out);
  out += ",\"artefact_sha256\":";
  base::AppendJsonString(m.artefact_sha256, /*ensure_ascii=*/true, &out);
  out += fmt::format(",\"artefact_bytes\":{},\"isa_features\":[", m.artefact_bytes);
  for (size_t k = 0; k < m.isa_features.size(); ++k) {
    if (k > 0)
      out.push_back(',');
    base::AppendJsonString(m.isa_features[k], /*ensure_ascii=*/true, &out);
  }
  out += fmt::format("],\"created_unix_s\":{}}}\n", m.created_unix_s);
  return out;
}

absl::StatusOr<EntryMetadata> ParseEntryMetadata(std::string_view text) {
  absl::StatusOr<std::unique_ptr<base::JsonDocument>> doc =
      base::JsonDocument::Parse(text, kMetadataFileName);
  if (!doc.ok())
    return AsDataLoss(doc.status());
  absl::StatusOr<EntryMetadata> metadata = ParseMetadataFields((*doc)->root());
  if (!metadata.ok())
    return AsDataLoss(metadata.status());
  return metadata;
}

absl::Status CheckEntry(const EntryMetadata& m, std::string_view key, std::string_view artefact,
                        const EntryRequirements& requirements) {
  if (m.format_version != kEntryFormatVersion) {
    return absl::DataLossError(
        fmt::format("format version {}, not {}", m.format_version, kEntryFormatVersion));
  }
  if (m.key != key)
    return absl::DataLossError(fmt::format("metadata names key {}", m.key));
  if (m.project_version != requirements.project_version) {
    return absl::DataLossError(fmt::format("built by version {}, this is {}", m.project_version,
                                           requirements.project_version));
  }
  for (const std::string& feature : m.isa_features) {
    if (!requirements.has_isa_feature(feature))
      return absl::DataLossError(
          fmt::format("needs ISA feature {}, which this CPU lacks", feature));
  }
  if (m.artefact_bytes != static_cast<int64_t>(artefact.size())) {
    return absl::DataLossError(
        fmt::format("artefact is {} bytes, metadata says {}", artefact.size(), m.artefact_bytes));
  }
  if (m.artefact_sha256 != Sha256Hex(artefact))
    return absl::DataLossError("artefact SHA-256 does not match its metadata");
  return absl::OkStatus();
}

absl::StatusOr<std::string> SummarizeFactorsFile(std::string_view text, size_t max_chars) {
  absl::StatusOr<std::unique_ptr<base::JsonDocument>> doc =
      base::JsonDocument::Parse(text, kFactorsFileName);
  if (!doc.ok())
    return AsDataLoss(doc.status());
  absl::StatusOr<simdjson::dom::object> factors = base::RequiredField<simdjson::dom::object>(
      (*doc)->root(), "factors", base::JsonPath(kFactorsFileName));
  if (!factors.ok())
    return AsDataLoss(factors.status());
  std::string out;
  for (auto [name, value] : *factors) {
    if (!out.empty())
      out.push_back(' ');
    out += fmt::format("{}={}", std::string_view(name), SummarizeValue(value));
    if (out.size() > max_chars)
      break;
  }
  if (out.size() > max_chars)
    out = out.substr(0, max_chars >= 3 ? max_chars - 3 : 0) + "...";
  return out;
}

}  // namespace switchyard::compile
