"""Tools a model may call in an episode: declarations in the OpenAI ``tools`` format, and their registry.

A ``Tool`` is a name, a description, a JSON-schema ``parameters`` object (the OpenAI function-calling
format, which chat templates with tool support render and ``execrl serve`` clients send) and a ``run``
function. Built-ins (``builtin.py``, registered when ``execrl.tools`` is imported): ``python`` (a cell in
the episode's sandbox session) and ``run_tests`` (the task's visible tests on a program). Users add their
own with ``register_tool``; a name registered twice raises, an unknown name lists the known ones
(``execrl.registry``).

Arguments are checked against the schema's top level before a tool runs (:func:`argument_problems`: an
object, every ``required`` key, no key the schema does not declare, each declared key of its ``type``);
a call that fails the check is answered with a structured error, never run and never dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from execrl.registry import Registry

if TYPE_CHECKING:
    from execrl.rewards import RewardConfig
    from execrl.rewards.batch import SyncRunner
    from execrl.sandbox.sessions.api import Session
    from execrl.tasks.schema import Task

__all__ = [
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolOutput",
    "argument_problems",
    "get_tool",
    "register_tool",
    "schema_problems",
    "tool_names",
    "unregister_tool",
]


@dataclass(frozen=True)
class ToolContext:
    """What a tool may use: the episode's task, its sandbox session (``None`` for a task without one),
    the sandbox that scores programs (``run_tests``), and the reward settings."""

    task: Task
    session: Session | None
    runner: SyncRunner
    reward: RewardConfig


@dataclass(frozen=True)
class ToolOutput:
    """A tool's answer: the text of the ``tool`` message, and whether the tool reports success."""

    text: str
    ok: bool = True


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: Mapping[str, Any]  # JSON schema of the arguments object
    run: Callable[[Mapping[str, Any], ToolContext], ToolOutput]

    def declaration(self) -> dict[str, Any]:
        """The OpenAI ``tools`` entry of this tool."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": dict(self.parameters),
            },
        }


class ToolError(ValueError):
    """A tool name is taken, empty or unknown."""


_TOOLS: Registry[Tool] = Registry(
    "tool", plural="tools", duplicate_error=ToolError, unknown_error=ToolError, remove_hint="unregister_tool"
)


def register_tool(tool: Tool) -> Tool:
    """Add a tool; a taken name raises ``ToolError``."""
    if tool.parameters.get("type") != "object":
        raise ToolError(f"tool {tool.name!r}: parameters must be a JSON schema with type 'object'")
    return _TOOLS.add(tool.name, tool)


def unregister_tool(name: str) -> None:
    _TOOLS.remove(name)


def get_tool(name: str) -> Tool:
    """The tool registered as ``name``; ``ToolError`` listing the known tools otherwise."""
    return _TOOLS.get(name)


def tool_names() -> list[str]:
    return _TOOLS.names()


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}


def argument_problems(tool: Tool, arguments: Any) -> list[str]:
    """Why ``arguments`` do not fit ``tool.parameters`` (empty: they do). Top level only."""
    return schema_problems(tool.name, tool.parameters, arguments)


def schema_problems(name: str, parameters: Mapping[str, Any], arguments: Any) -> list[str]:
    """Why ``arguments`` do not fit the JSON schema ``parameters`` of the tool ``name`` (empty: they do).
    Top level only: an object, every ``required`` key, no undeclared key, each declared key's ``type``."""
    if not isinstance(arguments, dict):
        return [f"arguments must be a JSON object, got {type(arguments).__name__}"]
    properties: Mapping[str, Any] = parameters.get("properties", {})
    required: Sequence[str] = parameters.get("required", ())
    problems = [f"missing required argument {key!r}" for key in required if key not in arguments]
    for key, value in arguments.items():
        if key not in properties:
            problems.append(f"unknown argument {key!r}; {name} takes {sorted(properties)}")
            continue
        kind = properties[key].get("type") if isinstance(properties[key], Mapping) else None
        kinds = _JSON_TYPES.get(kind) if isinstance(kind, str) else None
        wrong_bool = isinstance(value, bool) and kind in ("integer", "number")
        if kinds is not None and (not isinstance(value, kinds) or wrong_bool):
            problems.append(f"argument {key!r} must be of type {kind}, got {type(value).__name__}")
    return problems
