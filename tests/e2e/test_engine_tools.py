"""Tool calling and reasoning as vLLM serves them, through the official `openai` client:
tool_choice named and "required" (forced through the structured-output grammar) in a full
round trip (call -> tool result message -> final answer), streamed calls that assemble to the
same calls, vLLM's 400s, and the --tool-call-parser / --reasoning-parser paths.

The bundled tiny model has random weights: only a forced choice gives well-formed calls, and
it never emits a call or a <think> block on its own. The parser paths ("auto" with a parser,
reasoning) are driven deterministically by constraining the output with structured outputs
(a JSON schema or a regex) to text in the format the parser reads."""
import json

import openai
import pytest

from engine_server import MODEL_NAME, EngineServer

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather in a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "enum": ["Paris", "Tokyo"]},
        "metric": {"type": "boolean"}}, "required": ["city", "metric"]}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "parameters": {"type": "object", "properties": {
        "zone": {"type": "string", "enum": ["UTC", "CET"]}}, "required": ["zone"]}}}
TOOLS = [WEATHER, TIME]
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
# A seed whose sampled "required" array closes (random weights: greedy loops to max_tokens).
REQUIRED = {"tool_choice": "required", "seed": 6, "max_tokens": 300}
NAMED = {"tool_choice": {"type": "function", "function": {"name": "get_weather"}},
         "temperature": 0, "max_tokens": 100}


@pytest.fixture(scope="module")
def engine():
    with EngineServer("--num-gpu-blocks-override", "512") as server:
        yield server


@pytest.fixture(scope="module")
def client(engine):
    with openai.OpenAI(base_url=engine.base_url, api_key="unused", max_retries=0,
                       timeout=60) as c:
        yield c


def chat(client, messages=ASK, **kw):
    return client.chat.completions.create(model=MODEL_NAME, messages=messages, tools=TOOLS, **kw)


def check_arguments(name, arguments):
    """The arguments match the tool's schema (a JSON object with its required properties, of
    their types)."""
    args = json.loads(arguments)
    if name == "get_weather":
        assert set(args) == {"city", "metric"} and args["city"] in ("Paris", "Tokyo")
        assert isinstance(args["metric"], bool)
    else:
        assert name == "get_time" and set(args) == {"zone"} and args["zone"] in ("UTC", "CET")


def assemble(stream):
    """The calls, content, reasoning and finish reason a client rebuilds from a stream; checks
    the delta shape (a call's first delta has its id, type and name, later ones arguments)."""
    calls, content, reasoning, finish = [], "", "", None
    for chunk in stream:
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        content += delta.content or ""
        reasoning += getattr(delta, "reasoning", None) or ""
        for tc in delta.tool_calls or []:
            if tc.id is not None:
                assert tc.index == len(calls) and tc.type == "function" and tc.function.name
                assert tc.id.startswith("chatcmpl-tool-")
                calls.append({"id": tc.id, "name": tc.function.name, "arguments": ""})
            else:
                assert tc.function.name is None
            calls[tc.index]["arguments"] += tc.function.arguments or ""
        finish = chunk.choices[0].finish_reason or finish
    return calls, content, reasoning, finish


def round_trip(client, message):
    """Sends the assistant's calls back with a tool result each and asks for the answer."""
    history = ASK + [message.model_dump(exclude_none=True)]
    for call in message.tool_calls:
        history.append({"role": "tool", "tool_call_id": call.id, "content": '{"temp": 21}'})
    answer = chat(client, history, tool_choice="none", max_tokens=8, temperature=0)
    assert answer.choices[0].message.tool_calls in (None, [])
    assert isinstance(answer.choices[0].message.content, str)
    assert answer.choices[0].finish_reason in ("stop", "length")
    return answer


def test_named_tool_round_trip(client):
    r = chat(client, **NAMED)
    choice = r.choices[0]
    assert choice.finish_reason == "stop"  # vLLM: a named call keeps "stop"
    assert choice.message.content == ""
    (call,) = choice.message.tool_calls
    assert call.type == "function" and call.id.startswith("chatcmpl-tool-")
    assert len(call.id) == len("chatcmpl-tool-") + 32
    assert call.function.name == "get_weather"
    check_arguments(call.function.name, call.function.arguments)
    round_trip(client, choice.message)


def test_required_tool_round_trip(client):
    r = chat(client, **REQUIRED)
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == ""
    assert len(choice.message.tool_calls) >= 1
    for call in choice.message.tool_calls:
        assert call.function.name in ("get_weather", "get_time")
        check_arguments(call.function.name, call.function.arguments)
    assert len({c.id for c in choice.message.tool_calls}) == len(choice.message.tool_calls)
    round_trip(client, choice.message)


