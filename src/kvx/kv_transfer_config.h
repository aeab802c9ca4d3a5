// --kv-transfer-config, vLLM's KVTransferConfig JSON, for Switchyard's own connector:
//
//   {"kv_connector": "SwitchyardConnector", "kv_role": "kv_producer" | "kv_consumer" |
//    "kv_both", "engine_id": "...", "kv_ip": "127.0.0.1", "kv_port": 14579,
//    "kv_connector_extra_config": {"lease_seconds": 480, "io_timeout_ms": 10000,
//                                  "load_threads": 4}}
//
// A producer (prefill engine) serves its KV blocks to peers on kv_ip:kv_port (0: any free
// port) and keeps a finished prefill's blocks under a lease until the decode side releases
// them or the lease ends (vLLM's VLLM_NIXL_ABORT_REQUEST_TIMEOUT, 480 s by default); a
// consumer (decode engine) pulls them, load_threads pulls at a time (P/D loads and P2P
// prefix pulls alike). kv_both does both. The shared secret that
// authenticates peers comes from the environment (SWITCHYARD_KV_SECRET), never from a flag
// that `ps` shows. vLLM fields that concern other connectors (kv_buffer_device,
// kv_buffer_size, kv_rank, kv_parallel_size) are accepted and ignored.
// Plain values and pure functions; any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace switchyard::kvx {

inline constexpr std::string_view kSwitchyardConnector = "SwitchyardConnector";

enum class KvRole { kProducer, kConsumer, kBoth };

struct KvTransferConfig {
  KvRole role = KvRole::kBoth;
  // Names this engine in kv_transfer_params and handshakes; empty: the caller picks one.
  std::string engine_id;
  // Where the block server listens (producer, both) and what kv_transfer_params advertise.
  std::string kv_ip = "127.0.0.1";
  int32_t kv_port = 0;
  int32_t lease_seconds = 480;
  int32_t io_timeout_ms = 10'000;
  int32_t load_threads = 4;

  bool produces() const { return role != KvRole::kConsumer; }
  bool consumes() const { return role != KvRole::kProducer; }
};

// InvalidArgument "--kv-transfer-config: <field>: ..." for malformed JSON, an unknown
// connector (only SwitchyardConnector moves KV here), an unknown role, or out-of-range
// numbers.
absl::StatusOr<KvTransferConfig> ParseKvTransferConfig(std::string_view json);

}  // namespace switchyard::kvx
