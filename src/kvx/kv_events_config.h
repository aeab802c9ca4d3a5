// vLLM's --kv-events-config: a JSON object (KVEventsConfig) saying whether and where the
// engine publishes KV cache events:
//   {"enable_kv_cache_events": true, "publisher": "zmq", "endpoint": "tcp://*:5557",
//    "replay_endpoint": "tcp://*:5558", "buffer_steps": 10000, "hwm": 100000,
//    "max_queue_size": 100000, "topic": "kv-events"}
// plus two Switchyard keys for the wire form: "event_layout": "map" (the default, vLLM
// 0.32/0.33), "array" (early vLLM; llm-d-kv-cache's decoder) or "map_batch" (vLLM main),
// described in kv_event_codec.h, and "block_hash_format": "int" | "bytes". Unknown keys
// are errors, as pydantic's forbid-extra makes them in vLLM. Stateless; any thread.
#pragma once

#include <optional>
#include <string_view>

#include "absl/status/statusor.h"

#include "kvx/kv_event_publisher.h"

namespace switchyard::kvx {

// nullopt when events are disabled (enable_kv_cache_events false or publisher "null").
// InvalidArgument naming the key for malformed JSON, wrong types, unknown keys or values.
absl::StatusOr<std::optional<KvEventPublisherOptions>> ParseKvEventsConfig(std::string_view json);

}  // namespace switchyard::kvx
