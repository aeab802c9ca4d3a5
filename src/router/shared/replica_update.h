// ReplicaUpdate: what one router replica tells the others through the shared store
// (replica_sync.h), one message per sync tick: the prefixes its approximate index learnt
// (picks it made), the sessions it bound, what its tenants consumed, and its own requests in
// flight per endpoint (a full snapshot each time, so a replica that stops sending stops
// counting once its last one is stale).
//
// Wire format (little-endian), versioned: "SYRU" 0x01, then the replica id and four lists,
// each a u32 count of entries; strings are u16 length + bytes, keys u64. Decoding checks
// every count against the bytes left and every string against its bound, so a truncated or
// hostile message is an error, never an over-read or a huge allocation.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

#include "router/flow/tenant_limiter.h"

namespace switchyard::router {

struct PrefixObservation {
  std::string endpoint;
  std::vector<uint64_t> keys;  // a request's prefix keys (block_keys.h), most recent last
  bool operator==(const PrefixObservation&) const = default;
};

struct SessionBinding {
  std::string session_id;
  std::string endpoint;
  bool operator==(const SessionBinding&) const = default;
};

// The replica's own requests in flight to one endpoint (EndpointLoad's counters).
struct EndpointLoadShare {
  std::string endpoint;
  int64_t requests = 0;
  int64_t prompt_tokens = 0;
  int64_t tokens = 0;
  bool operator==(const EndpointLoadShare&) const = default;
};

struct ReplicaUpdate {
  std::string replica_id;
  std::vector<PrefixObservation> prefixes;
  std::vector<SessionBinding> sessions;
  std::vector<flow::QuotaCharge> charges;  // since the replica's previous update
  std::vector<EndpointLoadShare> load;
  bool operator==(const ReplicaUpdate&) const = default;
};

// Bounds a decoder enforces (an encoder given more is a caller bug: checked, not truncated).
inline constexpr size_t kMaxReplicaStringBytes = 4096;
inline constexpr size_t kMaxPrefixKeys = 1 << 16;

std::string EncodeReplicaUpdate(const ReplicaUpdate& update);
// InvalidArgument for anything that is not one whole, well-formed message.
absl::StatusOr<ReplicaUpdate> DecodeReplicaUpdate(std::string_view bytes);

}  // namespace switchyard::router
