#include "base/json_fields.h"

#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "base/json.h"

namespace switchyard::base {
namespace {

using ::testing::ElementsAre;

class JsonFieldsTest : public ::testing::Test {
 protected:
  // Parses `text` as the document "cfg.json".
  simdjson::dom::element Parse(std::string_view text) {
    auto doc = JsonDocument::Parse(text, "cfg.json");
    EXPECT_TRUE(doc.ok()) << doc.status();
    doc_ = std::move(doc).value();
    return doc_->root();
  }

  std::string Message(const absl::Status& status) { return std::string(status.message()); }

  const JsonPath at_{"cfg.json"};
  std::unique_ptr<JsonDocument> doc_;
};

TEST_F(JsonFieldsTest, PathsNameTheDocumentAndTheValue) {
  EXPECT_EQ(Message(at_.Error("bad")), "cfg.json: (root): bad");
  const JsonPath merge = at_.Child("model").Child("merges").Index(3);
  EXPECT_EQ(merge.path(), "model.merges[3]");
  EXPECT_EQ(Message(merge.Error("bad")), "cfg.json: model.merges[3]: bad");
  EXPECT_EQ(merge.Error("bad").code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(JsonFieldsTest, ReadsEachTypeAndNamesTheOneExpected) {
  const simdjson::dom::element root = Parse(
      R"({"b": true, "i": -7, "big": 18446744073709551615, "f": 2.5, "s": "x", "a": [1],
          "o": {}})");
  EXPECT_EQ(*RequiredField<bool>(root, "b", at_), true);
  EXPECT_EQ(*RequiredField<int64_t>(root, "i", at_), -7);
  EXPECT_EQ(*RequiredField<double>(root, "f", at_), 2.5);
  EXPECT_EQ(*RequiredField<double>(root, "i", at_), -7.0);  // an integer is a number
  EXPECT_EQ(*RequiredField<std::string>(root, "s", at_), "x");
  EXPECT_EQ(*RequiredField<std::string_view>(root, "s", at_), "x");
  EXPECT_EQ(RequiredField<simdjson::dom::array>(root, "a", at_)->size(), 1u);
  EXPECT_TRUE(RequiredField<simdjson::dom::object>(root, "o", at_).ok());
  EXPECT_TRUE(RequiredField(root, "o", at_)->is_object());

  EXPECT_EQ(Message(RequiredField<bool>(root, "i", at_).status()),
            "cfg.json: i: expected a boolean");
  EXPECT_EQ(Message(RequiredField<int64_t>(root, "f", at_).status()),
            "cfg.json: f: expected an integer");
  EXPECT_EQ(Message(RequiredField<int64_t>(root, "big", at_).status()),
            "cfg.json: big: expected an integer");
  EXPECT_EQ(Message(RequiredField<double>(root, "s", at_).status()),
            "cfg.json: s: expected a number");
  EXPECT_EQ(Message(RequiredField<std::string>(root, "a", at_).status()),
            "cfg.json: a: expected a string");
  EXPECT_EQ(Message(RequiredField<simdjson::dom::array>(root, "o", at_).status()),
            "cfg.json: o: expected an array");
  EXPECT_EQ(Message(RequiredField<simdjson::dom::object>(root, "a", at_).status()),
            "cfg.json: a: expected an object");
}

TEST_F(JsonFieldsTest, NullIsAbsent) {
  const simdjson::dom::element root = Parse(R"({"n": null, "v": 3})");
  EXPECT_FALSE(OptionalField<int64_t>(root, "n", at_)->has_value());
  EXPECT_FALSE(OptionalField<int64_t>(root, "missing", at_)->has_value());
  EXPECT_EQ(OptionalField<int64_t>(root, "v", at_)->value(), 3);
  EXPECT_EQ(*FieldOr<int64_t>(root, "n", 9, at_), 9);
  EXPECT_EQ(*FieldOr<int64_t>(root, "v", 9, at_), 3);
  EXPECT_EQ(*FieldOr<std::string>(root, "missing", "dflt", at_), "dflt");
  EXPECT_EQ(Message(RequiredField<int64_t>(root, "n", at_).status()),
            "cfg.json: n: missing required field");
  // A present field of the wrong type is an error even where absence is fine.
  EXPECT_EQ(Message(FieldOr<bool>(root, "v", false, at_).status()),
            "cfg.json: v: expected a boolean");
}

TEST_F(JsonFieldsTest, FieldsOfANonObjectAreAnError) {
  const simdjson::dom::element root = Parse(R"({"model": [1]})");
  const JsonPath model_at = at_.Child("model");
  auto field = OptionalField(root["model"].value_unsafe(), "type", model_at);
  EXPECT_EQ(Message(field.status()), "cfg.json: model: expected an object");
  EXPECT_EQ(Message(JsonAs<simdjson::dom::object>(Parse("[]"), at_).status()),
            "cfg.json: (root): expected an object");
}

TEST_F(JsonFieldsTest, NestedErrorsCarryTheWholePath) {
  const simdjson::dom::element root = Parse(R"({"model": {"vocab": {"a": 0, "b": "1"}}})");
  const JsonPath vocab_at = at_.Child("model").Child("vocab");
  std::vector<int64_t> ids;
  absl::Status status;
  const simdjson::dom::object vocab = root["model"]["vocab"].get_object().value_unsafe();
  for (auto [token, id] : vocab) {
    absl::StatusOr<int64_t> value = FieldAs<int64_t>(id, token, vocab_at);
    if (!value.ok()) {
      status = value.status();
      break;
    }
    ids.push_back(*value);
  }
  EXPECT_THAT(ids, ElementsAre(0));
  EXPECT_EQ(Message(status), "cfg.json: model.vocab.b: expected an integer");
}

TEST_F(JsonFieldsTest, ParseEachStopsAtTheFirstErrorNamingTheItem) {
  const simdjson::dom::element root = Parse(R"({"steps": [1, 2, "x", 4]})");
  std::vector<bool> last_flags;
  auto parse = [&](simdjson::dom::element item, const JsonPath& item_at, bool is_last) {
    last_flags.push_back(is_last);
    return JsonAs<int64_t>(item, item_at);
  };
  auto steps = ParseEach<int64_t>(root, "steps", at_, parse);
  EXPECT_EQ(Message(steps.status()), "cfg.json: steps[2]: expected an integer");
  EXPECT_THAT(last_flags, ElementsAre(false, false, false));

  last_flags.clear();
  const simdjson::dom::element good = Parse(R"({"steps": [5, 6]})");
  auto values = ParseEach<int64_t>(good, "steps", at_, parse);
  ASSERT_TRUE(values.ok()) << values.status();
  EXPECT_THAT(*values, ElementsAre(5, 6));
  EXPECT_THAT(last_flags, ElementsAre(false, true));
  EXPECT_EQ(Message(ParseEach<int64_t>(good, "absent", at_, parse).status()),
            "cfg.json: absent: missing required field");
}

}  // namespace
}  // namespace switchyard::base
