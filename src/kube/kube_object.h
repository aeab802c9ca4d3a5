// KubeObject: an API object (a pod, an InferencePool, ...) as the server sent it, with its
// metadata read out; and ObjectList, a decoded list response (`GET .../pods`: kind *List,
// metadata.resourceVersion, items). Objects are immutable parsed DOMs, shared by pointer and
// readable from any thread. Decoding never trusts the bytes: anything malformed is an
// InvalidArgument.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "simdjson.h"

#include "base/json.h"
#include "base/json_fields.h"

namespace switchyard::kube {

// An API object with the DOM it lives in (which `value` borrows). Objects of one list share
// their list's document.
struct KubeObject {
  std::shared_ptr<const base::JsonDocument> document;
  simdjson::dom::element value;
  std::string name;
  std::string namespace_name;  // empty for cluster-scoped objects
  std::string resource_version;

  // "namespace/name" (or "name"), unique among a watch's objects.
  std::string Key() const;
};

// Reads an object's metadata (name, namespace, resourceVersion) into a KubeObject.
absl::StatusOr<KubeObject> MakeKubeObject(std::shared_ptr<const base::JsonDocument> document,
                                          simdjson::dom::element value);

// The object `object[key]` of string values (labels, matchLabels); empty when absent.
absl::StatusOr<std::map<std::string, std::string>> DecodeStringMap(simdjson::dom::element object,
                                                                   std::string_view key,
                                                                   const base::JsonPath& at);

struct ObjectList {
  // Where a watch of the same query resumes from.
  std::string resource_version;
  std::vector<KubeObject> items;
};

// Decodes a list response body; its items share one document.
absl::StatusOr<ObjectList> DecodeObjectList(std::string_view body);

}  // namespace switchyard::kube
