"""Peak resident memory of this process per step (``perf/peak_rss_mb``).

Why: memory is what long contexts run out of first (issue 26), and the process-lifetime maximum
(``getrusage``'s ``ru_maxrss``) only ever grows, so it cannot say which step needed the memory. On Linux
(>= 4.0) writing ``5`` to ``/proc/self/clear_refs`` resets the peak (``VmHWM`` in ``/proc/self/status``), so
reading then resetting it once per step gives the peak of each step. Limits: this process only (sandbox
workers and Ray actors are other processes); the first step's peak includes the setup before it; where
``/proc`` cannot be written, the lifetime maximum is reported instead (``perf/peak_rss_is_lifetime`` = 1).
"""

from __future__ import annotations

import resource
from pathlib import Path

__all__ = ["peak_rss_mb", "peak_rss_metric"]

_STATUS, _CLEAR = Path("/proc/self/status"), Path("/proc/self/clear_refs")


def peak_rss_mb(*, reset: bool) -> tuple[float, bool]:
    """(peak resident set in MiB since the last reset, whether that is the lifetime maximum instead)."""
    try:
        lines = _STATUS.read_text().splitlines()
        kib = next(int(line.split()[1]) for line in lines if line.startswith("VmHWM:"))
        if reset:
            _CLEAR.write_text("5")
        return kib / 1024.0, False
    except (OSError, StopIteration, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, True  # KiB on Linux


def peak_rss_metric() -> dict[str, float]:
    """``perf/peak_rss_mb`` of the step that just ended (and resets the peak for the next one)."""
    mb, lifetime = peak_rss_mb(reset=True)
    out = {"perf/peak_rss_mb": mb}
    if lifetime:
        out["perf/peak_rss_is_lifetime"] = 1.0
    return out
