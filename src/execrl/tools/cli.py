"""``execrl tools run``: tool episodes of a suite against an OpenAI-compatible endpoint (``tools/remote.py``).

Prints one line per task (passed, reward, calls, parse errors, how the episode ended) and a summary
(pass rate, calls per episode, parse errors); ``--json PATH`` writes the summary and every episode's
conversation. Cheap to import: the sandbox and the suite load inside the handler.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from execrl.inputs import float_in, positive_int

__all__ = ["register"]


def _config(args: argparse.Namespace) -> Any:
    from execrl.tools.env import ToolConfig

    return ToolConfig(
        max_tool_calls=args.max_tool_calls, max_turn_tokens=args.max_turn_tokens,
        max_episode_tokens=args.max_episode_tokens, max_tool_output_tokens=args.max_tool_output_tokens,
        cell_timeout_s=args.cell_timeout_s,
    )  # fmt: skip


def _line(e: dict[str, Any]) -> str:
    verdict = "pass" if e["passed"] else "fail"
    calls = ",".join(e["calls"]) or "-"
    error = f"  error: {e['error'][:200]}" if e["error"] else ""
    return (
        f"{e['task_id']:<40} {verdict}  reward {e['reward']:.2f}  calls {e['tool_calls']} ({calls})  "
        f"parse errors {e['parse_errors']}  stop {e['stop']}{error}"
    )


def _run(args: argparse.Namespace) -> int:
    from execrl.sandbox import Sandbox, SandboxConfig
    from execrl.tasks import load_suite
    from execrl.tools.remote import Endpoint, episode_record, run_remote_episodes, summarize

    try:
        config = _config(args)
        tasks = load_suite(args.suite, split=args.split)[: args.limit]
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    tokenizer = None
    if args.tokenizer:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(args.tokenizer)
    endpoint = Endpoint(
        args.url, args.model, api_key=args.api_key or os.environ.get("EXECRL_API_KEY"),
        timeout_s=args.timeout_s, send_seed=args.seed is not None,
    )  # fmt: skip
    with Sandbox(SandboxConfig(workers=args.sandbox_workers)) as sandbox:
        episodes = run_remote_episodes(
            endpoint, tasks, sandbox, config=config, tokenizer=tokenizer, temperature=args.temperature,
            top_p=args.top_p, seed=args.seed or 0,
        )  # fmt: skip
    records = [episode_record(e) for e in episodes]
    for record in records:
        print(_line(record))
    summary = summarize(episodes)
    print(
        f"{len(episodes)} episodes: pass rate {summary['pass_rate']:.3f}, reward {summary['reward_mean']:.3f}, "
        f"calls/episode {summary['calls_per_episode']:.2f}, parse errors {int(summary['parse_errors'])}, "
        f"endpoint errors {int(summary['endpoint_errors'])}"
    )
    if args.json:
        report = {"suite": args.suite, "split": args.split, "model": args.model, "url": args.url,
                  "summary": summary, "episodes": records}  # fmt: skip
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
        print(f"report: {args.json}")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``execrl tools ...`` to the top-level parser."""
    parser = subparsers.add_parser(
        "tools", help="tool-calling episodes against an OpenAI-compatible endpoint"
    )
    sub = parser.add_subparsers(dest="tools_command", metavar="ACTION", required=True)
    run = sub.add_parser("run", help="run a suite's tool episodes against --url, judged on the hidden tests")
    run.add_argument("--url", required=True, help="the endpoint's base URL, e.g. http://127.0.0.1:8000/v1")
    run.add_argument("--model", required=True, help="the model name the endpoint serves")
    run.add_argument("--api-key", default=None, help="bearer token (default: $EXECRL_API_KEY, else none)")
    run.add_argument("--suite", default="tools", help="suite name or task JSONL path/URL (default tools)")
    run.add_argument("--split", default="test", choices=("train", "test"), help="default test")
    run.add_argument("--limit", type=positive_int, default=None, help="only the first N tasks")
    run.add_argument("--json", type=Path, default=None, help="write the summary and the episodes here")
    run.add_argument("--max-tool-calls", type=positive_int, default=4, help="calls per episode (default 4)")
    run.add_argument("--max-turn-tokens", type=positive_int, default=256, help="max_tokens per request")
    run.add_argument("--max-episode-tokens", type=positive_int, default=1024, help="tokens after the prompt")
    run.add_argument(
        "--max-tool-output-tokens", type=positive_int, default=256, help="tokens of one tool answer"
    )
    run.add_argument("--cell-timeout-s", type=float_in(0.001, 600.0), default=10.0, help="one python cell")
    run.add_argument("--temperature", type=float_in(0.0, 2.0), default=1.0, help="sampling temperature")
    run.add_argument("--top-p", type=float_in(1e-6, 1.0), default=1.0, help="nucleus sampling")
    run.add_argument("--seed", type=int, default=None, help="sent as the request's seed")
    run.add_argument("--timeout-s", type=float_in(0.001, 86400.0), default=600.0, help="per request")
    run.add_argument(
        "--tokenizer", default=None, help="cut tool answers by this tokenizer's tokens (else chars)"
    )
    run.add_argument("--sandbox-workers", type=positive_int, default=2, help="sandbox workers (default 2)")
    run.set_defaults(func=_run)
