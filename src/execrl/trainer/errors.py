"""The trainer's input errors, importable without torch (the CLI maps them to exit 2).

``CheckpointError``: a checkpoint cannot resume this run. The message names the file and, where a setting
differs from the one the run was trained with, the config key to set (``lora.rank``, ``lora.enabled``).
"""

from __future__ import annotations

__all__ = ["CheckpointError"]


class CheckpointError(ValueError):
    """A checkpoint that cannot resume this run; one line naming the file (and the key to set)."""
