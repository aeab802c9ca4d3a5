// Arbitrary bytes as a chat template: compile, and if it compiles, render over a small fixed
// conversation. Must never crash or hang; the render limits bound every loop and recursion.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "text/jinja/template.h"
#include "text/jinja/value.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using switchyard::text::jinja::RenderLimits;
  using switchyard::text::jinja::Template;
  using switchyard::text::jinja::ValueFromJson;
  std::string_view source(reinterpret_cast<const char*>(data), size);
  auto tmpl = Template::Compile(source);
  if (!tmpl.ok())
    return 0;
  static const auto* messages = new auto(ValueFromJson(
      R"([{"role":"system","content":"sys"},{"role":"user","content":"hi \u00e9"},)"
      R"({"role":"assistant","content":"ok","tool_calls":[{"function":{"name":"f","arguments":{"a":1}}}]}])",
      "fuzz"));
  RenderLimits limits;
  limits.max_steps = 200000;
  limits.max_output_bytes = 1 << 20;
  (void)(*tmpl)->Render({{"messages", **messages},
                         {"add_generation_prompt", switchyard::text::jinja::Value(true)},
                         {"bos_token", switchyard::text::jinja::Value("<s>")}},
                        limits);
  return 0;
}
