// Fuzz target: bytes as one watch-stream line and as a list response body (kube/), then the
// objects decoded as a Pod and an InferencePool. None may crash; a decoded event keeps what
// its type promises.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "kube/inference_pool.h"
#include "kube/kube_object.h"
#include "kube/pod.h"
#include "kube/watch_event.h"

namespace {

namespace kube = switchyard::kube;

void Exercise(const kube::KubeObject& object) {
  (void)object.Key();
  if (absl::StatusOr<kube::Pod> pod = kube::DecodePod(object); pod.ok() && pod->ready) {
    if (pod->ip.empty())
      std::abort();  // a ready pod always has an address
  }
  if (absl::StatusOr<kube::InferencePool> pool = kube::DecodeInferencePool(object); pool.ok()) {
    if (pool->match_labels.empty() || pool->target_ports.empty())
      std::abort();
    (void)pool->LabelSelector();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (absl::StatusOr<kube::WatchEvent> event = kube::DecodeWatchEvent(text); event.ok()) {
    if (event->type != kube::WatchEventType::kError) {
      if (event->object.resource_version.empty())
        std::abort();
      Exercise(event->object);
    }
  }
  if (absl::StatusOr<kube::ObjectList> list = kube::DecodeObjectList(text); list.ok()) {
    for (const kube::KubeObject& object : list->items)
      Exercise(object);
  }
  return 0;
}
