"""OpenAI ``tools`` on ``execrl serve``: declarations validated with errors naming the field, a parsed
call returned as ``tool_calls``, a malformed one kept as content, tool messages rendered as the training
episode renders them, and a round trip with the official ``openai`` client (a scripted engine: a random
tiny model never emits a call)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import openai
import pytest
from scripted_engine import ScriptedEngine

from execrl.rollout.models import default_tokenizer
from execrl.serve.api import RequestError, parse_chat_request
from execrl.serve.background import serve_in_thread
from execrl.serve.batcher import Choice
from execrl.serve.server import ServeConfig, build_app
from execrl.serve.tool_calls import answer_message, chat_messages, declarations
from execrl.tools import get_tool
from execrl.tools.calls import CALL_END

NAME = "scripted"
PYTHON = get_tool("python").declaration()
USER = {"role": "user", "content": "What is 6 * 7 * 11?"}


def _body(**fields: Any) -> dict[str, Any]:
    return {"model": NAME, "messages": [USER], "tools": [PYTHON], **fields}


def _refused(body: dict[str, Any]) -> RequestError:
    with pytest.raises(RequestError) as err:
        parse_chat_request(body)
    return err.value


def test_bad_tool_declarations_name_the_field() -> None:
    bad_name = {"type": "function", "function": {"name": "has space"}}
    assert _refused(_body(tools=[PYTHON, bad_name])).param == "tools[1].function.name"
    not_object = {"type": "function", "function": {"name": "f", "parameters": {"type": "array"}}}
    assert _refused(_body(tools=[not_object])).param == "tools[0].function.parameters"
    bad_schema = {
        "type": "function",
        "function": {"name": "f", "parameters": {"type": "object", "required": 3}},
    }
    assert "not a valid JSON schema" in _refused(_body(tools=[bad_schema])).message
    assert _refused(_body(tools=[PYTHON, PYTHON])).param == "tools[1].function.name"
    assert _refused(_body(tools=[{"type": "retrieval"}])).param == "tools[0].type"


def test_unsupported_tool_forms_are_refused_with_the_field() -> None:
    assert _refused(_body(tool_choice="required")).param == "tool_choice"
    named = {"type": "function", "function": {"name": "python"}}
    assert _refused(_body(tool_choice=named)).param == "tool_choice"
    assert _refused(_body(stream=True)).param == "stream"
    assert _refused(_body(functions=[{"name": "f"}])).param == "functions"
    no_id = [USER, {"role": "tool", "content": "42"}]
    assert "tool_call_id" in _refused(_body(messages=no_id)).message
    call = {"id": "c1", "type": "function", "function": {"name": "python", "arguments": "{not json"}}
    bad_args = [USER, {"role": "assistant", "content": None, "tool_calls": [call]}]
    assert _refused(_body(messages=bad_args)).param == "messages[1].tool_calls[0].function.arguments"


def test_a_parsed_call_becomes_tool_calls_and_a_malformed_one_stays_content() -> None:
    declared = declarations(parse_chat_request(_body()))
    call = 'Let me compute.\n<tool_call>\n{"name": "python", "arguments": {"code": "6*7*11"}}\n'
    message, finish = answer_message(Choice(call, (), "stop", CALL_END), declared)
    assert finish == "tool_calls" and message["content"] == "Let me compute.\n"
    [tool_call] = message["tool_calls"]
    assert tool_call["id"].startswith("call_") and tool_call["type"] == "function"
    assert tool_call["function"]["name"] == "python"
    assert json.loads(tool_call["function"]["arguments"]) == {"code": "6*7*11"}
    for malformed in ("<tool_call>{not json", '<tool_call>{"name": "shell", "arguments": {}}',
                      '<tool_call>{"name": "python", "arguments": {"cod": "1"}}'):  # fmt: skip
        message, finish = answer_message(Choice(malformed, (), "stop", CALL_END), declared)
        assert (message, finish) == ({"role": "assistant", "content": malformed + CALL_END}, "stop")
    plain, finish = answer_message(Choice("462", (), "length", None), declared)
    assert (plain["content"], finish) == ("462", "length")


def test_tool_choice_none_declares_nothing() -> None:
    req = parse_chat_request(_body(tool_choice="none"))
    assert declarations(req) is None
    assert chat_messages(req, template_tools=False) == [USER]
    declared = chat_messages(parse_chat_request(_body()), template_tools=False)
    assert declared[0]["role"] == "system" and '"name": "python"' in declared[0]["content"]


def _script(_turn: int, context: str) -> str:
    if "<tool_response>" in context:
        return "The answer is 462."
    if "BROKEN" in context:
        return "<tool_call>{not json</tool_call>"
    return 'Let me compute.\n<tool_call>\n{"name": "python", "arguments": {"code": "6*7*11"}}\n</tool_call>'


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[str, ScriptedEngine]]:
    engine = ScriptedEngine(default_tokenizer(), _script)
    engine.model = SimpleNamespace(config=SimpleNamespace(max_position_embeddings=4096))  # type: ignore[attr-defined]
    with serve_in_thread(build_app(engine, ServeConfig(model_name=NAME, default_max_tokens=64))) as url:  # type: ignore[arg-type]
        yield url, engine


def test_openai_client_round_trip(served: tuple[str, ScriptedEngine]) -> None:
    url, engine = served
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
    messages: list[Any] = [USER]
    first = client.chat.completions.create(model=NAME, messages=messages, tools=[PYTHON])  # type: ignore[list-item]
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content == "Let me compute.\n"
    [call] = choice.message.tool_calls or []
    assert call.function.name == "python" and json.loads(call.function.arguments) == {"code": "6*7*11"}  # type: ignore[union-attr]
    messages += [
        choice.message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "Out: 462"},
    ]
    second = client.chat.completions.create(model=NAME, messages=messages, tools=[PYTHON])  # type: ignore[list-item]
    assert second.choices[0].finish_reason == "stop"
    assert (
        second.choices[0].message.content == "The answer is 462." and not second.choices[0].message.tool_calls
    )
    context = engine.tokenizer.decode(engine.prompts[-1], skip_special_tokens=False)
    assert '<tool_call>\n{"name": "python", "arguments": {"code": "6*7*11"}}\n</tool_call>' in context
    assert "<tool_response>\nOut: 462\n</tool_response>" in context and "<tools>" in context
    broken = client.chat.completions.create(
        model=NAME,
        messages=[{"role": "user", "content": "BROKEN"}],
        tools=[PYTHON],  # type: ignore[list-item]
    )
    assert broken.choices[0].finish_reason == "stop"
    assert broken.choices[0].message.content == "<tool_call>{not json</tool_call>"
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model=NAME, messages=[USER], tools=[PYTHON], tool_choice="required")  # type: ignore[list-item]
    assert "tool_choice" in refused.value.message


def test_a_served_conversation_renders_as_the_training_episode() -> None:
    """The served prompt must equal the trained one, or a model trained with tools would see another
    format: the episode's context before its second turn is re-sent as OpenAI messages and encoded."""
    from execrl.episodes import LocalBackend, run_episodes
    from execrl.rollout.types import SamplingParams
    from execrl.sandbox import Sandbox, SandboxConfig
    from execrl.serve.tool_calls import encode_chat
    from execrl.tasks.schema import ChatMessage, MathSpec, Task, TaskMetadata
    from execrl.tools import ToolConfig, ToolEnvironment

    tokenizer = default_tokenizer()
    engine = ScriptedEngine(tokenizer, _script)
    task = Task(
        id="t/0", domain="math", prompt=(ChatMessage(role="user", content=USER["content"]),),
        spec=MathSpec(answer="462"), metadata=TaskMetadata(family="tools", split="test"),
    )  # fmt: skip
    with Sandbox(SandboxConfig(workers=1)) as sandbox:
        [episode] = run_episodes(
            ToolEnvironment(sandbox, ToolConfig()), LocalBackend(engine, tokenizer), [task],
            params=SamplingParams(samples_per_prompt=1, max_new_tokens=256), max_episode_tokens=1024,
        ).episodes  # fmt: skip
    assert episode.passed and episode.info["tool_calls"] == 1
    call = {"id": "call_1", "type": "function",
            "function": {"name": "python", "arguments": json.dumps({"code": "6*7*11"})}}  # fmt: skip
    answer = (
        episode.messages[-2]["content"].removeprefix("<tool_response>\n").removesuffix("\n</tool_response>")
    )
    req = parse_chat_request(_body(messages=[
        USER, {"role": "assistant", "content": "Let me compute.\n", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": answer},
    ]))  # fmt: skip
    served = encode_chat(tokenizer, chat_messages(req, template_tools=False), None)
    assert served == engine.prompts[1]
