"""``execrl export`` and ``execrl serve`` (cheap to import: torch and aiohttp load in the handlers)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from execrl.inputs import float_in, positive_int

if TYPE_CHECKING:
    from aiohttp import web

    from execrl.serve.server import ServeConfig

API_KEY_ENV = "EXECRL_API_KEY"
log = logging.getLogger("execrl.serve")


def _export(args: argparse.Namespace) -> int:
    from execrl.config import ConfigError
    from execrl.rollout.models import ModelLoadError
    from execrl.serve.export import ExportError, export_check_summary, export_model
    from execrl.serve.export_check import ExportMismatch

    try:
        out = export_model(args.source, args.out_dir, force=args.force, adapter_only=args.adapter_only)
    except (ConfigError, ExportError, ModelLoadError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except ExportMismatch as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"exported: {out}")
    print(export_check_summary(out))
    return 0


def _api_key(args: argparse.Namespace) -> str | None:
    """``--api-key``, else ``$EXECRL_API_KEY``, else None (no authentication). A key given empty is
    refused: it served with no authentication (issue 35, class 9)."""
    key = args.api_key if args.api_key is not None else os.environ.get(API_KEY_ENV)
    if key is not None and not key.strip():
        where = "--api-key" if args.api_key is not None else f"${API_KEY_ENV}"
        raise ValueError(
            f"{where} is empty: the server would take requests with no authentication; give a key, or "
            f"leave both --api-key and ${API_KEY_ENV} unset to serve without one"
        )
    return key


def _config(args: argparse.Namespace, name: str) -> ServeConfig:
    from execrl.serve.server import ServeConfig

    return ServeConfig(
        model_name=name,
        default_max_tokens=args.max_tokens,
        max_prompts_per_batch=args.max_prompts_per_batch,
        seed=args.seed,
        max_n=args.max_n,
        max_request_tokens=args.max_request_tokens,
        max_prompt_tokens=args.max_prompt_tokens,
        max_queued_tokens=args.max_queued_tokens,
        short_request_tokens=args.short_request_tokens,
        engine_lanes=args.engine_lanes,
        max_body_mb=args.max_body_mb,
        allowed_origins=tuple(args.allow_origin),
        api_key=_api_key(args),
        shutdown_timeout_s=args.shutdown_timeout_s,
    )


def _serve(args: argparse.Namespace) -> int:
    from execrl.config import ConfigError
    from execrl.rollout.models import ModelLoadError

    try:  # every setting is checked before the model loads
        config = _config(args, args.served_model_name or args.model)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    import torch

    from execrl.rollout.hf_engine import HFEngine
    from execrl.serve.export import load_any_model
    from execrl.serve.server import build_app

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        model, tokenizer, source = load_any_model(args.model)
    except (ConfigError, ModelLoadError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    engine = HFEngine(model, tokenizer)
    auth = "bearer token required" if config.api_key else "no authentication"
    print(f"serving {source.description} as {config.model_name!r} ({auth})", flush=True)
    app = build_app(engine, config)
    asyncio.run(_serve_until_signal(app, args.host, args.port))
    return _exit_status(app)


def _exit_status(app: web.Application) -> int:
    """0, after a generation that ignored the stop is left behind: its thread would keep the interpreter
    alive until it ends (the engine has no step hook), so the process leaves without waiting for it."""
    from execrl.serve.server import engine_threads_alive

    if engine_threads_alive(app):
        log.warning("a generation is still running after the stop; exiting without waiting for it")
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    return 0


async def _serve_until_signal(app: web.Application, host: str, port: int) -> None:
    """Serve until SIGINT/SIGTERM; prints ``listening on URL`` once bound (``--port 0`` picks a port).

    The stop closes the port, finishes running generations at their next decode step (their clients get
    503), and waits at most ``--shutdown-timeout-s`` for handlers; a second signal exits at once."""
    from execrl.serve.background import start_site

    runner, url = await start_site(app, host, port)
    print(f"listening on {url}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_signal() -> None:
        if stop.is_set():
            os._exit(130)
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal)
    try:
        await stop.wait()
        log.info("stopping: finishing running generations, closing connections")
    finally:
        await runner.cleanup()


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    x = subparsers.add_parser("export", help="write a run/checkpoint as a plain Hugging Face model directory")
    x.add_argument("source", help="run directory (newest checkpoint), checkpoint directory or HF directory")
    x.add_argument("out_dir", type=Path, help="new directory to write (must not exist)")
    x.add_argument(
        "--force", action="store_true", help="replace OUT_DIR if it holds an earlier export (nothing else)"
    )
    x.add_argument(
        "--adapter-only",
        action="store_true",
        help="LoRA runs: write the PEFT adapter directory (over the base model) instead of folding it in",
    )
    x.set_defaults(func=_export)

    _add_serve(subparsers)


def _add_serve(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    s = subparsers.add_parser("serve", help="OpenAI-compatible HTTP server (/v1/chat/completions)")
    s.add_argument(
        "--model", required=True, help="'smollm2-135m-instruct', HF dir, run dir, checkpoint or adapter dir"
    )
    s.add_argument("--host", default="127.0.0.1", help="127.0.0.1 by default; see README, exposing safely")
    s.add_argument("--port", type=int, default=8000)
    s.add_argument("--served-model-name", help="the `model` clients must send (default: --model)")
    s.add_argument(
        "--api-key",
        help=f"require Authorization: Bearer KEY (default: ${API_KEY_ENV}; unset: no authentication)",
    )
    s.add_argument(
        "--allow-origin", action="append", default=[], metavar="ORIGIN", help="browser origin allowed to POST"
    )
    s.add_argument("--max-tokens", type=positive_int, default=256, help="default max_tokens of a request")
    s.add_argument(
        "--max-request-tokens", type=positive_int, default=2048, help="most max_tokens a request may ask"
    )
    s.add_argument("--max-n", type=positive_int, default=16, help="most choices (n) per request")
    s.add_argument(
        "--max-prompt-tokens", type=positive_int, help="most prompt tokens (default: the model's context)"
    )
    s.add_argument(
        "--max-queued-tokens",
        type=positive_int,
        default=1 << 16,
        help="n x (prompt + max_tokens) summed over queued and running requests (429 past it)",
    )
    s.add_argument(
        "--short-request-tokens",
        type=positive_int,
        default=256,
        help="requests asking at most this many tokens may use the lanes kept for short requests",
    )
    s.add_argument(
        "--engine-lanes", type=positive_int, default=2, help="engine threads (1 + short-request lanes)"
    )
    s.add_argument("--max-body-mb", type=positive_int, default=8, help="largest request body (413 past it)")
    s.add_argument(
        "--shutdown-timeout-s",
        type=float_in(0.1, 3600),
        default=10.0,
        help="how long a stop waits for requests",
    )
    s.add_argument("--max-prompts-per-batch", type=positive_int, default=32)
    s.add_argument("--threads", type=int, default=0, help="torch threads (0 = torch's default)")
    s.add_argument("--seed", type=int, default=0, help="seeds the server's generator of request seeds")
    s.set_defaults(func=_serve)
