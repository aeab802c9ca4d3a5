// Builders for small safetensors and GGUF images used by the model tests, plus a helper
// that writes bytes into the test's temp directory.
#pragma once

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "gtest/gtest.h"

#include "base/file.h"

namespace switchyard::model::testing {

// Under a folder of our own: TempDir() may be shared with other test binaries.
inline std::string TempPath(std::string_view name) {
  const std::string dir = ::testing::TempDir() + "/sy_model_tests";
  std::filesystem::create_directories(dir);
  return dir + "/" + std::string(name);
}

inline std::string WriteTemp(std::string_view name, std::string_view bytes) {
  const std::string path = TempPath(name);
  EXPECT_TRUE(base::WriteFile(path, bytes).ok());
  return path;
}

template <typename T>
void AppendLe(std::string* out, T value) {
  char buf[sizeof(T)];
  std::memcpy(buf, &value, sizeof(T));
  out->append(buf, sizeof(T));
}

// 8-byte length, header, data.
inline std::string MakeSafetensors(std::string_view header, std::string_view data) {
  std::string out;
  AppendLe<uint64_t>(&out, header.size());
  out.append(header);
  out.append(data);
  return out;
}

// Writes GGUF images field by field so tests can also write malformed ones.
class GgufBuilder {
 public:
  explicit GgufBuilder(uint32_t version = 3) : version_(version) {}

  GgufBuilder& Str(std::string_view key, std::string_view value) {
    Key(key, 8);
    String(&kv_, value);
    return *this;
  }
  GgufBuilder& U32(std::string_view key, uint32_t value) {
    Key(key, 4);
    AppendLe(&kv_, value);
    return *this;
  }
  GgufBuilder& F32(std::string_view key, float value) {
    Key(key, 6);
    AppendLe(&kv_, value);
    return *this;
  }
  GgufBuilder& Bool(std::string_view key, bool value) {
    Key(key, 7);
    kv_.push_back(value ? 1 : 0);
    return *this;
  }
  GgufBuilder& StrArray(std::string_view key, const std::vector<std::string>& values) {
    Key(key, 9);
    AppendLe<uint32_t>(&kv_, 8);
    AppendLe<uint64_t>(&kv_, values.size());
    for (const std::string& v : values) {
      String(&kv_, v);
    }
    return *this;
  }
  GgufBuilder& F32Array(std::string_view key, const std::vector<float>& values) {
    Key(key, 9);
    AppendLe<uint32_t>(&kv_, 6);
    AppendLe<uint64_t>(&kv_, values.size());
    for (float v : values) {
      AppendLe(&kv_, v);
    }
    return *this;
  }
  GgufBuilder& I32Array(std::string_view key, const std::vector<int32_t>& values) {
    Key(key, 9);
    AppendLe<uint32_t>(&kv_, 5);
    AppendLe<uint64_t>(&kv_, values.size());
    for (int32_t v : values) {
      AppendLe(&kv_, v);
    }
    return *this;
  }
  // Appends raw bytes as one metadata entry's encoding (key already counted).
  GgufBuilder& RawEntry(std::string_view bytes) {
    ++kv_count_;
    kv_.append(bytes);
    return *this;
  }
  // `ne` is innermost first, as GGUF stores it.
  GgufBuilder& Tensor(std::string_view name, const std::vector<uint64_t>& ne, uint32_t type,
                      uint64_t offset) {
    ++tensor_count_;
    String(&infos_, name);
    AppendLe<uint32_t>(&infos_, static_cast<uint32_t>(ne.size()));
    for (uint64_t d : ne) {
      AppendLe(&infos_, d);
    }
    AppendLe(&infos_, type);
    AppendLe(&infos_, offset);
    return *this;
  }
  GgufBuilder& TensorCount(uint64_t n) {
    tensor_count_override_ = n;
    return *this;
  }
  GgufBuilder& KvCount(uint64_t n) {
    kv_count_override_ = n;
    return *this;
  }

  // Header, metadata, tensor infos, padding to `alignment`, then `data`.
  std::string Build(std::string_view data = {}, uint64_t alignment = 32) const {
    std::string out = "GGUF";
    AppendLe(&out, version_);
    AppendLe<uint64_t>(&out, tensor_count_override_ ? tensor_count_override_ : tensor_count_);
    AppendLe<uint64_t>(&out, kv_count_override_ ? kv_count_override_ : kv_count_);
    out += kv_;
    out += infos_;
    while (out.size() % alignment != 0) {
      out.push_back('\0');
    }
    out.append(data);
    return out;
  }

  static void String(std::string* out, std::string_view s) {
    AppendLe<uint64_t>(out, s.size());
    out->append(s);
  }

 private:
  void Key(std::string_view key, uint32_t type) {
    ++kv_count_;
    String(&kv_, key);
    AppendLe(&kv_, type);
  }

  uint32_t version_;
  uint64_t kv_count_ = 0;
  uint64_t tensor_count_ = 0;
  uint64_t kv_count_override_ = 0;
  uint64_t tensor_count_override_ = 0;
  std::string kv_;
  std::string infos_;
};

}  // namespace switchyard::model::testing
