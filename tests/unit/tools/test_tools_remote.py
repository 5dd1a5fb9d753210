"""Tool episodes against an OpenAI-compatible endpoint (``execrl.tools.remote``: the tools environment in the
one rollout loop with the HTTP backend): a fake server answering
with scripted ``tool_calls``, and ``execrl serve`` over a scripted engine. A correct call sequence gets
reward 1 from the hidden tests; malformed calls are answered, counted and penalised as in training."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace
from typing import Any

import pytest
from scripted_engine import ScriptedEngine

from execrl.rollout.models import default_tokenizer
from execrl.sandbox import Sandbox, SandboxConfig
from execrl.tasks import load_suite
from execrl.tasks.schema import Task
from execrl.tools import ToolConfig
from execrl.tools.remote import Endpoint, episode_record, run_remote_episodes, summarize

Script = Callable[[list[dict[str, Any]]], dict[str, Any]]


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with Sandbox(SandboxConfig(workers=2)) as box:
        yield box


@pytest.fixture(scope="module")
def task() -> Task:
    return load_suite("tools", split="test")[0]  # the digit sum of 3**300 (693), with a reference cell


class _Fake:
    """A fake OpenAI server: ``script(messages) -> the answer's message``; records every request body."""

    def __init__(self, script: Script, status: int = 200) -> None:
        self.script, self.status, self.bodies = script, status, []  # type: ignore[var-annotated]
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.bodies.append(body)
                message = fake.script(body["messages"])
                answer = {"choices": [{"index": 0, "message": {"role": "assistant", **message},
                          "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}],
                          "usage": {"prompt_tokens": 10 * len(body["messages"]), "completion_tokens": 5}}  # fmt: skip
                data = json.dumps(answer if fake.status == 200 else {"error": {"message": "boom"}}).encode()
                self.send_response(fake.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"content": None, "tool_calls": [{"id": call_id, "type": "function",
            "function": {"name": name, "arguments": arguments}}]}  # fmt: skip


def _last_tool(messages: list[dict[str, Any]]) -> str:
    return [m["content"] for m in messages if m["role"] == "tool"][-1]


def _run(
    script: Script, task: Task, sandbox: Sandbox, status: int = 200, **config: Any
) -> tuple[_Fake, SimpleNamespace]:
    fake = _Fake(script, status)
    try:
        [episode] = run_remote_episodes(
            Endpoint(fake.url, "fake"), [task], sandbox, config=ToolConfig(**config)
        )
    finally:
        fake.close()
    return fake, _view(episode)


def _view(episode: Any) -> SimpleNamespace:
    """An episode as ``execrl tools run --json`` records it, attributes for the asserts (and the episode)."""
    return SimpleNamespace(**episode_record(episode), episode=episode)


def test_a_correct_call_sequence_gets_reward_one(task: Task, sandbox: Sandbox) -> None:
    code = json.dumps({"code": task.session.reference_cells[0]})  # type: ignore[union-attr]

    def script(messages: list[dict[str, Any]]) -> dict[str, Any]:
        if messages[-1]["role"] != "tool":
            return _call("call_a", "python", code)
        return {"content": f"The answer is {_last_tool(messages).strip()}."}

    fake, e = _run(script, task, sandbox)
    assert (e.passed, e.reward, e.tool_calls, e.parse_errors, e.stop, e.turns) == (
        True,
        1.0,
        1,
        0,
        "answer",
        2,
    )
    assert e.final_text == "The answer is 693."
    assert e.episode.token_ids == ()  # message space: an HTTP episode is for evaluation, not training
    first, second = fake.bodies
    assert [t["function"]["name"] for t in first["tools"]] == ["python"] and first["tool_choice"] == "auto"
    assert second["messages"][1]["tool_calls"][0]["id"] == "call_a"
    assert second["messages"][2] == {"role": "tool", "tool_call_id": "call_a", "content": "693"}
    assert e.tokens_used == 10 * 3 - 10 + 5  # prompt growth plus the last completion (usage)


def test_malformed_calls_are_answered_counted_and_penalised(task: Task, sandbox: Sandbox) -> None:
    code = json.dumps({"code": task.session.reference_cells[0]})  # type: ignore[union-attr]
    turns = [
        _call("call_1", "python", "{not json"),
        _call("call_2", "shell", '{"cmd": "ls"}'),
        {
            "content": '<tool_call>{"name": "python", "arguments": {"cod": "1"}}</tool_call>'
        },  # left in content
        _call("call_3", "python", code),
    ]

    def script(messages: list[dict[str, Any]]) -> dict[str, Any]:
        answered = sum(m["role"] == "tool" for m in messages)
        return (
            turns[answered]
            if answered < len(turns)
            else {"content": f"The answer is {_last_tool(messages)}."}
        )

    fake, e = _run(script, task, sandbox, max_tool_calls=5, parse_error_penalty=0.25)
    assert (e.tool_calls, e.parse_errors, e.stop, e.passed) == (4, 3, "answer", True)
    assert e.reward == pytest.approx(1.0 - 3 * 0.25)
    assert e.calls == ["!bad_json", "!unknown_tool", "!bad_arguments", "python"]
    tools = [m for m in fake.bodies[-1]["messages"] if m["role"] == "tool"]
    kinds = [json.loads(m["content"])["error"]["type"] for m in tools[:3]]
    assert kinds == ["bad_json", "unknown_tool", "bad_arguments"]
    assert tools[2]["tool_call_id"] == "call_malformed_2" and tools[3]["content"] == "693"
    summary = summarize([e.episode])
    assert summary["parse_errors"] == 3 and summary["parse_error_rate"] == pytest.approx(3 / 4)


def test_the_call_cap_ends_the_episode_and_endpoint_errors_are_reported(task: Task, sandbox: Sandbox) -> None:
    _, capped = _run(lambda _m: _call("c", "python", '{"code": "1"}'), task, sandbox, max_tool_calls=2)
    assert (capped.tool_calls, capped.stop, capped.passed, capped.turns) == (2, "max_tool_calls", False, 3)
    _, failed = _run(lambda _m: {"content": "x"}, task, sandbox, status=500)
    assert failed.stop == "error" and "500" in failed.error and failed.reward == 0.0 and not failed.valid
    assert summarize([capped.episode, failed.episode])["endpoint_errors"] == 1


def test_against_execrl_serve(task: Task, sandbox: Sandbox) -> None:
    """End to end through ``execrl serve``: the server renders the tools and parses the engine's call."""
    from execrl.serve.background import serve_in_thread
    from execrl.serve.server import ServeConfig, build_app

    cell = task.session.reference_cells[0]  # type: ignore[union-attr]

    def script(_turn: int, context: str) -> str:
        if "<tool_response>" not in context:
            return f"<tool_call>\n{json.dumps({'name': 'python', 'arguments': {'code': cell}})}\n</tool_call>"
        return f"The answer is {context.rsplit('<tool_response>', 1)[1].split()[0]}."

    engine = ScriptedEngine(default_tokenizer(), script)
    engine.model = SimpleNamespace(config=SimpleNamespace(max_position_embeddings=4096))  # type: ignore[attr-defined]
    with serve_in_thread(build_app(engine, ServeConfig(model_name="m", default_max_tokens=64))) as url:  # type: ignore[arg-type]
        [episode] = run_remote_episodes(Endpoint(f"{url}/v1", "m"), [task], sandbox, config=ToolConfig())
    e = _view(episode)
    assert (e.passed, e.reward, e.tool_calls, e.parse_errors, e.stop) == (True, 1.0, 1, 0, "answer")
    context = engine.tokenizer.decode(engine.prompts[-1], skip_special_tokens=False)
    assert "<tool_response>\n693\n</tool_response>" in context
