// The JSON-schema compiler and the grammar matcher: which texts each schema accepts, byte by
// byte, and which schemas are refused (with the keyword named).
#include "structured/json_schema_grammar.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "structured/grammar_cache.h"
#include "structured/grammar_matcher.h"

namespace switchyard::structured {
namespace {

using ::testing::HasSubstr;

std::shared_ptr<const Grammar> MustCompile(const std::string& schema) {
  absl::StatusOr<std::shared_ptr<const Grammar>> g = CompileJsonSchema(schema);
  EXPECT_TRUE(g.ok()) << schema << ": " << g.status();
  return g.ok() ? *g : nullptr;
}

// Whole-text match: every byte accepted and the text complete at the end.
bool Matches(const std::shared_ptr<const Grammar>& g, const std::string& text) {
  GrammarMatcher m(g);
  for (char c : text) {
    if (!m.AcceptBytes(std::string_view(&c, 1)))
      return false;
  }
  return m.CanEnd();
}

struct Case {
  std::string schema;
  std::vector<std::string> valid;
  std::vector<std::string> invalid;
};

class SchemaCaseTest : public ::testing::TestWithParam<Case> {};

TEST_P(SchemaCaseTest, AcceptsExactlyTheValidTexts) {
  const Case& c = GetParam();
  std::shared_ptr<const Grammar> g = MustCompile(c.schema);
  ASSERT_NE(g, nullptr);
  for (const std::string& text : c.valid) {
    EXPECT_TRUE(Matches(g, text)) << c.schema << " should accept " << text;
    // Bytes at once agree with bytes one by one.
    GrammarMatcher m(g);
    EXPECT_TRUE(m.AcceptBytes(text) && m.CanEnd()) << text;
  }
  for (const std::string& text : c.invalid)
    EXPECT_FALSE(Matches(g, text)) << c.schema << " should reject " << text;
}

INSTANTIATE_TEST_SUITE_P(
    Schemas, SchemaCaseTest,
    ::testing::Values(
        Case{R"({"type": "integer"})", {"0", "-12", "120"}, {"01", "1.5", "", "-", "+1", " 1"}},
        Case{R"({"type": "number"})",
             {"1.5e-3", "-0.0", "2E+10", "7"},
             {"1.", ".5", "+1", "1e", "--1", "NaN"}},
        Case{R"({"type": "string"})",
             {R"("")", R"("a\n\u00e9\"")", "\"\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\""},
             {R"("a)", "\"\x01\"", R"("\x")", "\"\xC0\xAF\"", "\"\xED\xA0\x80\"",
              "\"\xF4\x90\x80\x80\"", R"("\u12G4")"}},
        Case{R"({"type": "boolean"})", {"true", "false"}, {"True", "1", "nul"}},
        Case{R"({"type": ["string", "null"]})", {R"("x")", "null"}, {"1", "{}"}},
        Case{R"({"type": ["integer", "number"]})", {"1", "1.5"}, {R"("1")"}},
        Case{R"({"type": "object", "properties": {"a": {"type": "integer"},
              "b": {"type": "string"}}, "required": ["a"]})",
             {R"({"a":1})", R"({"a":1,"b":"x"})", R"({"a": 1, "b": "x"})"},
             {"{}", R"({"b":"x","a":1})", R"({"a":1,"c":2})", R"({"a":1,})", R"({ "a":1})",
              R"({"a":1 ,"b":"x"})", R"({"a":  1})", R"({"a":1,"a":2})"}},
        Case{R"({"type": "object", "properties": {"a": {"type": "integer"},
              "b": {"type": "integer"}}, "required": ["b"]})",
             {R"({"b":1})", R"({"a":1,"b":2})"},
             {R"({"a":1})", "{}", R"({"b":1,"a":2})"}},
        Case{R"({"type": "object", "properties": {"a": {"type": "null"},
              "b": {"type": "null"}, "c": {"type": "null"}}})",
             {"{}", R"({"b":null})", R"({"a":null,"c":null})", R"({"a":null,"b":null,"c":null})"},
             {R"({,"b":null})", R"({"c":null,"a":null})"}},
        Case{R"({"type": "object", "properties": {"a": {"type": "integer"}},
              "additionalProperties": true})",
             {R"({"a":1,"zz":[1,{"q":null}]})", R"({"ab":2})", R"({"a":1,"b":2,"c":"d"})",
              R"({"":0})"},
             {R"({"a":1,"a":2})", R"({"a":"s"})", R"({"a":1,"b\n":2})"}},
        Case{R"({"type": "object", "properties": {"é": {"type": "integer"}},
              "additionalProperties": {"type": "boolean"}})",
             {"{\"\xC3\xA9\":1}", "{\"\xC3\xA8\":true}", "{\"\xC3\xA9x\":false}", R"({"e":true})"},
             {"{\"\xC3\xA9\":true}", "{\"\xC3\xA8\":1}"}},
        Case{R"({"type": "object", "additionalProperties": {"type": "integer"}})",
             {R"({"x":1,"y":2})", "{}"},
             {R"({"x":"s"})"}},
        Case{R"({"type": "object"})",
             {R"({"k":[1,2,{"z":true}],"s":"x"})", "{}", R"({"a": {"b": []}})"},
             {"[]", R"({"k"})", R"({"k":})"}},
        Case{R"({"type": "array", "items": {"type": "boolean"}, "minItems": 1, "maxItems": 2})",
             {"[true]", "[true,false]", "[true, false]"},
             {"[]", "[true,true,true]", "[1]", "[true,]"}},
        Case{R"({"type": "array", "items": {"type": "integer"}, "minItems": 2})",
             {"[1,2]", "[1,2,3,4]"},
             {"[1]", "[]"}},
        Case{R"({"type": "array"})", {"[]", R"([1,"a",[null]])"}, {"{}"}},
        Case{R"({"type": "array", "items": false})", {"[]"}, {"[1]"}},
        Case{R"({"enum": ["a", 1, null, {"x": [1]}, 2.5]})",
             {R"("a")", "1", "null", R"({"x":[1]})", "2.5"},
             {"2", R"("b")", R"({"x":[2]})"}},
        Case{R"({"type": "string", "enum": ["a", 1]})", {R"("a")"}, {"1"}},
        Case{R"({"const": "fixed", "description": "only this"})", {R"("fixed")"}, {R"("other")"}},
        Case{R"({"anyOf": [{"type": "string", "maxLength": 2}, {"type": "integer"}]})",
             {R"("ab")", "5", R"("")"},
             {R"("abc")", "1.5"}},
        Case{R"({"oneOf": [{"type": "boolean"}, {"type": "null"}]})", {"true", "null"}, {"0"}},
        Case{R"({"type": "string", "minLength": 2, "maxLength": 3})",
             {R"("ab")", R"("a\nb")", "\"\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\""},
             {R"("a")", R"("abcd")"}},
        Case{R"({"type": "string", "minLength": 2})", {R"("ab")", R"("abcdefgh")"}, {R"("a")"}},
        Case{R"({"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"},
              "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}},
              "required": ["v", "next"]}}, "$ref": "#/$defs/node"})",
             {R"({"v":1,"next":{"v":2,"next":null}})", R"({"v":1,"next":null})"},
             {R"({"v":1})", R"({"v":1,"next":{"v":2}})"}},
        Case{R"({"definitions": {"a/b": {"type": "null"}},
              "type": "array", "items": {"$ref": "#/definitions/a~1b"}})",
             {"[null,null]"},
             {"[1]"}},
        Case{R"({"type": "array", "items": {"$ref": "#"}})", {"[]", "[[],[[]]]"}, {"[1]"}},
        Case{R"({"title": "t", "description": "d", "type": "null", "examples": [null],
              "default": null, "$schema": "https://json-schema.org/draft/2020-12/schema"})",
             {"null"},
             {"1"}},
        Case{"true", {"1", R"({"a":[]})", R"("s")"}, {"nope"}},
        Case{"{}", {"null", "[1]"}, {"}"}}));

