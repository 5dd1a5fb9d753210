"""The built-in tools: ``python`` (a cell in the episode's sandbox session) and ``run_tests``.

``python`` keeps interpreter state across the calls of one episode (globals, imports, files: a
``Session`` of ``execrl.sandbox.sessions``), unlike verl's and SkyRL's code tools, which start a fresh
process per call. Its answer is what a notebook shows: stdout, stderr, ``Out: <repr>`` of the last
expression, the traceback of the cell's own code, and the verdict in words when a limit ended the cell.
Everything in it came from the sandboxed cell and is untrusted text, passed on as such.

``run_tests`` scores a program on the task's **visible** tests only (a fresh jail per run, as the reward
does); the hidden tests are the judge's and never reach a tool answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from execrl.sandbox.sessions.types import CellResult
from execrl.tools.registry import Tool, ToolContext, ToolOutput, register_tool

__all__ = ["PYTHON", "RUN_TESTS", "cell_text"]


def cell_text(result: CellResult) -> str:
    """A cell's result as the model reads it."""
    parts = []
    if result.stdout:
        parts.append(result.stdout.rstrip("\n"))
    if result.stderr:
        parts.append(f"[stderr]\n{result.stderr.rstrip(chr(10))}")
    if result.value is not None:
        parts.append(f"Out: {result.value}")
    if result.error_type:
        trace = "\n".join(result.traceback)
        parts.append(f"{trace}\n{result.error_type}: {result.error_message or ''}".strip("\n"))
    if result.message:
        parts.append(f"[{result.verdict.value}] {result.message}")
    return "\n".join(parts) if parts else "(no output)"


def _python(arguments: Mapping[str, Any], context: ToolContext) -> ToolOutput:
    if context.session is None:
        return ToolOutput("this task offers no python session", ok=False)
    result = context.session.run(str(arguments["code"]))
    return ToolOutput(cell_text(result), ok=result.passed)


def _run_tests(arguments: Mapping[str, Any], context: ToolContext) -> ToolOutput:
    from execrl.rewards import score_batch

    task = context.task
    if not task.visible_tests:
        return ToolOutput("this task has no visible tests", ok=False)
    language = getattr(task.spec, "language", "python")
    program = f"```{language}\n{arguments['program']}\n```"
    visible = replace(context.reward, use_hidden_tests=False, with_audit=False)
    score = score_batch([task], [program], sandbox=context.runner, config=visible)[0]
    shown = len(task.visible_tests)
    passed = round(score.pass_fraction * shown)
    text = f"passed {passed} of {shown} visible tests"
    if not score.passed:
        text += f"; {score.reason}"
    return ToolOutput(text, ok=score.passed)


PYTHON = register_tool(
    Tool(
        name="python",
        description=(
            "Run Python code in a persistent interpreter (variables, imports and files stay between calls). "
            "Returns stdout, stderr and the value of the last expression."
        ),
        parameters={
            "type": "object",
            "properties": {"code": {"type": "string", "description": "the Python code to run"}},
            "required": ["code"],
        },
        run=_python,
    )
)

RUN_TESTS = register_tool(
    Tool(
        name="run_tests",
        description="Run the task's visible tests on a complete program; returns how many passed.",
        parameters={
            "type": "object",
            "properties": {"program": {"type": "string", "description": "the whole program"}},
            "required": ["program"],
        },
        run=_run_tests,
    )
)
