#include "kube/kube_object.h"

#include <optional>
#include <utility>

#include "fmt/format.h"

#include "base/status_macros.h"

namespace switchyard::kube {

std::string KubeObject::Key() const {
  return namespace_name.empty() ? name : fmt::format("{}/{}", namespace_name, name);
}

absl::StatusOr<KubeObject> MakeKubeObject(std::shared_ptr<const base::JsonDocument> document,
                                          simdjson::dom::element value) {
  const base::JsonPath at("object");
  KubeObject object;
  SY_ASSIGN_OR_RETURN(simdjson::dom::element metadata, base::RequiredField(value, "metadata", at));
  const base::JsonPath meta_at = at.Child("metadata");
  SY_ASSIGN_OR_RETURN(object.name,
                      base::FieldOr<std::string>(metadata, "name", std::string(), meta_at));
  SY_ASSIGN_OR_RETURN(object.namespace_name,
                      base::FieldOr<std::string>(metadata, "namespace", std::string(), meta_at));
  SY_ASSIGN_OR_RETURN(
      object.resource_version,
      base::FieldOr<std::string>(metadata, "resourceVersion", std::string(), meta_at));
  object.document = std::move(document);
  object.value = value;
  return object;
}

absl::StatusOr<std::map<std::string, std::string>> DecodeStringMap(simdjson::dom::element object,
                                                                   std::string_view key,
                                                                   const base::JsonPath& at) {
  std::map<std::string, std::string> labels;
  SY_ASSIGN_OR_RETURN(std::optional<simdjson::dom::object> map,
                      base::OptionalField<simdjson::dom::object>(object, key, at));
  if (!map)
    return labels;
  const base::JsonPath map_at = at.Child(key);
  for (simdjson::dom::key_value_pair kv : *map) {
    SY_ASSIGN_OR_RETURN(std::string value, base::FieldAs<std::string>(kv.value, kv.key, map_at));
    labels.emplace(std::string(kv.key), std::move(value));
  }
  return labels;
}

absl::StatusOr<ObjectList> DecodeObjectList(std::string_view body) {
  constexpr std::string_view kSource = "list response";
  SY_ASSIGN_OR_RETURN(std::unique_ptr<base::JsonDocument> parsed,
                      base::JsonDocument::Parse(body, kSource));
  std::shared_ptr<const base::JsonDocument> document = std::move(parsed);
  const base::JsonPath at(kSource);
  const simdjson::dom::element root = document->root();
  ObjectList list;
  SY_ASSIGN_OR_RETURN(simdjson::dom::element metadata, base::RequiredField(root, "metadata", at));
  SY_ASSIGN_OR_RETURN(
      list.resource_version,
      base::RequiredField<std::string>(metadata, "resourceVersion", at.Child("metadata")));
  SY_ASSIGN_OR_RETURN(std::optional<simdjson::dom::array> items,
                      base::OptionalField<simdjson::dom::array>(root, "items", at));
  if (!items)
    return list;  // an empty list may come as "items": null
  list.items.reserve(items->size());
  for (simdjson::dom::element item : *items) {
    if (!item.is_object())
      return at.Child("items").Index(list.items.size()).Error("expected an object");
    SY_ASSIGN_OR_RETURN(KubeObject object, MakeKubeObject(document, item));
    if (object.name.empty())
      return at.Child("items").Index(list.items.size()).Error("an item without metadata.name");
    list.items.push_back(std::move(object));
  }
  return list;
}

}  // namespace switchyard::kube
