"""The one command, ``execrl``, with subcommands.

Each area owns its subcommands in its own ``cli.py`` exposing ``register(subparsers)``; this file only
lists them. A command that composes areas a layer apart lives here, in the CLI layer: ``tasks.py``
(``execrl tasks check`` scores the references through the reward path, and ``rewards`` imports ``tasks``). Those modules must stay cheap to import (no torch at module level) so that ``execrl --help``
and ``execrl sandbox run`` start fast; heavy imports happen inside the handlers.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from execrl.memory import configure_allocator

# Modules that add subcommands, in the order they appear in --help.
COMMAND_MODULES: tuple[str, ...] = (
    "execrl.recipes.cli",  # train, eval, compare
    "execrl.recipes.sft_cli",  # sft
    "execrl.recipes.sample_cli",  # sample
    "execrl.telemetry.cli",  # monitor
    "execrl.sandbox.cli",  # sandbox run|serve
    "execrl.cli.tasks",  # tasks ls|check|overlap|import
    "execrl.rewards.cli",  # rewards ls|score
    "execrl.bench.cli",  # bench sandbox|rewards|rollout|train|serve
    "execrl.serve.cli",  # export, serve
    "execrl.refine.cli",  # refine, refine show
    "execrl.tools.cli",  # tools run
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="execrl", description="RL post-training of LLMs from execution feedback."
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:  # a real missing dependency inside the module: surface it
                raise
            continue  # area not built yet
        module.register(subparsers)
    return parser


def _input_errors() -> tuple[type[Exception], ...]:
    """Errors that mean "your input is wrong" (each names the file, line or key): exit 2, no traceback.

    Only our own typed input errors are listed; anything else is a bug and keeps its traceback.
    """
    from execrl.config import ConfigError
    from execrl.inputs import InputFileError
    from execrl.rollout.models import ModelLoadError
    from execrl.tasks.errors import TaskError
    from execrl.trainer.errors import CheckpointError

    return (InputFileError, ConfigError, TaskError, ModelLoadError, CheckpointError)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        configure_allocator()  # before any tensor: big freed activations leave the RSS (execrl.memory)
    except ValueError as exc:  # a bad EXECRL_MALLOC, named
        print(f"error: {exc}", file=sys.stderr)
        return 2
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except _input_errors() as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
