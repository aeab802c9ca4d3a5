// kv_transfer_params, the object vLLM's disaggregated prefill passes between a proxy and its
// engines (vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py), with vLLM's field
// names, so that llm-d's P/D sidecar, vLLM's toy proxy and Switchyard's router drive a
// Switchyard engine as they drive vLLM:
//  - to the prefill engine: {"do_remote_decode": true} (keep the prompt's KV for a decode
//    elsewhere);
//  - from it, on the response: {"do_remote_prefill": true, "do_remote_decode": false,
//    "remote_block_ids": [...], "remote_engine_id", "remote_host", "remote_port",
//    "remote_request_id", "tp_size": 1};
//  - to the decode engine: that object, verbatim.
// Plain values and pure functions; any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace switchyard::kvx {

struct KvTransferParams {
  bool do_remote_decode = false;
  bool do_remote_prefill = false;
  // The prefill engine's blocks holding the prompt's KV, in prompt order.
  std::vector<int64_t> remote_block_ids;
  std::string remote_engine_id;
  std::string remote_host;
  int64_t remote_port = 0;
  std::string remote_request_id;
  int64_t tp_size = 1;

  friend bool operator==(const KvTransferParams&, const KvTransferParams&) = default;
};

// Reads the object (fields absent or null keep their defaults; fields vLLM adds that this
// engine does not use are ignored, as vLLM's connectors ignore others' fields).
// InvalidArgument "kv_transfer_params.<field>: expected ..." for a field of the wrong type,
// a negative block id or a port outside [0, 65535].
absl::StatusOr<KvTransferParams> ParseKvTransferParams(std::string_view json);

// The object a prefill engine returns (every field written).
std::string EncodeKvTransferParams(const KvTransferParams& params);

}  // namespace switchyard::kvx
