// The compile cache key: canonical JSON, a fixed digest for a fixed factor set, every
// semantic factor changing the key, non-semantic ones (by name or as a path under HOME or the
// cache root) not, and the factors file keeping both apart.
#include "compile/cache_key.h"

#include <stdlib.h>

#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "compile_test_support.h"

namespace switchyard::compile {
namespace {

TEST(CacheKeyTest, CanonicalJsonSortsKeysAndHasNoWhitespace) {
  KeyFactors inner;
  inner.Set("z", 1).Set("a", false);
  KeyFactors factors;
  factors.Set("b", "x\"y")
      .Set("a", inner)
      .Set("c", std::vector<std::string>{"q", "é"})
      .Set("n", -7);
  EXPECT_EQ(factors.CanonicalJson(),
            R"({"a":{"a":false,"z":1},"b":"x\"y","c":["q","\u00e9"],"n":-7})");
}

TEST(CacheKeyTest, FixedFactorsHaveAFixedKey) {
  const CacheKey key = SampleKey();
  EXPECT_EQ(key.semantic.CanonicalJson(),
            R"({"bucket":{"decode_only":true,"tokens":16},"compiler":{"flags":["-O3",)"
            R"("-march=native"],"path":"/usr/bin/g++","version":"12.2.0"},"dtypes":["bf16",)"
            R"("f32"],"graph_digest":"9f2c","isa_features":["avx512"],)"
            R"("project_version":"9.8.7-test"})");
  // sha256sum of the canonical JSON above (no trailing newline).
  EXPECT_EQ(key.hex, "b063c41d29261952f5d94fa0ec1652e54a709097f3d093ebb936596e1238fff2");
  EXPECT_TRUE(IsCacheKeyHex(key.hex));
}

TEST(CacheKeyTest, EveryFactorChangesTheKey) {
  const std::string base = SampleKey().hex;
  std::vector<KeyFactors> variants(9, SampleFactors());
  variants[0].Set("graph_digest", "9f2d");
  variants[1] = SampleFactors(32);
  variants[2].Set("dtypes", std::vector<std::string>{"f32", "bf16"});
  KeyFactors compiler;
  compiler.Set("path", "/usr/bin/clang++")
      .Set("version", "12.2.0")
      .Set("flags", std::vector<std::string>{"-O3", "-march=native"});
  variants[3].Set("compiler", compiler);
  variants[4].Set("isa_features", std::vector<std::string>{"avx2"});
  variants[5].Set("project_version", "9.8.8");
  variants[6].Set("pass_options", KeyFactors().Set("fuse_rmsnorm", true));
  variants[7].Set("graph_digest", int64_t{0x9f2c});  // same text, another type
  variants[8].Set("library_versions", KeyFactors().Set("openblas", "0.3.21"));
  std::vector<std::string> keys = {base};
  for (const KeyFactors& factors : variants) {
    const std::string hex = ComputeCacheKey(factors, NonSemanticFactors{}).hex;
    for (const std::string& seen : keys)
      EXPECT_NE(hex, seen) << factors.CanonicalJson();
    keys.push_back(hex);
  }
}

TEST(CacheKeyTest, NonSemanticFactorsDoNotChangeTheKey) {
  const NonSemanticFactors rules{.names = {"log_level", "hostname", "timestamp"},
                                 .path_roots = {"/home/alice", "/var/cache/sy"}};
  const std::string base = ComputeCacheKey(SampleFactors(), rules).hex;
  KeyFactors noisy = SampleFactors();
  noisy.Set("log_level", "debug").Set("hostname", "node-7").Set("timestamp", 1733450000);
  noisy.Set("weights_path", "/home/alice/models/x.gguf").Set("cache_dir", "/var/cache/sy");
  KeyFactors compiler;
  compiler.Set("path", "/usr/bin/g++")
      .Set("version", "12.2.0")
      .Set("flags", std::vector<std::string>{"-O3", "-march=native"});
  compiler.Set("work_dir", "/home/alice/.cache/tmp");
  noisy.Set("compiler", compiler);
  const CacheKey key = ComputeCacheKey(noisy, rules);
  EXPECT_EQ(key.hex, base);
  EXPECT_EQ(key.non_semantic.CanonicalJson(),
            R"({"cache_dir":"/var/cache/sy","compiler":{"work_dir":"/home/alice/.cache/tmp"},)"
            R"("hostname":"node-7","log_level":"debug","timestamp":1733450000,)"
            R"("weights_path":"/home/alice/models/x.gguf"})");

  // A path that only shares a prefix with a root is semantic.
  noisy.Set("weights_path", "/home/alice2/x.gguf");
  EXPECT_NE(ComputeCacheKey(noisy, rules).hex, base);
}

TEST(CacheKeyTest, MovingHomeDoesNotMiss) {
  const char* saved = ::getenv("HOME");
  const std::string previous = saved != nullptr ? saved : "";
  KeyFactors factors = SampleFactors();
  ::setenv("HOME", "/home/alice", 1);
  factors.Set("model_dir", "/home/alice/models/m");
  const CacheKey before = ComputeCacheKey(factors, NonSemanticFactors::Default("/srv/cache"));
  ::setenv("HOME", "/mnt/users/alice", 1);
  factors.Set("model_dir", "/mnt/users/alice/models/m");
  const CacheKey after = ComputeCacheKey(factors, NonSemanticFactors::Default("/srv/cache"));
  ::setenv("HOME", previous.c_str(), 1);
  EXPECT_EQ(before.hex, after.hex);
  EXPECT_NE(before.FactorsJson(), after.FactorsJson());
}

TEST(CacheKeyTest, FactorsFileKeepsTheKeyAndBothParts) {
  const NonSemanticFactors rules{.names = {"log_level"}, .path_roots = {}};
  KeyFactors factors;
  factors.Set("graph_digest", "ab").Set("log_level", "info");
  const CacheKey key = ComputeCacheKey(factors, rules);
  EXPECT_EQ(key.FactorsJson(), R"({"key":")" + key.hex +
                                   R"(","factors":{"graph_digest":"ab"},"non_semantic":)"
                                   R"({"log_level":"info"}})");
}

}  // namespace
}  // namespace switchyard::compile
