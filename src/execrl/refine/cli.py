"""``execrl refine`` (the loop with its controls on a suite) and ``execrl refine show TRACE``."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any


def _backend(args: argparse.Namespace) -> tuple[Any, str]:
    """The rollout loop's backend for ``args`` and its name for the summary."""
    if args.base_url:
        from execrl.episodes.chat import ChatBackend, Endpoint

        endpoint = Endpoint(args.base_url, args.model, api_key=args.api_key, timeout_s=args.timeout_s)
        chat = ChatBackend(endpoint, concurrency=args.concurrency)
        return chat, chat.name
    import torch

    from execrl.episodes import LocalBackend
    from execrl.rollout.engine import create_engine
    from execrl.serve.export import load_any_model

    if args.threads:
        torch.set_num_threads(args.threads)
    model, tokenizer, source = load_any_model(args.model)
    engine = create_engine("hf", model=model, tokenizer=tokenizer)
    local = LocalBackend(
        engine, tokenizer, reuse_kv_max_bytes=args.kv_cache_mb << 20, prompts_per_batch=args.prompts_per_batch,
        max_batch_tokens=args.max_batch_tokens,
    )  # fmt: skip
    return local, source.description


def _config(args: argparse.Namespace) -> Any:
    from execrl.refine.runs import GenerationParams, RefineConfig

    generation = GenerationParams(
        max_new_tokens=args.max_new_tokens, temperature=args.temperature, top_p=args.top_p, seed=args.seed
    )
    return RefineConfig(
        rounds=args.rounds,
        feedback=args.feedback,
        max_failures_shown=args.max_failures_shown,
        max_feedback_tokens=args.max_feedback_tokens,
        history=args.history,
        generation=generation,
        seed=args.seed,
    )


