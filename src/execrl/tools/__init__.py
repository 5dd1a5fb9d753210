"""execrl.tools: tool calling (the model calls the sandbox mid-answer), for RL and for serving.

Modules: ``registry.py`` (``Tool`` in the OpenAI ``tools`` format, ``register_tool``), ``builtin.py``
(``python``: a cell in the episode's sandbox session; ``run_tests``: the task's visible tests),
``calls.py`` (declaring tools to the model, parsing a call by its format's rules, structured errors),
``env.py`` (``ToolEnvironment``: the ``tools`` environment of the one rollout loop, ``execrl.episodes``:
sessions forked per sample, calls answered and counted, the judge on the hidden tests), ``metrics.py``
(the per-step tool metrics), ``transcripts.py`` (SFT rows from a suite's references: ``execrl tasks
transcripts``) and ``remote.py`` (the same environment against any OpenAI-compatible
endpoint, ``execrl tools run`` in ``cli.py``). One request: the loop renders the prompt with the tools ->
the engine samples until the end of a call -> ``ToolEnvironment`` parses it -> the tool runs in the
episode's forked session -> its answer is appended as a ``tool`` message (as data, masked, within the
budget) -> ... -> the final answer is scored on the hidden tests in fresh jails.
"""

from __future__ import annotations

from execrl.tools import builtin  # noqa: F401 - registers the built-in tools (it imports registry, not the reverse)
from execrl.tools.calls import CallError, ToolCall, parse_call
from execrl.tools.env import ToolConfig, ToolEnvironment, judge_answers
from execrl.tools.metrics import tool_metrics
from execrl.tools.registry import (
    Tool,
    ToolContext,
    ToolError,
    ToolOutput,
    get_tool,
    register_tool,
    tool_names,
    unregister_tool,
)

__all__ = [
    "CallError",
    "Tool",
    "ToolCall",
    "ToolConfig",
    "ToolContext",
    "ToolEnvironment",
    "ToolError",
    "ToolOutput",
    "get_tool",
    "judge_answers",
    "parse_call",
    "register_tool",
    "tool_metrics",
    "tool_names",
    "unregister_tool",
]
