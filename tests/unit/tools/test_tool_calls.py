"""Tool declarations, the registry and call parsing (no sandbox): duplicates raise, unknown names list the
known ones, each malformed call gets its own error kind, and tools reach the prompt either through a
template that renders them or through the Hermes block in the system message."""

from __future__ import annotations

import copy
import json

import pytest

from execrl.rollout.models import default_tokenizer
from execrl.tools import CallError, Tool, ToolCall, ToolError, ToolOutput, get_tool, parse_call, register_tool
from execrl.tools.calls import prompt_messages, template_renders_tools
from execrl.tools.registry import argument_problems, unregister_tool


def _echo() -> Tool:
    return Tool("echo", "say it back", {"type": "object", "properties": {"text": {"type": "string"},
                "times": {"type": "integer"}}, "required": ["text"]}, lambda a, _c: ToolOutput(a["text"]))  # fmt: skip


def test_registry_refuses_duplicates_and_lists_known_tools() -> None:
    register_tool(_echo())
    try:
        with pytest.raises(ToolError, match="'echo' is already registered"):
            register_tool(_echo())
        with pytest.raises(ToolError, match="known tools: echo, python, run_tests"):
            get_tool("shell")
        with pytest.raises(ToolError, match="already registered"):
            register_tool(copy.copy(get_tool("python")))  # a built-in cannot be replaced by accident
    finally:
        unregister_tool("echo")


def test_declaration_is_the_openai_format() -> None:
    declared = get_tool("python").declaration()
    assert declared["type"] == "function"
    assert declared["function"]["name"] == "python"
    assert declared["function"]["parameters"]["required"] == ["code"]


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("<tool_call>{'name': 'python'}</tool_call>", "bad_json"),
        ('<tool_call>{"name": "python", "arguments": {"code": "1"}}', "bad_call"),
        ('<tool_call>["python"]</tool_call>', "bad_call"),
        ('<tool_call>{"name": "run_tests", "arguments": {"program": "x"}}</tool_call>', "unknown_tool"),
        ('<tool_call>{"name": "python", "arguments": {"code": 1}}</tool_call>', "bad_arguments"),
        ('<tool_call>{"name": "python", "arguments": "{not json"}</tool_call>', "bad_json"),
    ],
)
def test_each_malformed_call_has_its_error_kind(text: str, kind: str) -> None:
    result = parse_call(f"Let me compute. {text}", ["python"])
    assert isinstance(result, CallError) and result.kind == kind, result


def test_a_call_parses_with_arguments_as_object_or_json_string() -> None:
    as_object = parse_call(
        '<tool_call>\n{"name": "python", "arguments": {"code": "1+1"}}\n</tool_call>', ["python"]
    )
    wire = json.dumps({"name": "python", "arguments": json.dumps({"code": "1+1"})})
    assert (
        as_object
        == parse_call(f"<tool_call>{wire}</tool_call>", ["python"])
        == ToolCall("python", {"code": "1+1"})
    )
    assert parse_call("The answer is 4.", ["python"]) is None


def test_argument_checks() -> None:
    echo = _echo()
    assert argument_problems(echo, {"text": "a", "times": 2}) == []
    assert argument_problems(echo, {"times": True, "loud": 1}) == [
        "missing required argument 'text'",
        "argument 'times' must be of type integer, got bool",
        "unknown argument 'loud'; echo takes ['text', 'times']",
    ]
    assert argument_problems(echo, [1]) == ["arguments must be a JSON object, got list"]


