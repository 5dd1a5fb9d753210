"""``execrl sft``: supervised fine-tuning on chat rows (``recipes/sft.py``). Cheap to import: torch loads in
the handler. Exit status: 0 done (or stopped by the wall-time budget or an alarm), 130 stopped by a signal,
2 bad input (config, unreadable rows, too many bad rows), with one ``error:`` line and nothing written."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from execrl.config import ConfigError, SftConfig, load_typed, to_toml

__all__ = ["register"]


def _sft(args: argparse.Namespace) -> int:
    resume = Path(args.resume) if args.resume is not None else None
    if resume is not None and (not resume.is_dir() or not (resume / "config.toml").exists()):
        what = "not a directory" if not resume.is_dir() else "no config.toml there"
        print(f"error: --resume {args.resume}: {what} (not an execrl run directory)", file=sys.stderr)
        return 2
    config = load_typed(
        SftConfig, args.config or (resume / "config.toml" if resume else None), args.overrides
    )
    if args.print_config:
        print(to_toml(config, descriptions=True), end="")
        return 0
    if not config.data.train_files:
        raise ConfigError('data.train_files is empty; set data.train_files=["rows.jsonl"]')
    if "://" in config.run.output_dir:
        raise ConfigError(
            f"run.output_dir={config.run.output_dir!r}: execrl sft writes local directories only"
        )
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    from execrl.recipes.loop import StopReason
    from execrl.recipes.sft import train

    outcome = train(config, resume_dir=resume, progress=not args.no_progress)
    print(f"run directory: {outcome.run_dir}")
    if (outcome.run_dir / "report.md").exists():
        print(f"report: {outcome.run_dir / 'report.md'}")
    if outcome.stopped_early:
        print(f"stopped early after step {outcome.last_step}: {outcome.stopped_early}")
        return 130 if outcome.stopped_early.reason is StopReason.SIGNAL else 0
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser("sft", help="supervised fine-tuning on chat rows (messages, tool calls)")
    p.add_argument("--config", type=Path, help="TOML config file (execrl sft --print-config shows every key)")
    p.add_argument("--resume", metavar="RUN_DIR", help="continue a run from its newest checkpoint")
    p.add_argument(
        "--print-config", action="store_true", help="print the resolved config, each key with its description"
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar (logs only)")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help='e.g. data.train_files=["rows.jsonl"]')
    p.set_defaults(func=_sft)
