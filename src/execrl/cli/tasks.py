"""``execrl tasks ls|check|overlap|transcripts|import``: inspect suites, verify them, check contamination,
write SFT rows from their references, convert.

``SUITE`` is a registered suite name or a path/URL of a task JSONL file. Exit status: 0 ok; 1 the check
failed (a reference failed, a wrong answer passed, or overlap above the threshold); 2 bad input.
Cheap to import: suites, rewards and the sandbox load inside the handlers.

In the CLI layer rather than ``execrl/tasks/`` because ``check`` scores the references through the reward
path (``execrl.rewards.check_scorer``), and ``rewards`` sits above ``tasks`` (issue 36: from ``tasks/`` it
was the one upward import, a rewards <-> tasks package cycle).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from execrl.inputs import InputFileError, float_in, positive_int
from execrl.tasks.errors import TaskError, TaskSourceError

EXIT_OK, EXIT_FAILED, EXIT_ERROR = 0, 1, 2

__all__ = ["register"]


def _load(name: str, split: str | None, limit: int | None = None) -> list[Any]:
    from execrl.tasks.registry import default_split, is_task_source, load_suite
    from execrl.tasks.storage import load_tasks

    if is_task_source(name):
        tasks = load_tasks(name)
        if not tasks:
            raise TaskSourceError(f"{name}: no tasks (the file has no rows)")
    else:
        tasks = load_suite(name, split or default_split(name))
    return tasks[:limit] if limit is not None else tasks


def _print_table(header: list[str], rows: list[list[Any]]) -> None:
    cells = [header, *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    for i, row in enumerate(cells):
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        if i == 0:
            print("  ".join("-" * w for w in widths))


def _ls(args: argparse.Namespace) -> int:
    from execrl.tasks.registry import list_suites

    infos = list_suites()
    if args.json:
        print(json.dumps([asdict(i) for i in infos], indent=2))
        return EXIT_OK
    rows = [
        [i.name, ",".join(i.domains), *(i.counts.get(s, "-") for s in ("train", "test")), i.description]
        for i in infos
    ]
    _print_table(["suite", "domains", "train", "test", "description"], rows)
    return EXIT_OK


def _check(args: argparse.Namespace) -> int:
    from execrl.rewards import check_scorer
    from execrl.tasks.check import check_tasks, report_to_dict, tool_reference_answers

    tasks = _load(args.suite, args.split, args.limit)
    tool_answers = None
    if any(t.session is not None and t.session.reference_cells for t in tasks):
        from execrl.sandbox import default_sandbox

        tool_answers = tool_reference_answers(tasks, default_sandbox())
    report = check_tasks(tasks, scorer=check_scorer, tool_answers=tool_answers)
    if args.json:
        print(json.dumps(report_to_dict(report), indent=2))
        return EXIT_OK if report.ok else EXIT_FAILED
    rows = [
        [
            f.family,
            f.tasks,
            f"{f.reference_passed}/{f.reference_total}",
            f"{f.wrong_failed}/{f.wrong_total}",
            f"{f.visible_passed}/{f.visible_total}",
            f"{f.audit_passed}/{f.audit_total}",
            f"{f.tool_passed}/{f.tool_total}",
            "ok" if f.ok else "FAIL",
        ]
        for f in report.families
    ]
    header = ["family", "tasks", "reference passed", "wrong failed", "visible passed", "audit passed",
              "tool ref passed"]  # fmt: skip
    _print_table([*header, "verdict"], rows)
    for failure in report.failures:
        print(
            f"{failure.task_id}: reference={failure.reference} wrong={failure.wrong} visible={failure.visible}"
            f" audit={failure.audit} tool={failure.tool}"
        )
    _print_without_audit(report.without_audit)
    print(
        f"{len(report.tasks)} tasks: {'all checks passed' if report.ok else f'{len(report.failures)} FAILED'}"
    )
    return EXIT_OK if report.ok else EXIT_FAILED


def _print_without_audit(task_ids: tuple[str, ...], shown: int = 20) -> None:
    """Tasks with no audit split: their completions cannot be re-run on held-back tests during training."""
    if not task_ids:
        return
    listed = ", ".join(task_ids[:shown]) + (
        f", ... ({len(task_ids) - shown} more)" if len(task_ids) > shown else ""
    )
    print(f"{len(task_ids)} tasks have no audit tests (reward hacking on them goes unaudited): {listed}")


def _overlap(args: argparse.Namespace) -> int:
    from execrl.tasks.overlap import overlap_report

    train, evaluation = _load(args.suite, args.split), _load(args.against, "test")
    report = overlap_report(train, evaluation, n=args.n, threshold=args.threshold)
    if args.json:
        worst = sorted(report.eval_max.items(), key=lambda kv: -kv[1])[:10]
        data = {k: v for k, v in asdict(report).items() if k not in ("eval_max", "train_max")}
        print(
            json.dumps(
                data | {"clean": report.clean, "max_fraction": report.max_fraction, "worst_eval": worst},
                indent=2,
            )
        )
    else:
        print(
            f"{args.suite}/{args.split or 'default split'} ({report.train_tasks} tasks) vs {args.against} ({report.eval_tasks} tasks), "
            f"{report.n}-grams, {report.ignored_common_ngrams} boilerplate n-grams ignored"
        )
        print(
            f"max overlap: {report.max_fraction:.3f} of an eval task's n-grams (threshold {report.threshold})"
        )
        for pair in report.flagged[:20]:
            print(
                f"  FLAGGED {pair.train_id} ~ {pair.eval_id}: {pair.shared_ngrams} shared, {pair.fraction:.3f}"
            )
        print("clean" if report.clean else f"{len(report.flagged)} contaminated pair(s)")
    return EXIT_OK if report.clean else EXIT_FAILED


def _import(args: argparse.Namespace) -> int:
    from execrl.tasks.importers import get_importer
    from execrl.tasks.storage import save_tasks

    importer = get_importer(args.format)
    tasks = importer(args.src, split=args.split)
    if not tasks:
        raise TaskSourceError(f"{args.src}: no tasks (the file has no rows)")
    written = save_tasks(tasks, args.dest)
    print(f"imported {written} task(s) from {args.src} ({args.format}) to {args.dest}")
    return EXIT_OK


def _transcripts(args: argparse.Namespace) -> int:
    """SFT rows from the suite's references (``execrl.tools.transcripts``), each final answer passing its
    hidden tests, then the n-gram overlap of the written rows against HumanEval."""
    from execrl.sandbox import default_sandbox
    from execrl.tasks.overlap import text_overlap_report
    from execrl.tools.transcripts import ToolConfig, row_text, transcripts

    if args.split != "train":
        raise TaskError(f"--split {args.split}: transcripts are training data; only --split train is written")
    if args.out.exists() and args.out.is_dir():
        raise InputFileError(f"{args.out}: exists and is a directory, expected a file path")
    tasks = _load(args.suite, "train", args.limit)
    tasks = [t for t in tasks if t.metadata.split == "train"]  # a task file may hold both splits
    if not tasks:
        raise TaskError(f"{args.suite}: no train tasks")
    done = transcripts(tasks, default_sandbox(), suite=args.suite, config=ToolConfig())
    tmp = args.out.with_name(args.out.name + ".tmp")
    tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in done.rows), encoding="utf-8")
    tmp.replace(args.out)
    report = text_overlap_report([(r["metadata"]["task_id"], row_text(r)) for r in done.rows],
                                 _load("humaneval", "test"), n=13, threshold=0.1)  # fmt: skip
    print(f"{args.suite}/train: {len(done.rows)} transcripts written to {args.out} ({len(tasks)} tasks; "
          f"{len(done.failed)} references failed their hidden tests, {len(done.without_reference)} without "
          "a reference)")  # fmt: skip
    for line in done.failed[:20]:
        print(f"  FAILED {line}")
    print(
        f"overlap with humaneval (13-grams): max {report.max_fraction:.3f} of a HumanEval task's n-grams; "
        + ("clean" if report.clean else f"{len(report.flagged)} contaminated pair(s)")
    )
    for pair in report.flagged[:20]:
        print(f"  FLAGGED {pair.train_id} ~ {pair.eval_id}: {pair.fraction:.3f}")
    return EXIT_OK if report.clean and not done.failed else EXIT_FAILED


def _guard(handler: Any) -> Any:
    """Turn our own input errors into a message and exit status 2 (tracebacks are for bugs)."""

    def run(args: argparse.Namespace) -> int:
        try:
            return int(handler(args))
        except (TaskError, InputFileError, FileNotFoundError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_ERROR

    return run


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``execrl tasks ...`` to the top-level parser."""
    parser = subparsers.add_parser("tasks", help="list, check, compare and import task suites")
    sub = parser.add_subparsers(dest="tasks_command", metavar="ACTION", required=True)

    ls = sub.add_parser("ls", help="suites with their domains and task counts per split")
    ls.add_argument("--json", action="store_true", help="print JSON instead of a table")
    ls.set_defaults(func=_guard(_ls))

    check = sub.add_parser("check", help="reference answers must pass and wrong answers fail, per family")
    check.add_argument("suite", metavar="SUITE", help="suite name or task JSONL path/URL")
    check.add_argument(
        "--split", default=None, choices=("train", "test"), help="default: train, else the only split"
    )
    check.add_argument("--limit", type=positive_int, default=None, help="check only the first N tasks")
    check.add_argument("--json", action="store_true", help="print JSON instead of a table")
    check.set_defaults(func=_guard(_check))

    overlap = sub.add_parser("overlap", help="n-gram contamination of SUITE against an eval suite")
    overlap.add_argument("suite", metavar="SUITE", help="suite name or task JSONL path/URL")
    overlap.add_argument("--against", default="humaneval", help="eval suite (its 'test' split)")
    overlap.add_argument(
        "--split", default=None, choices=("train", "test"), help="split of SUITE (default train)"
    )
    overlap.add_argument("--n", type=positive_int, default=13, help="n-gram length in tokens (default 13)")
    overlap.add_argument(
        "--threshold", type=float_in(0.0, 1.0), default=0.1, help="flag pairs sharing this share of n-grams"
    )
    overlap.add_argument("--json", action="store_true", help="print JSON instead of text")
    overlap.set_defaults(func=_guard(_overlap))

    tr = sub.add_parser("transcripts", help="SFT rows from a suite's references (train split only)")
    tr.add_argument("suite", metavar="SUITE", help="suite name or task JSONL path/URL")
    tr.add_argument("--split", default="train", help="train (the only split written)")
    tr.add_argument("--out", type=Path, required=True, help="JSONL file of SFT rows to write")
    tr.add_argument("--limit", type=positive_int, default=None, help="only the first N tasks")
    tr.set_defaults(func=_guard(_transcripts))

    from execrl.tasks.importers import IMPORTERS  # light: no dataset is read here

    imp = sub.add_parser("import", help="convert a public-format file to execrl task JSONL")
    imp.add_argument("format", metavar="FORMAT", choices=sorted(IMPORTERS), help=", ".join(sorted(IMPORTERS)))
    imp.add_argument("src", metavar="SRC", help="source file path or fsspec URL")
    imp.add_argument("dest", metavar="DEST", help="destination JSONL path or URL (.gz compresses)")
    imp.add_argument(
        "--split", default=None, choices=("train", "test"), help="split to record (formats without one)"
    )
    imp.set_defaults(func=_guard(_import))
