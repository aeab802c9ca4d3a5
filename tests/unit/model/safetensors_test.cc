#include "model/safetensors.h"

#include <cstring>
#include <string>

#include "fmt/format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "model_test_util.h"

namespace switchyard::model {
namespace {

using ::testing::HasSubstr;
using testing::MakeSafetensors;
using testing::WriteTemp;

// Asserts that opening `name` (written with `bytes`) fails with a message naming the file
// and every fragment in `fields`.
void ExpectOpenError(std::string_view name, const std::string& bytes,
                     std::initializer_list<std::string_view> fields) {
  const std::string path = WriteTemp(name, bytes);
  auto file = SafetensorsFile::Open(path);
  ASSERT_FALSE(file.ok()) << name;
  const std::string message(file.status().message());
  EXPECT_THAT(message, HasSubstr(path));
  for (std::string_view field : fields) {
    EXPECT_THAT(message, HasSubstr(std::string(field)));
  }
}

std::string TwoTensorFile() {
  std::string data(16 + 6, '\0');
  const float values[4] = {1, 2, 3, 4};
  std::memcpy(data.data(), values, sizeof(values));
  return MakeSafetensors(
      R"({"__metadata__": {"format": "pt"},
          "w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
          "b": {"dtype": "BF16", "shape": [3], "data_offsets": [16, 22]}})",
      data);
}

TEST(SafetensorsTest, OpensValidFile) {
  const std::string path = WriteTemp("valid.safetensors", TwoTensorFile());
  auto file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_EQ((*file)->tensors().size(), 2u);
  const TensorView* w = (*file)->Find("w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->dtype, DType::kF32);
  EXPECT_EQ(w->shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(w->num_elements, 4);
  EXPECT_EQ(w->byte_size, 16u);
  float third = 0;
  std::memcpy(&third, w->data + 8, sizeof(float));
  EXPECT_EQ(third, 3.0f);
  const TensorView* b = (*file)->Find("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->dtype, DType::kBF16);
  EXPECT_EQ(b->byte_size, 6u);
  EXPECT_EQ((*file)->metadata().at("format"), "pt");
  EXPECT_EQ((*file)->Find("missing"), nullptr);
}

TEST(SafetensorsTest, AllowsGapsAndEmptyTensors) {
  const std::string bytes = MakeSafetensors(
      R"({"a": {"dtype": "F16", "shape": [2], "data_offsets": [8, 12]},
          "e": {"dtype": "F32", "shape": [0, 3], "data_offsets": [8, 8]}})",
      std::string(12, '\0'));
  auto file =
      SafetensorsFile::Parse({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}, "mem");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->Find("e")->num_elements, 0);
}

TEST(SafetensorsTest, RejectsShortFile) {
  ExpectOpenError("short.safetensors", "abc", {"header_length", "too short"});
}

TEST(SafetensorsTest, RejectsHeaderLengthPastEof) {
  std::string bytes = MakeSafetensors("{}", "");
  bytes[0] = 100;
  ExpectOpenError("past_eof.safetensors", bytes, {"header_length", "past the end"});
}

TEST(SafetensorsTest, RejectsHugeHeaderLength) {
  std::string bytes;
  testing::AppendLe<uint64_t>(&bytes, uint64_t{1} << 40);
  ExpectOpenError("huge.safetensors", bytes + "{}", {"header_length", "exceeds the limit"});
}

TEST(SafetensorsTest, RejectsBadJson) {
  ExpectOpenError("bad_json.safetensors", MakeSafetensors("{\"a\": ", ""),
                  {"header", "invalid JSON"});
  ExpectOpenError("not_object.safetensors", MakeSafetensors("[1]", ""), {"header"});
}

TEST(SafetensorsTest, RejectsUnknownDtype) {
  ExpectOpenError(
      "dtype.safetensors",
      MakeSafetensors(R"({"t": {"dtype": "Q8_0", "shape": [1], "data_offsets": [0, 1]}})", "x"),
      {"'t'", "dtype", "unknown dtype 'Q8_0'"});
}

TEST(SafetensorsTest, RejectsOffsetsOutOfRange) {
  ExpectOpenError(
      "range.safetensors",
      MakeSafetensors(R"({"t": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]}})", "xx"),
      {"'t'", "data_offsets", "past the 2-byte data section"});
  ExpectOpenError(
      "reversed.safetensors",
      MakeSafetensors(R"({"t": {"dtype": "U8", "shape": [0], "data_offsets": [2, 1]}})", "xx"),
      {"'t'", "data_offsets", "past end"});
}

TEST(SafetensorsTest, RejectsSizeMismatch) {
  ExpectOpenError(
      "size.safetensors",
      MakeSafetensors(R"({"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}})",
                      std::string(8, '\0')),
      {"'t'", "data_offsets", "does not match"});
}

