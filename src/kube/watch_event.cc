#include "kube/watch_event.h"

#include <utility>

#include "fmt/format.h"

#include "base/json_fields.h"
#include "base/status_macros.h"

namespace switchyard::kube {
namespace {

constexpr std::string_view kSource = "watch event";

absl::StatusOr<WatchEventType> ParseType(std::string_view type) {
  if (type == "ADDED")
    return WatchEventType::kAdded;
  if (type == "MODIFIED")
    return WatchEventType::kModified;
  if (type == "DELETED")
    return WatchEventType::kDeleted;
  if (type == "BOOKMARK")
    return WatchEventType::kBookmark;
  if (type == "ERROR")
    return WatchEventType::kError;
  return absl::InvalidArgumentError(fmt::format("{}: unknown type '{}'", kSource, type));
}

}  // namespace

absl::StatusOr<WatchEvent> DecodeWatchEvent(std::string_view line) {
  SY_ASSIGN_OR_RETURN(std::unique_ptr<base::JsonDocument> parsed,
                      base::JsonDocument::Parse(line, kSource));
  std::shared_ptr<const base::JsonDocument> document = std::move(parsed);
  const simdjson::dom::element root = document->root();
  const base::JsonPath at(kSource);
  WatchEvent event;
  SY_ASSIGN_OR_RETURN(std::string_view type,
                      base::RequiredField<std::string_view>(root, "type", at));
  SY_ASSIGN_OR_RETURN(event.type, ParseType(type));
  SY_ASSIGN_OR_RETURN(simdjson::dom::element object,
                      base::RequiredField<simdjson::dom::element>(root, "object", at));
  if (!object.is_object())
    return at.Child("object").Error("expected an object");
  if (event.type == WatchEventType::kError) {
    const base::JsonPath status_at = at.Child("object");
    SY_ASSIGN_OR_RETURN(event.error_code, base::FieldOr<int64_t>(object, "code", 0, status_at));
    SY_ASSIGN_OR_RETURN(event.error_message,
                        base::FieldOr<std::string>(object, "message", std::string(), status_at));
    event.object.document = std::move(document);
    event.object.value = object;
    return event;
  }
  SY_ASSIGN_OR_RETURN(event.object, MakeKubeObject(std::move(document), object));
  if (event.type != WatchEventType::kBookmark && event.object.name.empty())
    return at.Child("object.metadata.name").Error("missing required field");
  if (event.object.resource_version.empty())
    return at.Child("object.metadata.resourceVersion").Error("missing required field");
  return event;
}

}  // namespace switchyard::kube
