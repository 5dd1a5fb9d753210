"""execrl.tools: tool-calling episodes for RL (the model calls the sandbox mid-answer).

Modules: ``registry.py`` (``Tool`` in the OpenAI ``tools`` format, ``register_tool``), ``builtin.py``
(``python``: a cell in the episode's sandbox session; ``run_tests``: the task's visible tests),
``calls.py`` (declaring tools to the model, Hermes ``<tool_call>`` parsing, structured errors),
``episode.py`` (the episode loop, token budgets, output truncation, the judge on the hidden tests),
``metrics.py`` (the per-step tool metrics), ``render.py`` (a chat row's ids and loss mask exactly as an
episode builds them: ``execrl sft``), ``transcripts.py`` (SFT rows from a suite's references) and ``remote.py`` (the same episodes against any OpenAI-compatible
endpoint, ``execrl tools run`` in ``cli.py``). One request: ``rollout_tool_episodes`` renders the prompt with
the tools -> the engine samples until ``</tool_call>`` -> ``parse_call`` -> the tool runs in the
episode's forked session -> its answer is appended as a ``tool`` message (ids exact, masked) -> ... ->
the final answer is scored on the hidden tests in fresh jails.
"""

from __future__ import annotations

from execrl.tools.calls import CallError, ToolCall, parse_call
from execrl.tools.episode import ToolConfig, ToolEpisode, rollout_tool_episodes, truncate_output
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
from execrl.tools.remote import Endpoint, RemoteEpisode, run_remote_episodes

__all__ = [
    "CallError",
    "Endpoint",
    "RemoteEpisode",
    "Tool",
    "ToolCall",
    "ToolConfig",
    "ToolContext",
    "ToolEpisode",
    "ToolError",
    "ToolOutput",
    "get_tool",
    "parse_call",
    "register_tool",
    "rollout_tool_episodes",
    "run_remote_episodes",
    "tool_metrics",
    "tool_names",
    "truncate_output",
    "unregister_tool",
]