def test_tools_go_to_a_template_that_renders_them_else_to_the_hermes_block() -> None:
    declared = [get_tool("python").declaration()]
    smol = default_tokenizer()
    assert not template_renders_tools(smol, declared)  # SmolLM2's template ignores tools
    messages = prompt_messages([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "q"}],
                               declared, template_tools=False)  # fmt: skip
    assert (
        messages[0]["content"].startswith("Be brief.\n\n# Tools")
        and '"name": "python"' in messages[0]["content"]
    )
    assert "<tool_call>" in messages[0]["content"] and len(messages) == 2
    aware = copy.deepcopy(smol)
    aware.chat_template = (
        "{% if tools %}<tools>{{ tools | tojson }}</tools>{% endif %}"
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    assert template_renders_tools(aware, declared)
    assert prompt_messages([{"role": "user", "content": "q"}], declared, template_tools=True) == [
        {"role": "user", "content": "q"}
    ]


def test_tool_metrics_hand_computed() -> None:
    from execrl.episodes import Episode, Turn, Verdict
    from execrl.episodes.metrics import episode_metrics
    from execrl.tools import tool_metrics

    def episode(
        calls: int, errors: int, cut: int, tool_s: float, memory: float, stop: str, reward: float
    ) -> Episode:
        info = {"tool_calls": float(calls), "parse_errors": float(errors), "truncated_outputs": float(cut),
                "tool_time_s": tool_s, "session_memory_mb": memory}  # fmt: skip
        turns = tuple(Turn(2, 4, "stop") for _ in range(calls + 1))
        return Episode(0, "t", 0, (1, 2, 3, 4), (False, False, True, True), (0.0,) * 4, (0.0,) * 4, 2, turns,
                       (), "", stop, Verdict(reward, True, reward == 1.0, "passed"), info)  # fmt: skip

    episodes = [
        episode(3, 1, 1, 0.5, 40.0, "answer", 1.0),
        episode(1, 1, 0, 0.25, 60.0, "max_tool_calls", 0.0),
    ]
    out = tool_metrics(episodes, step_s=3.0)
    assert out["tools/calls_per_episode"] == 2.0
    assert out["tools/parse_error_rate"] == 0.5  # 2 malformed of 4 calls
    assert out["tools/time_share"] == 0.25  # 0.75 s of 3 s
    assert out["tools/session_memory_mb_max"] == 60.0 and out["tools/truncated_outputs"] == 1.0
    assert (out["tools/stop_answer"], out["tools/stop_max_tool_calls"]) == (0.5, 0.5)
    assert episode_metrics(episodes, max_new_tokens=8)["reward/mean"] == 0.5
    assert "tools/parse_error_rate" not in tool_metrics(
        [episode(0, 0, 0, 0.0, 1.0, "answer", 1.0)], step_s=1.0
    )


@pytest.mark.parametrize(
    ("text", "call"),
    [
        ("Compute:\n```python\nx = 2\nprint(x)\n```\n", ToolCall("python", {"code": "x = 2\nprint(x)"})),
        ("```py\n1 + 1\n```", ToolCall("python", {"code": "1 + 1"})),
        ("```python\nfirst\n```\nthen\n```python\nsecond\n```\n\n", ToolCall("python", {"code": "second"})),
        ("The answer is 4.", None),  # no block: the final answer
        ("```python\nx = 1\n```\nSo the answer is 1.", None),  # the block is not at the end of the turn
        ("Here:\n```\n", None),  # a bare fence opening a block, not a python call
        ("```bash\nls\n```\n", None),  # another language
        ("```python\nx = 1\n```\nand\n```\n", None),  # the last fence closes no python block
        ("```python\n\n```\n", CallError("bad_arguments", "the python block is empty")),
    ],
)
def test_python_block_calls(text: str, call: ToolCall | CallError | None) -> None:
    from execrl.tools.calls import PYTHON_BLOCK_STOP, call_stop, find_call

    assert find_call(text, ("python",), "python_block") == call
    assert call_stop("python_block") == PYTHON_BLOCK_STOP and call_stop("hermes") == "</tool_call>"


def test_python_block_prompt_and_answers() -> None:
    from execrl.tools.calls import response_content

    decl = [get_tool("python").declaration()]
    [system, _user] = prompt_messages([{"role": "user", "content": "q"}], decl, template_tools=True,
                                      call_format="python_block")  # fmt: skip
    assert "```python block" in system["content"]  # the convention goes in even for a tool template
    assert response_content("42", call_format="python_block", template_tools=False) == "```output\n42\n```"
    assert response_content("42", call_format="hermes", template_tools=False) == (
        "<tool_response>\n42\n</tool_response>"
    )
    assert response_content("42", call_format="hermes", template_tools=True) == "42"
