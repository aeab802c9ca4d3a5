// Test support for the compile cache: a representative factor set, keys made from it, what a
// test process may load, and entries written straight into a cache directory.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "../kvx/store_test_support.h"
#include "compile/cache_key.h"
#include "compile/entry_files.h"

namespace switchyard::compile {

using kvx::ScratchDirectory;

inline constexpr std::string_view kTestProjectVersion = "9.8.7-test";

// Factors of the kind the compiler will use, for bucket `tokens`.
inline KeyFactors SampleFactors(int64_t tokens = 16) {
  KeyFactors bucket;
  bucket.Set("tokens", tokens).Set("decode_only", true);
  KeyFactors compiler;
  compiler.Set("path", "/usr/bin/g++")
      .Set("version", "12.2.0")
      .Set("flags", std::vector<std::string>{"-O3", "-march=native"});
  KeyFactors factors;
  factors.Set("graph_digest", "9f2c")
      .Set("bucket", bucket)
      .Set("dtypes", std::vector<std::string>{"bf16", "f32"})
      .Set("compiler", compiler)
      .Set("isa_features", std::vector<std::string>{"avx512"})
      .Set("project_version", std::string(kTestProjectVersion));
  return factors;
}

inline CacheKey SampleKey(int64_t tokens = 16) {
  return ComputeCacheKey(SampleFactors(tokens), NonSemanticFactors{});
}

// A CPU with every feature but "avx512", and this test's project version.
inline EntryRequirements TestRequirements() {
  EntryRequirements requirements;
  requirements.project_version = std::string(kTestProjectVersion);
  requirements.has_isa_feature = [](std::string_view feature) { return feature != "avx512"; };
  return requirements;
}

// Artefact bytes that differ per `seed` and are big enough to be written in several pieces.
inline std::string ArtefactBytes(int seed, size_t size = 64 * 1024) {
  std::string bytes(size, '\0');
  for (size_t k = 0; k < size; ++k)
    bytes[k] = static_cast<char>((k * 131 + static_cast<size_t>(seed) * 7) & 0xff);
  return bytes;
}

inline EntryMetadata MetadataFor(const CacheKey& key, std::string_view artefact,
                                 std::vector<std::string> isa_features = {"avx2"}) {
  return MakeEntryMetadata(key.hex, artefact, std::move(isa_features), kTestProjectVersion);
}

}  // namespace switchyard::compile
