"""``execrl tools run``: tool episodes of a suite against an OpenAI-compatible endpoint (``tools/remote.py``).

Prints one line per task as its episode ends (passed, reward, calls, parse errors, how it ended) and a
summary (pass rate, calls per episode, parse errors, endpoint errors); ``--json PATH`` writes the summary
and every episode's conversation. Every input is checked before the first episode (``--url``,
``--api-key``, ``--json``, ``--tokenizer``: one ``error:`` line, exit 2). A run stopped early (Ctrl-C,
SIGTERM, a bug) still writes the episodes that finished, as a report marked ``"partial": true`` with why
(exit 130 for a signal; a bug keeps its traceback). Cheap to import: the sandbox and the suite load
inside the handler.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from execrl.inputs import InputFileError, float_in, positive_int, writable_file

__all__ = ["register"]

API_KEY_ENV = "EXECRL_API_KEY"


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


def _checked_inputs(args: argparse.Namespace) -> tuple[str, str | None, Any]:
    """Everything the run needs that can be wrong, checked before any episode: the URL, the API key, the
    report path and the tokenizer (loaded). Raises ``InputFileError`` (one line, exit 2)."""
    from execrl.chat_http import check_api_key, check_base_url
    from execrl.rollout import model_dir

    try:
        url = check_base_url(args.url)
    except ValueError as exc:
        raise InputFileError(f"--url {exc}") from None
    key = args.api_key if args.api_key is not None else os.environ.get(API_KEY_ENV)
    if key:  # an empty key sends no Authorization header (the endpoint needs none)
        try:
            check_api_key(key)
        except ValueError as exc:
            raise InputFileError(f"--api-key (or ${API_KEY_ENV}): {exc}") from None
    if args.json is not None:
        writable_file(args.json, "--json report")
    tokenizer = None
    if args.tokenizer:
        path = Path(args.tokenizer).expanduser()
        if not path.is_dir():
            raise InputFileError(
                f"--tokenizer {args.tokenizer}: not a directory (a model or tokenizer directory)"
            )
        tokenizer = model_dir.load_tokenizer(path)  # ModelLoadError names the file: exit 2
    return url, key or None, tokenizer


@contextlib.contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """SIGTERM (and SIGINT) raise ``KeyboardInterrupt`` inside the block, as Ctrl-C does, so the finished
    episodes are written before the process ends (SIGTERM's default action kills it on the spot). Main
    thread only."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    # SIGINT too: whatever handler an embedding process left installed, Ctrl-C ends the run the same way
    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _write_report(
    args: argparse.Namespace, episodes: list[Any], *, planned: int, stopped: str | None
) -> None:
    """The summary and every finished episode; ``partial`` (with why) when the run stopped early."""
    from execrl.tools.remote import episode_record, summarize

    report = {
        "suite": args.suite, "split": args.split, "model": args.model, "url": args.url,
        "partial": stopped is not None, "stopped": stopped, "episodes_planned": planned,
        "summary": summarize(episodes), "episodes": [episode_record(e) for e in episodes],
    }  # fmt: skip
    args.json.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.json.with_name(f".{args.json.name}.tmp")
    tmp.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    tmp.replace(args.json)
    print(f"{'partial ' if stopped else ''}report: {args.json}", flush=True)


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
    url, key, tokenizer = _checked_inputs(args)
    endpoint = Endpoint(
        url, args.model, api_key=key, timeout_s=args.timeout_s, send_seed=args.seed is not None
    )
    finished: list[Any] = []

    def done(e: Any) -> None:
        finished.append(e)
        print(_line(episode_record(e)), flush=True)

    stopped: str | None = None
    try:
        with _sigterm_interrupts(), Sandbox(SandboxConfig(workers=args.sandbox_workers)) as sandbox:
            run_remote_episodes(
                endpoint, tasks, sandbox, config=config, tokenizer=tokenizer, temperature=args.temperature,
                top_p=args.top_p, seed=args.seed or 0, on_episode=done,
            )  # fmt: skip
    except KeyboardInterrupt as exc:
        stopped = f"interrupted ({str(exc) or 'SIGINT'})"
    except BaseException as exc:  # a bug: keep what finished, then let the traceback show it
        if args.json:
            _write_report(args, finished, planned=len(tasks), stopped=f"{type(exc).__name__}: {exc}")
        raise
    summary = summarize(finished)
    print(
        f"{len(finished)} episodes{f' of {len(tasks)}, {stopped}' if stopped else ''}: pass rate "
        f"{summary['pass_rate']:.3f}, reward {summary['reward_mean']:.3f}, calls/episode "
        f"{summary['calls_per_episode']:.2f}, parse errors {int(summary['parse_errors'])}, endpoint errors "
        f"{int(summary['endpoint_errors'])}"
    )
    if args.json:
        _write_report(args, finished, planned=len(tasks), stopped=stopped)
    return 130 if stopped else 0


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``execrl tools ...`` to the top-level parser."""
    parser = subparsers.add_parser(
        "tools", help="tool-calling episodes against an OpenAI-compatible endpoint"
    )
    sub = parser.add_subparsers(dest="tools_command", metavar="ACTION", required=True)
    run = sub.add_parser("run", help="run a suite's tool episodes against --url, judged on the hidden tests")
    run.add_argument("--url", required=True, help="the endpoint's base URL, e.g. http://127.0.0.1:8000/v1")
    run.add_argument("--model", required=True, help="the model name the endpoint serves")
    run.add_argument("--api-key", default=None, help=f"bearer token (default: ${API_KEY_ENV}, else none)")
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
    run.add_argument(
        "--timeout-s", type=float_in(0.001, 86400.0), default=600.0, help="each request's total deadline"
    )
    run.add_argument(
        "--tokenizer", default=None, help="cut tool answers by this tokenizer's tokens (else chars)"
    )
    run.add_argument("--sandbox-workers", type=positive_int, default=2, help="sandbox workers (default 2)")
    run.set_defaults(func=_run)
