"""``execrl sample``: rejection sampling into SFT rows (``recipes/sample.py``). Cheap to import: torch loads in
the handler. Exit status: 0 rows written and the overlap check clean; 1 rows written but the overlap check
against HumanEval flagged some; 2 bad input (config, split, output path, endpoint), one ``error:`` line and
nothing written.

    execrl sample --model M --suite tools --samples-per-task 8 --out rows.jsonl tools.enabled=true
    execrl sample --base-url http://127.0.0.1:8000/v1 --served-model m --suite functions --out rows.jsonl

Every ``execrl train`` config key applies (``KEY=VALUE`` or ``--config``): the environment
(``tools.enabled``, ``refine.max_turns``, ``rollout.environment``), sampling (``rollout.temperature``,
``rollout.max_new_tokens``), the reward (a judge verifier by weight: ``--min-reward`` keeps the rows whose
reward reaches it instead of those that pass).
"""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path
from typing import Any

from execrl.config import ConfigError, load_config
from execrl.inputs import InputFileError, writable_file

__all__ = ["register"]

API_KEY_ENV = "EXECRL_API_KEY"


def _overrides(args: argparse.Namespace) -> list[str]:
    out = []
    if args.model:
        out.append(f"model.path={args.model}")
    if args.suite:
        out.append("tasks.suites={" + ", ".join(f'"{s}" = 1.0' for s in args.suite) + "}")
    if args.samples_per_task is not None:
        out.append(f"rollout.samples_per_prompt={args.samples_per_task}")
    if args.environment:
        out.append(f"rollout.environment={args.environment}")
    return [*out, *args.overrides]


def _endpoint(args: argparse.Namespace) -> Any:
    if not args.base_url:
        return None
    from execrl.chat_http import check_api_key, check_base_url
    from execrl.episodes.chat import Endpoint

    if not args.served_model:
        raise InputFileError("--base-url needs --served-model (the model name the endpoint serves)")
    try:
        url = check_base_url(args.base_url)
    except ValueError as exc:
        raise InputFileError(f"--base-url {exc}") from None
    key = args.api_key if args.api_key is not None else os.environ.get(API_KEY_ENV)
    if key:
        try:
            check_api_key(key)
        except ValueError as exc:
            raise InputFileError(f"--api-key (or ${API_KEY_ENV}): {exc}") from None
    return Endpoint(url, args.served_model, api_key=key or None)


def _sample(args: argparse.Namespace) -> int:
    if args.split != "train":
        raise ConfigError(
            f"--split {args.split}: sampled rows are training data; only --split train is sampled"
        )
    if args.min_reward is not None and not -10.0 <= args.min_reward <= 10.0:
        raise ConfigError(f"--min-reward {args.min_reward}: expected a reward in [-10, 10]")
    out = writable_file(args.out, "--out rows file")
    config = load_config(args.config, _overrides(args))
    endpoint = _endpoint(args)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    from execrl.recipes.sample import sample, write_rows
    from execrl.tools.transcripts import row_text

    result = sample(config, min_reward=args.min_reward, endpoint=endpoint, limit=args.limit)
    counts = write_rows(out, result)
    print(f"{len(result.rows)} rows written to {out} ({result.passed} of {result.samples} episodes kept before "
          f"deduplication; {len(result.counts)} tasks; counts per task in {counts})")  # fmt: skip
    solved = sum(1 for c in result.counts.values() if c["kept"])
    print(f"tasks with a kept row: {solved} of {len(result.counts)}")
    return 0 if _overlap_clean([(r["metadata"]["task_id"], row_text(r)) for r in result.rows]) else 1


def _overlap_clean(rows: list[tuple[str, str]]) -> bool:
    """The n-gram overlap of the written rows against HumanEval, as ``execrl tasks transcripts`` checks."""
    from execrl.tasks import load_suite
    from execrl.tasks.overlap import text_overlap_report

    report = text_overlap_report(rows, load_suite("humaneval", "test"), n=13, threshold=0.1)
    print(
        f"overlap with humaneval (13-grams): max {report.max_fraction:.3f} of a HumanEval task's n-grams; "
        + ("clean" if report.clean else f"{len(report.flagged)} contaminated pair(s)")
    )
    for pair in report.flagged[:20]:
        print(f"  FLAGGED {pair.train_id} ~ {pair.eval_id}: {pair.fraction:.3f}")
    return bool(report.clean)


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser("sample", help="rejection sampling: the model's passing episodes as SFT rows")
    p.add_argument("--config", type=Path, help="an execrl train TOML config (environment, sampling, reward)")
    p.add_argument("--model", help="model directory or name (model.path)")
    p.add_argument("--suite", action="append", help="suite to sample (repeatable; default: tasks.suites)")
    p.add_argument("--split", default="train", help="only train is sampled (the rows are training data)")
    p.add_argument("--samples-per-task", type=int, help="episodes per task (rollout.samples_per_prompt)")
    p.add_argument("--environment", help="rollout.environment (default: derived from tools/refine)")
    p.add_argument(
        "--min-reward", type=float, help="keep episodes whose reward reaches this (default: passed)"
    )
    p.add_argument("--limit", type=int, help="the first N train tasks of each suite")
    p.add_argument("--out", required=True, help="the rows file (JSONL); counts go to <stem>.counts.json")
    p.add_argument("--base-url", help="sample from an OpenAI-compatible endpoint instead of --model")
    p.add_argument("--served-model", help="the endpoint's model name (with --base-url)")
    p.add_argument("--api-key", help=f"the endpoint's key (default ${API_KEY_ENV})")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="any execrl train config key")
    p.set_defaults(func=_sample)