TEST(JsonSchemaGrammarTest, RefusesUnsupportedAndInvalidSchemas) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"type": "string", "pattern": "a+"})", "'pattern'"},
      {R"({"type": "integer", "minimum": 1})", "'minimum'"},
      {R"({"type": "string", "format": "date"})", "'format'"},
      {R"({"properties": {"a": {"type": "integer", "maximum": 3}}})", "'maximum'"},
      {R"({"$ref": "#/$defs/missing"})", "does not resolve"},
      {R"({"$ref": "http://example.com/s.json"})", "not supported"},
      {R"({"anyOf": []})", "non-empty"},
      {R"({"enum": []})", "no value"},
      {R"({"type": "integer", "enum": ["a"]})", "no value"},
      {R"({"type": "strin"})", "unknown type"},
      {R"({"type": )", "not valid JSON"},
      {R"({"$ref": "#"})", "left recursion"},
      {R"({"anyOf": [{"$ref": "#"}, {"type": "null"}]})", "left recursion"},
      {R"({"type": "object", "required": ["x"]})", "'x'"},
      {R"({"type": "string", "minLength": 5, "maxLength": 2})", "below"},
      {R"({"type": "array", "items": [{"type": "null"}]})", "array form"},
      {"false", "matches nothing"},
      {R"({"type": "string", "maxLength": 1e9})", "maxLength"},
      {R"({"type": "string", "maxLength": -1})", "non-negative"},
      {R"({"$ref": "#/$defs/a", "type": "object"})", "'$ref' beside 'type'"},
      {R"({"anyOf": [{"type": "null"}], "type": "null"})", "beside"},
      {R"({"enum": [1], "minLength": 1})", "beside"},
      {R"({"type": "object", "additionalProperties": 3})", "additionalProperties"},
      {"[1]", "object or a boolean"},
      {R"({"properties": {}, "items": {}})", "several types"},
  };
  for (const auto& [schema, fragment] : cases) {
    absl::StatusOr<std::shared_ptr<const Grammar>> g = CompileJsonSchema(schema);
    ASSERT_FALSE(g.ok()) << schema;
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument) << schema;
    EXPECT_THAT(std::string(g.status().message()), HasSubstr(fragment)) << schema;
  }
}

TEST(JsonSchemaGrammarTest, ErrorsNameTheLocation) {
  absl::StatusOr<std::shared_ptr<const Grammar>> g =
      CompileJsonSchema(R"({"type": "object", "properties": {"age": {"type": "integer",
                           "minimum": 0}}})");
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(std::string(g.status().message()), HasSubstr("#/properties/age"));
}

