"""The one way a benchmark writes its ``--json`` report (every ``execrl bench`` command)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def write_report(path: str | Path, report: Any, *, indent: int = 2) -> None:
    """``report`` as JSON at ``path`` (UTF-8, trailing newline), its directory made if missing."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(report, indent=indent) + "\n", encoding="utf-8")


def trl_versions_and_host() -> dict[str, Any]:
    """The ``versions`` (torch, transformers, trl) and ``host`` entries of a report against TRL, read at
    the end of the run (``load_avg_1m_after``)."""
    import os
    import platform

    import torch
    import transformers
    import trl

    return {
        "versions": {
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "trl": trl.__version__,
        },
        "host": {
            "cpus": os.cpu_count(),
            "machine": platform.machine(),
            "load_avg_1m_after": os.getloadavg()[0],
        },
    }
