// Arbitrary bytes as a KV event batch payload (what a router reads off a ZeroMQ socket).
// Decoding must never crash, hang or allocate beyond the input's size; a batch that decodes
// must re-encode and decode to the same value.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "kvx/kv_event_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using switchyard::kvx::DecodeKvEventBatch;
  using switchyard::kvx::EncodeKvEventBatch;
  using switchyard::kvx::EventLayout;
  using switchyard::kvx::HashForm;
  auto batch = DecodeKvEventBatch(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!batch.ok())
    return 0;
  for (EventLayout layout : {EventLayout::kArray, EventLayout::kMap, EventLayout::kMapBatch}) {
    // kBytes keeps every hash in the form it was read in.
    auto again = DecodeKvEventBatch(EncodeKvEventBatch(*batch, {layout, HashForm::kBytes}));
    // NaN timestamps compare unequal to themselves.
    if (!again.ok() || (batch->ts == batch->ts && !(*again == *batch)))
      std::abort();
  }
  return 0;
}
