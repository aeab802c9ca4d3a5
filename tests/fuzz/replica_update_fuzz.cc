// Arbitrary bytes as a stream entry another router replica wrote to the shared store
// (router/shared/replica_update.h): decoding may fail but must not crash, over-read or
// allocate past what the input can hold; an update that decodes must re-encode to the same
// bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "router/shared/replica_update.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const absl::StatusOr<switchyard::router::ReplicaUpdate> update =
      switchyard::router::DecodeReplicaUpdate(bytes);
  if (update.ok() && switchyard::router::EncodeReplicaUpdate(*update) != bytes)
    std::abort();
  return 0;
}