@pytest.mark.parametrize("kw", [NAMED, REQUIRED], ids=["named", "required"])
def test_streamed_calls_assemble_to_the_same_calls(client, kw):
    whole = chat(client, **kw).choices[0]
    calls, content, _, finish = assemble(chat(client, stream=True, **kw))
    assert [(c["name"], c["arguments"]) for c in calls] == [
        (c.function.name, c.function.arguments) for c in whole.message.tool_calls]
    assert content == ""
    assert finish == whole.finish_reason


def test_tool_choice_none_still_renders_tools(client, engine):
    """vLLM renders the tools into the prompt for "none" unless
    --exclude-tools-when-tool-choice-none is given: the prompt is longer with them."""
    with_tools = chat(client, tool_choice="none", max_tokens=1)
    without = client.chat.completions.create(model=MODEL_NAME, messages=ASK, max_tokens=1)
    assert with_tools.usage.prompt_tokens > without.usage.prompt_tokens
    assert with_tools.choices[0].message.tool_calls in (None, [])
    with EngineServer("--exclude-tools-when-tool-choice-none") as excluding:
        with openai.OpenAI(base_url=excluding.base_url, api_key="x", max_retries=0) as c:
            excluded = chat(c, tool_choice="none", max_tokens=1)
    assert excluded.usage.prompt_tokens == without.usage.prompt_tokens


