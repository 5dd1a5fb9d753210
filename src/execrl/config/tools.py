"""``[tools]``: tool-calling episodes (``execrl.tools``: ``tools/env.py`` on the rollout loop)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from execrl.config.base import Section


class ToolsSection(Section):
    """The model calls tools mid-answer (``python`` in its own sandbox session, ``run_tests``, yours);
    the final answer is scored on the hidden tests. The other fields mean something only with
    ``enabled = true``; set without it they would be silently ignored, so ``TrainConfig`` refuses that."""

    enabled: bool = Field(False, description="train tool-calling episodes (tools/env.py)")
    max_tool_calls: int = Field(4, ge=1, le=64, description="tool calls per episode, malformed ones included")
    max_turn_tokens: int = Field(256, ge=1, description="sampled tokens per model turn")
    max_episode_tokens: int = Field(
        1024, ge=1, description="tokens after the prompt per episode: model turns and tool answers"
    )
    max_tool_output_tokens: int = Field(
        256, ge=1, description="tokens of one tool answer; longer ones are cut with a marker"
    )
    parse_error_penalty: float = Field(
        0.0,
        ge=0,
        le=1,
        description="reward subtracted per malformed call (bad JSON, unknown tool, arguments)",
    )
    default_tools: list[str] = Field(
        ["python"], min_length=1, description="tools offered by tasks without a session spec"
    )
    cell_timeout_s: float = Field(10.0, gt=0, le=600, description="wall clock of one python cell")
    session_memory_mb: int = Field(512, ge=16, description="cgroup memory of one episode's session")
    call_format: Literal["hermes", "python_block"] = Field(
        "hermes",
        description="how the model calls: 'hermes' <tool_call> JSON, or 'python_block' (```python blocks call "
        "the python tool, ToRL's format, for models too small for JSON calls)",
    )