TEST(JsonSchemaGrammarTest, JsonObjectIsAnyObject) {
  std::shared_ptr<const Grammar> g = JsonObjectGrammar();
  EXPECT_TRUE(Matches(g, R"({"a":{"b":[1,2.5e3,"x",true,false,null]}, "c": {}})"));
  EXPECT_TRUE(Matches(g, "{}"));
  EXPECT_FALSE(Matches(g, "[]"));
  EXPECT_FALSE(Matches(g, R"("s")"));
  EXPECT_FALSE(Matches(g, R"({"a":1}})"));
}

TEST(JsonSchemaGrammarTest, CompletionStates) {
  std::shared_ptr<const Grammar> g = MustCompile(R"({"type": "integer"})");
  GrammarMatcher m(g);
  EXPECT_FALSE(m.CanEnd());
  EXPECT_TRUE(m.CanContinue());
  ASSERT_TRUE(m.AcceptBytes("12"));
  EXPECT_TRUE(m.CanEnd());
  EXPECT_TRUE(m.CanContinue());       // more digits may follow
  EXPECT_FALSE(m.AcceptBytes("3x"));  // refused as a whole: the state is unchanged
  ASSERT_TRUE(m.AcceptBytes("3"));
  GrammarMatcher closed(MustCompile(R"({"type": "boolean"})"));
  ASSERT_TRUE(closed.AcceptBytes("true"));
  EXPECT_TRUE(closed.CanEnd());
  EXPECT_FALSE(closed.CanContinue());
}

TEST(JsonSchemaGrammarTest, DeepNestingKeepsThePoolBounded) {
  GrammarMatcher m(JsonObjectGrammar());
  ASSERT_TRUE(m.AcceptBytes(R"({"a":)"));
  for (int i = 0; i < 20000; ++i)
    ASSERT_TRUE(m.AcceptBytes(R"([1,)"));
  ASSERT_TRUE(m.AcceptBytes("2"));
  for (int i = 0; i < 20000; ++i)
    ASSERT_TRUE(m.AcceptBytes("]"));
  ASSERT_TRUE(m.AcceptBytes("}"));
  EXPECT_TRUE(m.CanEnd());
  // A long flat array: the matcher compacts its stack pool as it goes.
  GrammarMatcher flat(JsonObjectGrammar());
  ASSERT_TRUE(flat.AcceptBytes(R"({"a":[)"));
  for (int i = 0; i < 100000; ++i)
    ASSERT_TRUE(flat.AcceptBytes(R"({"k":[true]},)"));
  ASSERT_TRUE(flat.AcceptBytes("1]}"));
  EXPECT_TRUE(flat.CanEnd());
}

TEST(GrammarCacheTest, RepeatedSpecsShareOneGrammar) {
  GrammarCache cache(2);
  StructuredOutputSpec a{StructuredOutputSpec::Kind::kJsonSchema, R"({"type": "null"})", {}};
  StructuredOutputSpec b{StructuredOutputSpec::Kind::kChoice, "", {"yes", "no"}};
  StructuredOutputSpec c{StructuredOutputSpec::Kind::kJsonObject, "", {}};
  auto a1 = cache.Get(a);
  auto a2 = cache.Get(a);
  ASSERT_TRUE(a1.ok() && a2.ok());
  EXPECT_EQ(a1->get(), a2->get());
  auto b1 = cache.Get(b);
  ASSERT_TRUE(b1.ok());
  EXPECT_TRUE(Matches(*b1, "yes"));
  EXPECT_TRUE(Matches(*b1, "no"));
  EXPECT_FALSE(Matches(*b1, "ye"));
  EXPECT_FALSE(Matches(*b1, "yess"));
  ASSERT_TRUE(cache.Get(c).ok());  // evicts a, the least recently used
  EXPECT_EQ(cache.size(), 2u);
  auto a3 = cache.Get(a);
  ASSERT_TRUE(a3.ok());
  EXPECT_NE(a1->get(), a3->get());
  StructuredOutputSpec bad{StructuredOutputSpec::Kind::kJsonSchema, R"({"minimum": 1})", {}};
  EXPECT_FALSE(cache.Get(bad).ok());
  EXPECT_EQ(cache.size(), 2u);
  StructuredOutputSpec empty{StructuredOutputSpec::Kind::kChoice, "", {}};
  EXPECT_FALSE(cache.Get(empty).ok());
}

}  // namespace
}  // namespace switchyard::structured
