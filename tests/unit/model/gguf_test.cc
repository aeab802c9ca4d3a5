#include "model/gguf.h"

#include <cstring>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "model_test_util.h"

namespace switchyard::model {
namespace {

using testing::AppendLe;
using testing::GgufBuilder;
using ::testing::HasSubstr;
using testing::WriteTemp;

constexpr uint32_t kF32 = 0;
constexpr uint32_t kQ8_0 = 8;

absl::StatusOr<std::unique_ptr<GgufFile>> ParseBytes(const std::string& bytes,
                                                     std::string_view source = "mem.gguf") {
  return GgufFile::Parse({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}, source);
}
// The parsed file points into `bytes`, so a temporary would dangle.
absl::StatusOr<std::unique_ptr<GgufFile>> ParseBytes(std::string&& bytes,
                                                     std::string_view source = "mem.gguf") = delete;

void ExpectOpenError(std::string_view name, const std::string& bytes,
                     std::initializer_list<std::string_view> fragments) {
  const std::string path = WriteTemp(name, bytes);
  auto file = GgufFile::Open(path);
  ASSERT_FALSE(file.ok()) << name;
  const std::string message(file.status().message());
  EXPECT_THAT(message, HasSubstr(path));
  for (std::string_view f : fragments) {
    EXPECT_THAT(message, HasSubstr(std::string(f)));
  }
}

std::string ValidFile() {
  std::string data(32 + 34, '\0');
  const float values[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  std::memcpy(data.data(), values, sizeof(values));
  data[32 + 2] = 5;  // first quant of the Q8_0 block
  return GgufBuilder()
      .Str("general.architecture", "llama")
      .U32("llama.block_count", 2)
      .F32("llama.rope.freq_base", 500000.0f)
      .Bool("tokenizer.ggml.add_bos_token", true)
      .StrArray("tokenizer.ggml.tokens", {"a", "b", "c"})
      .F32Array("tokenizer.ggml.scores", {0.5f, -1.0f, 2.0f})
      .I32Array("tokenizer.ggml.token_type", {1, 3, 6})
      .Tensor("w", {4, 2}, kF32, 0)
      .Tensor("q", {32}, kQ8_0, 32)
      .Build(data);
}

TEST(GgufTest, ParsesMetadataAndTensors) {
  const std::string path = WriteTemp("valid.gguf", ValidFile());
  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  const GgufFile& g = **file;
  EXPECT_EQ(g.version(), 3u);
  EXPECT_EQ(g.alignment(), 32u);
  EXPECT_EQ(g.metadata().size(), 7u);
  EXPECT_EQ(*g.GetString("general.architecture"), "llama");
  EXPECT_EQ(*g.GetUint("llama.block_count"), 2u);
  EXPECT_EQ(*g.GetInt("llama.block_count"), 2);
  EXPECT_FLOAT_EQ(*g.GetFloat("llama.rope.freq_base"), 500000.0);
  EXPECT_TRUE(*g.GetBool("tokenizer.ggml.add_bos_token"));
  EXPECT_THAT(*g.GetStringArray("tokenizer.ggml.tokens"), ::testing::ElementsAre("a", "b", "c"));
  EXPECT_THAT(*g.GetFloatArray("tokenizer.ggml.scores"), ::testing::ElementsAre(0.5, -1.0, 2.0));
  EXPECT_THAT(*g.GetIntArray("tokenizer.ggml.token_type"), ::testing::ElementsAre(1, 3, 6));

  const TensorView* w = g.FindTensor("w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->dtype, DType::kF32);
  EXPECT_EQ(w->shape, (std::vector<int64_t>{2, 4}));  // GGUF ne order reversed
  EXPECT_EQ(w->byte_size, 32u);
  float v = 0;
  std::memcpy(&v, w->data + 4 * 5, sizeof(float));
  EXPECT_EQ(v, 5.0f);
  const TensorView* q = g.FindTensor("q");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->dtype, DType::kQ8_0);
  EXPECT_EQ(q->byte_size, 34u);
  EXPECT_EQ(q->data[2], 5);
  EXPECT_EQ(q->file_offset, g.data_offset() + 32);
}

TEST(GgufTest, GettersNameFileAndKey) {
  const std::string bytes = ValidFile();
  auto file = ParseBytes(bytes, "getters.gguf");
  ASSERT_TRUE(file.ok());
  auto missing = (*file)->GetString("nope");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("getters.gguf"));
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("nope"));
  auto wrong = (*file)->GetUint("general.architecture");
  EXPECT_FALSE(wrong.ok());
  EXPECT_THAT(std::string(wrong.status().message()), HasSubstr("general.architecture"));
  EXPECT_FALSE((*file)->GetFloatArray("tokenizer.ggml.tokens").ok());
  EXPECT_FALSE((*file)->GetStringArray("tokenizer.ggml.scores").ok());
}

TEST(GgufTest, EveryTruncationFailsCleanly) {
  const std::string bytes = ValidFile();
  for (size_t n = 0; n < bytes.size(); ++n) {
    const std::string prefix = bytes.substr(0, n);
    auto file = ParseBytes(prefix, "cut.gguf");
    ASSERT_FALSE(file.ok()) << "prefix " << n;
    EXPECT_THAT(std::string(file.status().message()), HasSubstr("cut.gguf"));
    EXPECT_THAT(std::string(file.status().message()), HasSubstr("field '"));
  }
}

TEST(GgufTest, AcceptsVersion2AndCustomAlignment) {
  const std::string v2_bytes = GgufBuilder(2).Str("a", "b").Build();
  auto v2 = ParseBytes(v2_bytes);
  ASSERT_TRUE(v2.ok()) << v2.status();
  EXPECT_EQ((*v2)->version(), 2u);
  const std::string bytes = GgufBuilder()
                                .U32("general.alignment", 64)
                                .Tensor("t", {16}, kF32, 64)
                                .Build(std::string(128, '\0'), 64);
  auto aligned = ParseBytes(bytes);
  ASSERT_TRUE(aligned.ok()) << aligned.status();
  EXPECT_EQ((*aligned)->alignment(), 64u);
  EXPECT_EQ((*aligned)->data_offset() % 64, 0u);
}

TEST(GgufTest, ParsesNestedArrays) {
  std::string entry;
  GgufBuilder::String(&entry, "nested");
  AppendLe<uint32_t>(&entry, 9);  // array
  AppendLe<uint32_t>(&entry, 9);  // of arrays
  AppendLe<uint64_t>(&entry, 2);
  for (int i = 0; i < 2; ++i) {
    AppendLe<uint32_t>(&entry, 4);  // of uint32
    AppendLe<uint64_t>(&entry, 1);
    AppendLe<uint32_t>(&entry, 7 + i);
  }
  const std::string file_bytes = GgufBuilder().RawEntry(entry).Build();
  auto file = ParseBytes(file_bytes);
  ASSERT_TRUE(file.ok()) << file.status();
  auto array = (*file)->GetArray("nested");
  ASSERT_TRUE(array.ok());
  ASSERT_EQ((*array)->arrays.size(), 2u);
  EXPECT_EQ((*array)->arrays[1].count, 1u);
}

TEST(GgufTest, RejectsDeepNesting) {
  std::string entry;
  GgufBuilder::String(&entry, "deep");
  AppendLe<uint32_t>(&entry, 9);
  for (int i = 0; i < 20; ++i) {
    AppendLe<uint32_t>(&entry, 9);
    AppendLe<uint64_t>(&entry, 1);
  }
  AppendLe<uint32_t>(&entry, 0);
  AppendLe<uint64_t>(&entry, 0);
  ExpectOpenError("deep.gguf", GgufBuilder().RawEntry(entry).Build(), {"deep", "nested"});
}

TEST(GgufTest, RejectsBadHeader) {
  std::string bytes = ValidFile();
  bytes[0] = 'X';
  ExpectOpenError("magic.gguf", bytes, {"magic"});
  ExpectOpenError("v1.gguf", GgufBuilder(1).Build(), {"version", "version 1"});
  ExpectOpenError("v4.gguf", GgufBuilder(4).Build(), {"version", "unsupported GGUF version 4"});
  ExpectOpenError("be.gguf", GgufBuilder(0x03000000).Build(), {"version", "big-endian"});
}

TEST(GgufTest, RejectsHugeCounts) {
  ExpectOpenError("kv.gguf", GgufBuilder().KvCount(uint64_t{1} << 60).Build(),
                  {"metadata_kv_count", "cannot fit"});
  ExpectOpenError("tensors.gguf", GgufBuilder().TensorCount(uint64_t{1} << 60).Build(),
                  {"tensor_count", "cannot fit"});
  std::string entry;
  GgufBuilder::String(&entry, "arr");
  AppendLe<uint32_t>(&entry, 9);
  AppendLe<uint32_t>(&entry, 10);  // uint64 elements
  AppendLe<uint64_t>(&entry, uint64_t{1} << 61);
  ExpectOpenError("array.gguf", GgufBuilder().RawEntry(entry).Build(), {"arr", "past the end"});
}

TEST(GgufTest, RejectsStringPastEof) {
  std::string entry;
  GgufBuilder::String(&entry, "s");
  AppendLe<uint32_t>(&entry, 8);
  AppendLe<uint64_t>(&entry, 1000);
  entry += "short";
  ExpectOpenError("string.gguf", GgufBuilder().RawEntry(entry).Build(),
                  {"field 's'", "past the end"});
  std::string key;
  AppendLe<uint64_t>(&key, uint64_t{1} << 40);
  key += std::string(16, 'k');
  ExpectOpenError("key.gguf", GgufBuilder().RawEntry(key).Build(), {"metadata key"});
}

TEST(GgufTest, RejectsBadValues) {
  std::string entry;
  GgufBuilder::String(&entry, "weird");
  AppendLe<uint32_t>(&entry, 13);
  ExpectOpenError("type.gguf", GgufBuilder().RawEntry(entry).Build(),
                  {"weird", "unknown value type 13"});
  ExpectOpenError("dup.gguf", GgufBuilder().U32("k", 1).U32("k", 2).Build(),
                  {"field 'k'", "twice"});
  std::string flag;
  GgufBuilder::String(&flag, "flag");
  AppendLe<uint32_t>(&flag, 7);
  flag.push_back(2);
  ExpectOpenError("bool.gguf", GgufBuilder().RawEntry(flag).Build(), {"flag", "bool"});
}

TEST(GgufTest, RejectsBadAlignment) {
  ExpectOpenError("align3.gguf", GgufBuilder().U32("general.alignment", 3).Build(),
                  {"general.alignment", "power-of-two"});
  ExpectOpenError("align0.gguf", GgufBuilder().U32("general.alignment", 0).Build(),
                  {"general.alignment"});
  ExpectOpenError("alignstr.gguf", GgufBuilder().Str("general.alignment", "32").Build(),
                  {"general.alignment"});
}

TEST(GgufTest, RejectsBadTensorInfos) {
  const std::string data(256, '\0');
  ExpectOpenError("dims.gguf", GgufBuilder().Tensor("t", {1, 1, 1, 1, 1}, kF32, 0).Build(data),
                  {"'t'", "n_dims", "5 exceeds 4"});
  ExpectOpenError("ggml_type.gguf", GgufBuilder().Tensor("t", {4}, 4, 0).Build(data),
                  {"'t'", "type", "unknown GGML type 4"});
  ExpectOpenError("block.gguf", GgufBuilder().Tensor("t", {30}, kQ8_0, 0).Build(data),
                  {"'t'", "dims", "multiple of the Q8_0 block size 32"});
  ExpectOpenError("unaligned.gguf", GgufBuilder().Tensor("t", {4}, kF32, 8).Build(data),
                  {"'t'", "offset", "alignment 32"});
  ExpectOpenError("past.gguf", GgufBuilder().Tensor("t", {128}, kF32, 0).Build(data),
                  {"'t'", "offset", "data section"});
  ExpectOpenError(
      "huge_dims.gguf",
      GgufBuilder().Tensor("t", {uint64_t{1} << 40, uint64_t{1} << 40}, kF32, 0).Build(data),
      {"'t'", "dims", "overflows"});
  ExpectOpenError("overlap.gguf",
                  GgufBuilder().Tensor("a", {16}, kF32, 0).Tensor("b", {16}, kF32, 32).Build(data),
                  {"'b'", "offset", "overlaps tensor 'a'"});
  ExpectOpenError("same_name.gguf",
                  GgufBuilder().Tensor("a", {8}, kF32, 0).Tensor("a", {8}, kF32, 32).Build(data),
                  {"'a'", "twice"});
  ExpectOpenError("long_name.gguf",
                  GgufBuilder().Tensor(std::string(65, 'n'), {8}, kF32, 0).Build(data),
                  {"tensor name", "exceeds 64"});
  ExpectOpenError("no_data.gguf", GgufBuilder().Tensor("t", {8}, kF32, 0).Build(""),
                  {"'t'", "offset"});
}

}  // namespace
}  // namespace switchyard::model
