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