def _refine(args: argparse.Namespace) -> int:
    from execrl.config import ConfigError

    if args.model is None:
        print("error: --model is required (or use `execrl refine show TRACE`)", file=sys.stderr)
        return 2
    for flag, value, least in (
        ("--prompts-per-batch", args.prompts_per_batch, 1),
        ("--max-batch-tokens", args.max_batch_tokens, 1),
        ("--kv-cache-mb", args.kv_cache_mb, 0),
    ):
        if value < least:
            print(f"error: {flag} must be >= {least}, got {value}", file=sys.stderr)
            return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    from execrl.refine.evaluate import evaluate_refine
    from execrl.sandbox import Sandbox, SandboxConfig
    from execrl.tasks import load_suite

    try:
        config = _config(args)
        tasks = load_suite(args.suite, split=args.split)[: args.limit]
        backend, name = _backend(args)
    except (ConfigError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    trace = args.trace or (args.json.with_suffix(".trace.jsonl") if args.json else None)
    try:
        with Sandbox(SandboxConfig(workers=args.sandbox_workers)) as sandbox:
            summary = evaluate_refine(
                tasks, backend, sandbox, config, conditions=args.conditions.split(","), trace_path=trace,
                backend_name=name,
            )  # fmt: skip
    finally:
        getattr(backend, "close", lambda: None)()
    summary["suite"], summary["split"] = args.suite, args.split
    print(format_summary(summary))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
        print(f"summary: {args.json}")
    if trace:
        print(f"trace: {trace}  (render: execrl refine show {trace})")
    return 0


def _ci(est: dict[str, float]) -> str:
    return f"{est['value']:.3f} [{est['ci_low']:.3f}, {est['ci_high']:.3f}]"


def format_summary(summary: dict[str, Any]) -> str:
    lines = [f"{summary['problems']} problems, hidden pass@1 by round (95% bootstrap CI):"]
    for name, cond in summary["conditions"].items():
        cells = "  ".join(_ci(e) for e in cond["hidden_pass_by_round"])
        lines.append(f"  {name:<16} {cells}")
    for name, deltas in summary["deltas"].items():
        lines.append(f"  {name:<28} " + "  ".join(_ci(e) for e in deltas))
    errors = {n: c["endpoint_errors"] for n, c in summary["conditions"].items() if c.get("endpoint_errors")}
    if errors:
        first = summary["endpoint_errors"][0]
        lines.append(
            "  endpoint errors (attempts counted as failed): "
            + ", ".join(f"{n} {k}" for n, k in errors.items())
            + f"; first: {first['task_id']} turn {first['turn']}: {first['error'][:200]}"
        )
    for name, cond in summary["conditions"].items():
        if cond["transitions"]:
            lines.append(
                f"  {name}: fix rate {cond['fix_rate']:.3f}, regressions {cond['regression_rate']:.3f}, "
                f"identical resubmissions {cond['identical_resubmission_rate']:.3f} "
                f"over {cond['transitions']} repairs; by error: "
                + ", ".join(f"{c} {v['fixed']}/{v['tried']}" for c, v in cond["fix_rate_by_error"].items())
            )
    return "\n".join(lines)


def _show(args: argparse.Namespace) -> int:
    from execrl.inputs import regular_file
    from execrl.refine.trace import format_trace, printable, read_trace

    skipped: list[tuple[int, str]] = []
    try:
        rows = list(read_trace(regular_file(args.trace_file, "refine trace"), skipped=skipped))
    except OSError as exc:
        print(f"error: {args.trace_file}: cannot read ({exc.strerror or exc})", file=sys.stderr)
        return 2
    if skipped and not rows:
        line, problem = skipped[0]
        print(
            f"error: {printable(args.trace_file)}:{line}: not a refine trace row ({printable(problem)}); "
            f"no row in {len(skipped)} lines",
            file=sys.stderr,
        )
        return 2
    print(format_trace(rows, task_id=args.task, condition=args.condition, show_prompt=args.prompt))
    if skipped:
        lines = ", ".join(str(n) for n, _ in skipped[:10]) + (" ..." if len(skipped) > 10 else "")
        print(
            f"(skipped {len(skipped)} malformed rows of {printable(args.trace_file)}: lines {lines})",
            file=sys.stderr,
        )
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    r = subparsers.add_parser("refine", help="execute-and-refine loop vs resampling and random feedback")
    r.add_argument("--model", help="model, run dir or checkpoint; with --base-url: the served model name")
    r.add_argument("--base-url", help="an OpenAI-compatible endpoint (e.g. http://127.0.0.1:8000/v1)")
    r.add_argument("--api-key", default="unused")
    r.add_argument("--concurrency", type=int, default=16, help="requests in flight (--base-url)")
    r.add_argument(
        "--timeout-s", type=float, default=3600.0, help="--base-url: one request's total deadline (seconds)"
    )
    r.add_argument("--suite", default="humaneval")
    r.add_argument("--split", default="test")
    r.add_argument("--rounds", type=int, default=3, help="generations per problem at most (1 + repairs)")
    r.add_argument("--feedback", default="details", choices=("pass_fail", "names", "details"))
    r.add_argument("--max-failures-shown", type=int, default=3)
    r.add_argument(
        "--max-feedback-tokens", type=int, default=512, help="feedback is cut past this many tokens (marked)"
    )
    r.add_argument("--history", default="full", choices=("full", "last"))
    r.add_argument("--conditions", default="refine,random_feedback,resample")
    r.add_argument("--max-new-tokens", type=int, default=384)
    r.add_argument("--temperature", type=float, default=0.6, help="> 0: resampling needs distinct samples")
    r.add_argument("--top-p", type=float, default=1.0)
    r.add_argument("--limit", type=int, help="only the first N problems")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--prompts-per-batch", type=int, default=16)
    r.add_argument(
        "--max-batch-tokens",
        type=int,
        default=32768,
        help="local engine: at most this many padded tokens per batch (memory grows with batch x length)",
    )
    r.add_argument(
        "--kv-cache-mb",
        type=int,
        default=2048,
        help="local engine: keys/values of earlier turns kept for the next round (0: re-prefill every turn); "
        "SmolLM2-135M keeps ~45 KB per token, so 164 conversations of ~600 tokens need ~4500",
    )
    r.add_argument("--threads", type=int, default=0)
    r.add_argument("--sandbox-workers", type=int, default=2)
    r.add_argument("--json", type=Path, help="summary JSON (trace next to it unless --trace)")
    r.add_argument("--trace", type=Path, help="JSONL trace of every turn")
    r.set_defaults(func=_refine)
    sub = r.add_subparsers(dest="refine_command", metavar="show")
    s = sub.add_parser("show", help="render a refine trace readably")
    s.add_argument("trace_file", type=Path)
    s.add_argument("--task", help="only this task id")
    s.add_argument("--condition", help="only this condition (refine, random_feedback, resample)")
    s.add_argument("--prompt", action="store_true", help="also print each problem's prompt")
    s.set_defaults(func=_show)