TEST(SafetensorsTest, RejectsOverflowingShape) {
  ExpectOpenError("overflow.safetensors",
                  MakeSafetensors(R"({"t": {"dtype": "F32",
                      "shape": [4294967296, 4294967296, 4], "data_offsets": [0, 4]}})",
                                  std::string(4, '\0')),
                  {"'t'", "shape", "overflows"});
  ExpectOpenError(
      "negative.safetensors",
      MakeSafetensors(R"({"t": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})",
                      std::string(4, '\0')),
      {"'t'", "shape"});
}

TEST(SafetensorsTest, RejectsOverlap) {
  ExpectOpenError("overlap.safetensors",
                  MakeSafetensors(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                          "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                                  std::string(12, '\0')),
                  {"'b'", "data_offsets", "overlaps tensor 'a'"});
}

TEST(SafetensorsTest, RejectsMalformedEntries) {
  ExpectOpenError("no_shape.safetensors",
                  MakeSafetensors(R"({"t": {"dtype": "F32", "data_offsets": [0, 4]}})", "xxxx"),
                  {"'t'", "shape"});
  ExpectOpenError(
      "three_offsets.safetensors",
      MakeSafetensors(R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4, 4]}})",
                      "xxxx"),
      {"'t'", "data_offsets"});
  ExpectOpenError("meta.safetensors", MakeSafetensors(R"({"__metadata__": {"a": 1}})", ""),
                  {"__metadata__"});
  ExpectOpenError("dup.safetensors",
                  MakeSafetensors(R"({"t": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},
                          "t": {"dtype": "U8", "shape": [1], "data_offsets": [1, 2]}})",
                                  "xx"),
                  {"'t'", "appears twice"});
}

std::string OneTensor(std::string_view name) {
  return MakeSafetensors(
      fmt::format(R"({{"{}": {{"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}}})", name),
      std::string(4, '\0'));
}

TEST(SafetensorsCheckpointTest, OpensShards) {
  WriteTemp("s-00001.safetensors", OneTensor("a"));
  WriteTemp("s-00002.safetensors", OneTensor("b"));
  const std::string index = WriteTemp("s.safetensors.index.json",
                                      R"({"metadata": {"total_size": 8},
          "weight_map": {"a": "s-00001.safetensors", "b": "s-00002.safetensors"}})");
  auto checkpoint = SafetensorsCheckpoint::Open(index);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  EXPECT_TRUE((*checkpoint)->sharded());
  EXPECT_EQ((*checkpoint)->files().size(), 2u);
  EXPECT_EQ((*checkpoint)->tensors().size(), 2u);
  EXPECT_NE((*checkpoint)->Find("b"), nullptr);
}

void ExpectIndexError(std::string_view name, std::string_view json,
                      std::initializer_list<std::string_view> fragments) {
  const std::string index = WriteTemp(name, json);
  auto checkpoint = SafetensorsCheckpoint::Open(index);
  ASSERT_FALSE(checkpoint.ok()) << name;
  const std::string message(checkpoint.status().message());
  EXPECT_THAT(message, HasSubstr(index));
  EXPECT_THAT(message, HasSubstr("weight_map"));
  for (std::string_view f : fragments) {
    EXPECT_THAT(message, HasSubstr(std::string(f)));
  }
}

TEST(SafetensorsCheckpointTest, RejectsBadIndexes) {
  WriteTemp("r-00001.safetensors", OneTensor("a"));
  WriteTemp("r-00002.safetensors", OneTensor("b"));
  ExpectIndexError("missing.index.json", R"({"weight_map": {"a": "nope.safetensors"}})",
                   {"nope.safetensors", "'a'"});
  ExpectIndexError("wrong.index.json",
                   R"({"weight_map": {"a": "r-00002.safetensors", "b": "r-00002.safetensors"}})",
                   {"'a'", "not found in shard 'r-00002.safetensors'"});
  ExpectIndexError("escape.index.json", R"({"weight_map": {"a": "../r-00001.safetensors"}})",
                   {"not a plain file name"});
  ExpectIndexError("no_map.index.json", R"({"weights": {}})", {"missing"});
}

TEST(SafetensorsCheckpointTest, RejectsTensorMissingFromIndex) {
  WriteTemp("u-00001.safetensors",
            MakeSafetensors(R"({"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},
                                "z": {"dtype": "U8", "shape": [1], "data_offsets": [1, 2]}})",
                            "xx"));
  ExpectIndexError("u.index.json", R"({"weight_map": {"a": "u-00001.safetensors"}})",
                   {"'z'", "not listed"});
}

}  // namespace
}  // namespace switchyard::model
