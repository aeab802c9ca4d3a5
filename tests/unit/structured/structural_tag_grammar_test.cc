// The structural-tag compiler: free text until a trigger, then a structure's begin, a JSON
// text valid for its schema and its end (checked byte by byte through the real matcher), the
// trigger automaton's overlapping cases, and what the compiler refuses.
#include "structured/structural_tag_grammar.h"

#include <string>

#include "fmt/format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "grammar_test_util.h"
#include "structured/grammar_matcher.h"

namespace switchyard::structured {
namespace {

using ::testing::HasSubstr;

std::shared_ptr<const Grammar> MustCompile(const std::string& json) {
  absl::StatusOr<std::shared_ptr<const Grammar>> g = CompileStructuralTag(json);
  EXPECT_TRUE(g.ok()) << json << ": " << g.status();
  return g.ok() ? *g : nullptr;
}

// Whether every byte of `text` is accepted (the text may stop mid-structure).
bool Prefix(const std::shared_ptr<const Grammar>& g, std::string_view text) {
  GrammarMatcher m(g);
  for (char c : text) {
    if (!m.AcceptBytes(std::string_view(&c, 1)))
      return false;
  }
  return true;
}

const char* const kWeather = R"({"type": "structural_tag",
  "structures": [{"begin": "<function=get_weather>",
                  "schema": {"type": "object", "properties": {"city": {"type": "string"}},
                             "required": ["city"]},
                  "end": "</function>"},
                 {"begin": "<function=get_time>",
                  "schema": {"type": "object", "properties": {"zone": {"type": "integer"}},
                             "required": ["zone"]},
                  "end": "</function>"}],
  "triggers": ["<function="]})";

TEST(StructuralTagTest, FreeTextAroundValidStructures) {
  std::shared_ptr<const Grammar> g = MustCompile(kWeather);
  ASSERT_NE(g, nullptr);
  for (const char* text : {
           "",
           "No tools needed: < function <functio <func=",
           R"(<function=get_weather>{"city": "Paris"}</function>)",
           R"(Let me check. <function=get_weather>{"city":"Oslo"}</function> and then)"
           R"( <function=get_time>{"zone": -2}</function><function=get_time>{"zone":1}</function>)",
           "\xC3\xA9\xFF arbitrary bytes outside structures",
       }) {
    EXPECT_TRUE(FullMatch(g, text)) << text;
  }
}

TEST(StructuralTagTest, ATriggerCommitsToAStructure) {
  std::shared_ptr<const Grammar> g = MustCompile(kWeather);
  ASSERT_NE(g, nullptr);
  // An unknown function, a schema violation, a wrong end, a missing end.
  EXPECT_FALSE(Prefix(g, "<function=get_date>"));
  EXPECT_FALSE(Prefix(g, R"(<function=get_weather>{"town": "Paris"})"));
  EXPECT_FALSE(Prefix(g, R"(<function=get_time>{"zone": "UTC"})"));
  EXPECT_FALSE(Prefix(g, R"(<function=get_weather>{"city": "Paris"}</func>)"));
  EXPECT_FALSE(Prefix(g, R"(<function=get_weather>{"city": "Paris"} </function>)"));
  EXPECT_TRUE(Prefix(g, R"(<function=get_weather>{"city": "Par)"));
  EXPECT_FALSE(FullMatch(g, R"(<function=get_weather>{"city": "Paris"})"));
  EXPECT_FALSE(FullMatch(g, "text <function="));
}

// Overlapping triggers: the automaton must find a trigger that starts inside a failed partial
// match ("aab" inside "aaab"), and triggers that are suffixes of each other fire together.
TEST(StructuralTagTest, OverlappingTriggers) {
  std::shared_ptr<const Grammar> g = MustCompile(R"({"structures": [
      {"begin": "aab:", "schema": {"type": "integer"}, "end": ";"}], "triggers": ["aab"]})");
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(FullMatch(g, "aaab:12;x"));
  EXPECT_FALSE(Prefix(g, "aaabx"));
  EXPECT_TRUE(FullMatch(g, "aaaa ab aa b"));

  std::shared_ptr<const Grammar> h = MustCompile(R"J({"structures": [
      {"begin": "xy[", "schema": {"type": "boolean"}, "end": "]"},
      {"begin": "y(", "schema": {"type": "null"}, "end": ")"}], "triggers": ["xy", "y"]})J");
  ASSERT_NE(h, nullptr);
  // After "xy" both triggers have fired: either structure may follow.
  EXPECT_TRUE(FullMatch(h, "xy[true]"));
  EXPECT_TRUE(FullMatch(h, "xy(null)"));
  EXPECT_TRUE(FullMatch(h, "zy(null) xy[false]"));
  EXPECT_FALSE(Prefix(h, "zy["));
  // A trigger that is a prefix of another fires first.
  std::shared_ptr<const Grammar> p = MustCompile(R"({"structures": [
      {"begin": "<a", "schema": {"type": "integer"}, "end": ">"}], "triggers": ["<", "<ab"]})");
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(FullMatch(p, "<a7>"));
  EXPECT_FALSE(Prefix(p, "<b"));
}