@pytest.mark.parametrize("kw,param,message", [
    ({"tool_choice": "auto"}, None,
     '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'),
    ({}, None, '"auto" tool choice requires --enable-auto-tool-choice'),  # tools imply auto
    ({"tools": None, "tool_choice": "required"}, "tool_choice",
     "When using `tool_choice`, `tools` must be set."),
    ({"tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice",
     "The tool specified in `tool_choice` does not match any of the specified `tools`"),
    ({"tools": [], "tool_choice": "none"}, "tools", "`tools` must not be an empty array."),
    ({"tool_choice": "required", "response_format": {"type": "json_object"}}, None,
     "You can only either use constraints for structured outputs or tools, not both."),
], ids=["auto", "implicit_auto", "no_tools", "unknown_name", "empty_tools", "with_format"])
def test_vllm_400s(client, kw, param, message):
    args = {"model": MODEL_NAME, "messages": ASK, "tools": TOOLS, "max_tokens": 4, **kw}
    if args["tools"] is None:
        del args["tools"]
    with pytest.raises(openai.BadRequestError) as err:
        client.chat.completions.create(**args)
    body = err.value.body
    assert message in body["message"]
    assert body["param"] == param
    assert err.value.status_code == 400


def test_auto_needs_a_parser_at_startup():
    with pytest.raises(AssertionError, match="requires --tool-call-parser"):
        EngineServer("--enable-auto-tool-choice").start()
    with pytest.raises(AssertionError, match="unknown tool call parser"):
        EngineServer("--enable-auto-tool-choice", "--tool-call-parser", "nope").start()


# "auto" through a parser: the output is constrained to a call in the parser's format.
LLAMA3_CALL = {"type": "json_schema", "json_schema": {"name": "call", "schema": {
    "type": "object", "properties": {
        "name": {"enum": ["get_time"]},
        "parameters": {"type": "object", "properties": {"zone": {"enum": ["UTC"]}},
                       "required": ["zone"]}},
    "required": ["name", "parameters"]}}}
HERMES_CALL = ('Checking:<tool_call>\n{"name": "get_weather", "arguments": '
               '{"city": "(Paris|Tokyo)", "metric": (true|false)}}\n</tool_call>')


@pytest.fixture(scope="module")
def llama3_engine():
    with EngineServer("--enable-auto-tool-choice", "--tool-call-parser", "llama3_json") as s:
        with openai.OpenAI(base_url=s.base_url, api_key="x", max_retries=0, timeout=60) as c:
            yield c


@pytest.fixture(scope="module")
def hermes_reasoning_engine():
    with EngineServer("--enable-auto-tool-choice", "--tool-call-parser", "hermes",
                      "--reasoning-parser", "deepseek_r1") as s:
        with openai.OpenAI(base_url=s.base_url, api_key="x", max_retries=0, timeout=60) as c:
            yield c


def test_auto_llama3_json_parses_calls(llama3_engine):
    kw = {"tool_choice": "auto", "response_format": LLAMA3_CALL, "temperature": 0,
          "max_tokens": 60}
    whole = chat(llama3_engine, **kw).choices[0]
    assert whole.finish_reason == "tool_calls"
    assert whole.message.content is None  # vLLM: nothing but calls
    (call,) = whole.message.tool_calls
    assert call.function.name == "get_time" and json.loads(call.function.arguments) == {
        "zone": "UTC"}
    calls, content, _, finish = assemble(chat(llama3_engine, stream=True, **kw))
    assert [(c["name"], c["arguments"]) for c in calls] == [
        (call.function.name, call.function.arguments)]
    assert content == "" and finish == "tool_calls"
    round_trip(llama3_engine, whole.message)


def test_auto_plain_text_stays_content(llama3_engine):
    r = chat(llama3_engine, tool_choice="auto", extra_body={
        "structured_outputs": {"regex": "Hello there"}}, max_tokens=20)
    assert r.choices[0].message.content == "Hello there"
    assert r.choices[0].message.tool_calls in (None, [])
    assert r.choices[0].finish_reason == "stop"


def test_reasoning_then_hermes_calls(hermes_reasoning_engine):
    kw = {"tool_choice": "auto", "max_tokens": 120, "temperature": 0,
          "extra_body": {"structured_outputs": {"regex": "<think>[a-z ]{1,12}</think>"
                                                         + HERMES_CALL.replace("{", r"\{")
                                                         .replace("}", r"\}")}}}
    whole = chat(hermes_reasoning_engine, **kw).choices[0]
    message = whole.message
    assert message.reasoning and "<think>" not in message.reasoning
    assert message.content == "Checking:"
    (call,) = message.tool_calls
    assert call.function.name == "get_weather"
    check_arguments(call.function.name, call.function.arguments)
    assert whole.finish_reason == "tool_calls"
    calls, content, reasoning, finish = assemble(chat(hermes_reasoning_engine, stream=True, **kw))
    assert reasoning == message.reasoning and content == message.content
    assert [(c["name"], c["arguments"]) for c in calls] == [
        (call.function.name, call.function.arguments)]
    assert finish == "tool_calls"


def test_reasoning_only(hermes_reasoning_engine):
    r = hermes_reasoning_engine.chat.completions.create(
        model=MODEL_NAME, messages=ASK, max_tokens=40, temperature=0,
        extra_body={"structured_outputs": {"regex": "<think>[a-z]{1,6}</think>Paris"}})
    message = r.choices[0].message
    assert message.content == "Paris"
    assert message.reasoning and message.reasoning.isalpha()
    _, content, reasoning, _ = assemble(hermes_reasoning_engine.chat.completions.create(
        model=MODEL_NAME, messages=ASK, max_tokens=40, temperature=0, stream=True,
        extra_body={"structured_outputs": {"regex": "<think>[a-z]{1,6}</think>Paris"}}))
    assert (reasoning, content) == (message.reasoning, "Paris")


def test_parallel_tool_calls_false_answers_the_first_call(client):
    """Newer vLLM truncates to the first call when parallel_tool_calls is false."""
    both = chat(client, **REQUIRED).choices[0].message.tool_calls
    assert len(both) >= 2  # the seed's array holds several calls
    first = chat(client, parallel_tool_calls=False, **REQUIRED).choices[0].message.tool_calls
    assert [(c.function.name, c.function.arguments) for c in first] == [
        (both[0].function.name, both[0].function.arguments)]
    calls, _, _, _ = assemble(chat(client, parallel_tool_calls=False, stream=True, **REQUIRED))
    assert [(c["name"], c["arguments"]) for c in calls] == [
        (both[0].function.name, both[0].function.arguments)]


def test_auto_qwen3_coder_types_values_by_schema():
    """Qwen3-Coder's XML calls: the parameter values come back typed by the tool's schema
    (metric a boolean, city a string), streamed and not."""
    regex = ("<tool_call>\n<function=get_weather>\n<parameter=city>\n(Paris|Tokyo)\n</parameter>\n"
             "<parameter=metric>\n(true|false)\n</parameter>\n</function>\n</tool_call>")
    with EngineServer("--enable-auto-tool-choice", "--tool-call-parser", "qwen3_coder") as s:
        with openai.OpenAI(base_url=s.base_url, api_key="x", max_retries=0, timeout=60) as c:
            kw = {"tool_choice": "auto", "max_tokens": 300, "temperature": 0,
                  "extra_body": {"structured_outputs": {"regex": regex}}}
            whole = chat(c, **kw).choices[0]
            (call,) = whole.message.tool_calls
            assert call.function.name == "get_weather"
            check_arguments(call.function.name, call.function.arguments)
            assert whole.finish_reason == "tool_calls"
            calls, _, _, finish = assemble(chat(c, stream=True, **kw))
            assert [(x["name"], x["arguments"]) for x in calls] == [
                (call.function.name, call.function.arguments)]
            assert finish == "tool_calls"
