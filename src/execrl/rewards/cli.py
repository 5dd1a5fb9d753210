"""``execrl rewards ls|score``: list the verifiers; score a file of completions against a task suite.

``score`` reads JSONL lines ``{"task_id": "...", "completion": "..."}`` (one completion per line, several
per task allowed), scores them all in one batch and prints count, mean reward, pass rate, invalid share
and the count per reason. Cheap to import: the package import pulls no torch and no jsonschema, and the
suites and sandbox load inside the handlers.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from execrl.inputs import InputFileError, float_in, iter_lines, json_value, regular_file
from execrl.rewards.batch import score_batch
from execrl.rewards.metrics import reward_metrics
from execrl.rewards.registry import VerifierImportError, describe_verifier, list_verifiers, register_verifier
from execrl.rewards.types import RewardConfig, Score
from execrl.sandbox.types import Limits


class CompletionFileError(InputFileError):
    """A completions file is malformed; the message names the file, the line and the field."""


@dataclass(frozen=True)
class CompletionRecord:
    task_id: str
    completion: str
    line: int


def read_completions(path: Path) -> list[CompletionRecord]:
    """Parse a JSONL completions file, streamed line by line within ``execrl.inputs``' caps; every error
    is one line naming ``path:line`` and the field to fix (a directory, binary or non-UTF-8 text, JSON
    nested too deeply and an empty file included)."""
    records = []
    try:
        with regular_file(path, "completions file").open("rb") as fh:
            for number, line in iter_lines(fh, str(path)):
                records.append(_record(path, number, line))
    except InputFileError as exc:
        raise CompletionFileError(str(exc)) from None
    except OSError as exc:
        raise CompletionFileError(f"{path}: cannot read the completions file ({exc.strerror})") from None
    if not records:
        raise CompletionFileError(f"{path}: no completions; write one JSON object per line")
    return records


def _record(path: Path, number: int, line: str) -> CompletionRecord:
    try:
        row = json_value(line)
    except ValueError as exc:
        raise CompletionFileError(f"{path}:{number}: not valid JSON ({exc})") from None
    if not isinstance(row, dict):
        raise CompletionFileError(f"{path}:{number}: expected a JSON object, got {type(row).__name__}")
    for field in ("task_id", "completion"):
        if not isinstance(row.get(field), str):
            got = "missing" if field not in row else type(row[field]).__name__
            raise CompletionFileError(f"{path}:{number}: field {field!r} must be a string ({got})")
    return CompletionRecord(row["task_id"], row["completion"], number)


def format_summary(metrics: dict[str, float]) -> str:
    """The human table of ``score``: headline numbers, then one row per reason code."""
    count = int(metrics.get("reward/count", 0))
    rows = [
        ("count", f"{count}"),
        ("mean reward", _fmt(metrics.get("reward/mean"))),
        ("pass rate", _fmt(metrics.get("reward/pass_rate"))),
        (
            "invalid",
            f"{metrics.get('reward/invalid_rate', 0.0) * count:.0f} ({metrics.get('reward/invalid_rate', 0.0):.1%})",
        ),
    ]
    reasons = {
        k.removeprefix("reward/reason/"): v for k, v in metrics.items() if k.startswith("reward/reason/")
    }
    rows += [
        (f"  {code}", f"{int(n)}") for code, n in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))
    ]
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name:<{width}}  {value}" for name, value in rows)


def _fmt(value: float | None) -> str:
    return "n/a (no valid scores)" if value is None else f"{value:.4f}"


def _ls(args: argparse.Namespace) -> int:
    for domain, verifier in list_verifiers().items():
        name = getattr(verifier, "fn", verifier)
        qualname = (
            f"{getattr(name, '__module__', '?')}:{getattr(name, '__qualname__', type(name).__qualname__)}"
        )
        print(f"{domain:<12} {qualname:<58} {describe_verifier(verifier)}")
    return 0


def _score(args: argparse.Namespace) -> int:
    from execrl.tasks.errors import TaskError  # lazy: suites load inside the handler

    for spec in args.verifier:
        domain, sep, path = spec.partition("=")
        if not sep:
            print(
                f"error: --verifier {spec!r} must look like DOMAIN=package.module:function", file=sys.stderr
            )
            return 2
        try:
            register_verifier(domain, path)
        except (VerifierImportError, ValueError) as exc:
            print(f"error: --verifier {spec!r}: {exc}", file=sys.stderr)
            return 2
    if args.json is not None and args.json.is_dir():
        print(f"error: --json {args.json}: is a directory; pass a file path", file=sys.stderr)
        return 2
    try:
        records = read_completions(args.completions)
        by_id = {task.id: task for task in _suite_tasks(args.suite, args.split)}
    except (CompletionFileError, TaskError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    missing = [r for r in records if r.task_id not in by_id]
    if missing:
        first = missing[0]
        print(
            f"error: {args.completions}:{first.line}: task_id {first.task_id!r} is not in suite "
            f"{args.suite!r} split {args.split!r} ({len(missing)} unknown ids in all)",
            file=sys.stderr,
        )
        return 2
    config = RewardConfig(
        mode=args.mode,
        limits=Limits(timeout_s=args.timeout_s, cpu_time_s=args.timeout_s),
        use_hidden_tests=not args.visible,
    )
    scores = score_batch([by_id[r.task_id] for r in records], [r.completion for r in records], config=config)
    metrics = reward_metrics(scores)
    print(format_summary(metrics))
    if args.json:
        _write_json(args.json, records, scores, metrics)
    return 0


def _suite_tasks(suite: str, split: str) -> list[Any]:
    """A registered suite's split, or the tasks of a task file/URL (all of its rows)."""
    from execrl.tasks import load_suite, load_tasks
    from execrl.tasks.errors import TaskSourceError
    from execrl.tasks.registry import is_task_source

    if not is_task_source(suite):
        return load_suite(suite, split)
    tasks = load_tasks(suite)
    if not tasks:
        raise TaskSourceError(f"{suite}: no tasks (the file has no rows)")
    return tasks


