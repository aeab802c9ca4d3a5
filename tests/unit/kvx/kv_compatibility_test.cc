#include "kvx/kv_compatibility.h"

#include <functional>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace switchyard::kvx {
namespace {

KvCompatibility Bench1b() {
  return {.model_fingerprint = "bench-1b",
          .dtype = "f16",
          .num_layers = 16,
          .kv_heads = 8,
          .head_dim = 64,
          .block_size = 16};
}

TEST(KvCompatibilityTest, HashIsStable) {
  // SHA-256 of the length-prefixed little-endian encoding, computed independently (Python's
  // hashlib over struct.pack('<q', ...) fields): a change here breaks every peer handshake
  // and every tier entry written by an older build.
  EXPECT_EQ(Bench1b().Hash(), "df28f81514c32368b18112cd415483d1a03fb8dd00361a059344f6f2d48d8733");
  EXPECT_EQ(Bench1b().Hash(), Bench1b().Hash());
}

TEST(KvCompatibilityTest, EveryFieldChangesTheHash) {
  const std::vector<std::function<void(KvCompatibility&)>> changes = {
      [](KvCompatibility& c) { c.model_fingerprint = "bench-135m"; },
      [](KvCompatibility& c) { c.dtype = "bf16"; },
      [](KvCompatibility& c) { c.num_layers = 17; },
      [](KvCompatibility& c) { c.kv_heads = 4; },
      [](KvCompatibility& c) { c.head_dim = 128; },
      [](KvCompatibility& c) { c.block_size = 32; },
      [](KvCompatibility& c) { c.layout = "interleaved"; },
      [](KvCompatibility& c) { c.protocol_version = 2; },
  };
  const std::string base = Bench1b().Hash();
  for (size_t i = 0; i < changes.size(); ++i) {
    KvCompatibility changed = Bench1b();
    changes[i](changed);
    EXPECT_NE(changed.Hash(), base) << "change " << i;
  }
}

TEST(KvCompatibilityTest, StringsCannotRunIntoEachOther) {
  KvCompatibility a = Bench1b();
  KvCompatibility b = Bench1b();
  a.model_fingerprint = "bench-1bf";
  a.dtype = "16";
  EXPECT_NE(a.Hash(), b.Hash());
}

}  // namespace
}  // namespace switchyard::kvx
