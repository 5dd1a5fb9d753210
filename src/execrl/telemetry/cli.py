"""``execrl monitor RUN_DIR``: registered into the top-level CLI (cheap to import: no aiohttp here)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

__all__ = ["register"]


def _monitor(args: argparse.Namespace) -> int:
    from execrl.telemetry.monitor import run_monitor

    run_dir = Path(args.run_dir)
    if not run_dir.is_dir():
        print(
            f"execrl monitor: {run_dir} is not a directory; pass the run directory of a training run",
            file=sys.stderr,
        )
        return 2
    if not (run_dir / "metrics.jsonl").exists():
        print(
            f"execrl monitor: {run_dir}/metrics.jsonl does not exist yet; the page will fill in once it does"
        )
    run_monitor(run_dir, host=args.host, port=args.port)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser(
        "monitor",
        help="live web page of a run's curves and alarms",
        description="Serve a live page of RUN_DIR's metrics and alarms (no internet needed).",
    )
    parser.add_argument("run_dir", metavar="RUN_DIR", help="run directory holding metrics.jsonl")
    parser.add_argument("--port", type=int, default=8765, help="TCP port (default 8765; 0 picks a free one)")
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1)")
    parser.set_defaults(func=_monitor)
