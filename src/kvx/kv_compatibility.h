// KvCompatibility: what two holders of KV blocks must agree on before blocks move between
// them (a peer engine, a shared host tier, a disk or Redis entry written by another
// process): the model, the KV dtype and shape, the block layout and the kvx protocol. Hash()
// condenses it into one string that a handshake or a tier's key prefix compares; equal
// records hash equal on every build and machine (a golden test pins it).
//
// Plain value; any thread.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace switchyard::kvx {

// The engine pool's block layout (kv_block_layout.h): per layer a K and a V pool of
// [num_blocks, block_size, kv_heads, head_dim], segments ordered K0, V0, K1, V1, ...
inline constexpr std::string_view kLayerPoolsLayout = "layer_kv_pools_nhd";
// Bumped whenever what a block's bytes mean or how they travel changes.
inline constexpr int32_t kKvxProtocolVersion = 1;

struct KvCompatibility {
  // Identifies the weights (a checksum or a name+revision the engine derives).
  std::string model_fingerprint;
  // The KV element type's name, e.g. "f16".
  std::string dtype;
  int64_t num_layers = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  int64_t block_size = 0;
  std::string layout{kLayerPoolsLayout};
  int32_t protocol_version = kKvxProtocolVersion;

  // SHA-256 of a length-prefixed encoding of every field in declaration order, so that no
  // two different records share an encoding: what a peer handshake compares.
  std::array<uint8_t, 32> Digest() const;
  // Digest() in lower-case hex, for logs and keys.
  std::string Hash() const;

  bool operator==(const KvCompatibility&) const = default;
};

}  // namespace switchyard::kvx
