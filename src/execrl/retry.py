"""Exponential backoff: the one delay rule of execrl's retries (the Ray executor's tasks, the alarm
webhook, the sandbox service client's ``ClientConfig.backoff``).

A failure that may be transient (a dead worker being replaced, a replica restarting, a busy webhook
receiver) is retried after ``base_s``, then twice that, and so on, up to ``max_s``: waiting longer each
time gives the cause room to clear without hammering it.
"""

from __future__ import annotations

import math

__all__ = ["backoff_delay"]


def backoff_delay(attempt: int, *, base_s: float, max_s: float = math.inf) -> float:
    """Seconds to wait after failed attempt ``attempt`` (1-based): ``base_s * 2 ** (attempt - 1)``, at
    most ``max_s``."""
    if attempt < 1:
        raise ValueError(f"attempt counts from 1, got {attempt}")
    return float(min(max_s, base_s * 2 ** (attempt - 1)))