TEST(StructuralTagTest, SchemasCanBeBooleansAndRepeat) {
  std::shared_ptr<const Grammar> g = MustCompile(R"({"structures": [
      {"begin": "<x>", "schema": true, "end": "</x>"},
      {"begin": "<y>", "schema": true, "end": "</y>"}], "triggers": ["<x>", "<y>"]})");
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(FullMatch(g, R"(<x>[1, "a", {"k": null}]</x> <y>2</y>)"));
  EXPECT_FALSE(Prefix(g, "<y>nope"));
}

TEST(StructuralTagTest, RefusesInvalidSpecifications) {
  const std::string long_trigger(5000, 'a');
  std::string many = R"({"structures": [)";
  for (size_t i = 0; i <= kMaxStructuralTags; ++i)
    many += fmt::format(R"({}{{"begin": "<t", "schema": true, "end": ">"}})", i ? "," : "");
  many += R"(], "triggers": ["<t"]})";
  const struct {
    std::string json;
    std::string fragment;
  } cases[] = {
      {"{", "must be a JSON object"},
      {"[]", "must be a JSON object"},
      {"{}", "structures is required"},
      {R"({"type": "structural_tag", "format": {"type": "triggered_tags"}})", "not `format`"},
      {R"({"structures": [], "triggers": ["<"]})", "structures must be a list"},
      {R"({"structures": [{"begin": "<", "schema": true, "end": ">"}]})", "triggers must be"},
      {R"({"structures": [{"begin": "<", "schema": true, "end": ">"}], "triggers": [""]})",
       "non-empty"},
      {R"({"structures": [{"begin": "<", "schema": true, "end": ">"}], "triggers": [7]})",
       "non-empty string"},
      {R"J({"structures": [{"begin": "(", "schema": true, "end": ")"}], "triggers": ["<"]})J",
       "does not start with any trigger"},
      {R"({"structures": [{"begin": "<", "end": ">"}], "triggers": ["<"]})",
       "structures[0].schema must be"},
      {R"({"structures": [{"begin": 1, "schema": true, "end": ">"}], "triggers": ["<"]})",
       "structures[0].begin must be a string"},
      {R"({"structures": [{"begin": "<", "schema": {"type": "integer", "minimum": 1},)"
       R"( "end": ">"}], "triggers": ["<"]})",
       "structures[0].schema: "},
      {R"({"structures": [{"begin": "<", "schema": true, "end": ">", "x": 1}],)"
       R"( "triggers": ["<"]})",
       "unknown field 'x'"},
      {R"({"type": "regex", "structures": [{"begin": "<", "schema": true, "end": ">"}],)"
       R"( "triggers": ["<"]})",
       "type must be"},
      {fmt::format(R"({{"structures": [{{"begin": "{0}", "schema": true, "end": ">"}}],)"
                   R"( "triggers": ["{0}"]}})",
                   long_trigger),
       "triggers are too long"},
      {many, "structures must be a list of 1 to"},
  };
  for (const auto& c : cases) {
    absl::StatusOr<std::shared_ptr<const Grammar>> g = CompileStructuralTag(c.json);
    ASSERT_FALSE(g.ok()) << c.json.substr(0, 200);
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(g.status().message()), HasSubstr(c.fragment)) << c.json.substr(0, 200);
  }
}

}  // namespace
}  // namespace switchyard::structured