def _write_json(
    path: Path, records: list[CompletionRecord], scores: list[Score], metrics: dict[str, float]
) -> None:
    rows: list[dict[str, Any]] = [
        {
            "task_id": r.task_id,
            "line": r.line,
            "reward": s.reward,
            "valid": s.valid,
            "passed": s.passed,
            "pass_fraction": s.pass_fraction,
            "reason": s.reason,
        }
        for r, s in zip(records, scores, strict=True)
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"summary": metrics, "scores": rows}, indent=2) + "\n", encoding="utf-8")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("rewards", help="list verifiers; score completions against a suite")
    sub = parser.add_subparsers(dest="rewards_command", metavar="SUBCOMMAND", required=True)
    ls = sub.add_parser("ls", help="registered domains and their verifiers")
    ls.set_defaults(func=_ls)
    score = sub.add_parser("score", help="score a JSONL file of {task_id, completion} against a suite")
    score.add_argument("--suite", required=True, help="task suite name (see `execrl tasks ls`) or task file")
    score.add_argument("--split", default="test", choices=["train", "test"])
    score.add_argument("--completions", type=Path, required=True, help='JSONL: {"task_id", "completion"}')
    score.add_argument("--json", type=Path, help="also write the summary and per-line scores here")
    score.add_argument("--mode", default="binary", choices=["binary", "partial"], help="reward mode")
    score.add_argument(
        "--timeout-s", type=float_in(0.01, 3600.0), default=10.0, help="per-program time limit (wall and CPU)"
    )
    score.add_argument("--visible", action="store_true", help="score on visible tests instead of hidden ones")
    score.add_argument(
        "--verifier",
        action="append",
        default=[],
        metavar="DOMAIN=MODULE:FUNCTION",
        help="register an extra verifier before scoring (repeatable)",
    )
    score.set_defaults(func=_score)
