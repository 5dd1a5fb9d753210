"""``execrl export`` and ``execrl serve`` (cheap to import: torch and aiohttp load in the handlers)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aiohttp import web


def _export(args: argparse.Namespace) -> int:
    from execrl.config import ConfigError
    from execrl.serve.export import export_model
    from execrl.serve.export_check import ExportMismatch

    try:
        out = export_model(args.source, args.out_dir, adapter_only=args.adapter_only)
    except (ConfigError, FileExistsError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except ExportMismatch as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"exported: {out}")
    print((out / "EXPORTED_FROM.txt").read_text(encoding="utf-8").splitlines()[-1])  # the logits check
    return 0


def _serve(args: argparse.Namespace) -> int:
    import torch

    from execrl.config import ConfigError
    from execrl.rollout.hf_engine import HFEngine
    from execrl.serve.export import load_any_model
    from execrl.serve.server import ServeConfig, build_app

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        model, tokenizer, source = load_any_model(args.model)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    engine = HFEngine(model, tokenizer)
    name = args.served_model_name or args.model
    config = ServeConfig(
        model_name=name,
        default_max_tokens=args.max_tokens,
        max_prompts_per_batch=args.max_prompts_per_batch,
        seed=args.seed,
    )
    print(f"serving {source.description} as {name!r}", flush=True)
    asyncio.run(_serve_until_signal(build_app(engine, config), args.host, args.port))
    return 0


async def _serve_until_signal(app: web.Application, host: str, port: int) -> None:
    """Serve until SIGINT/SIGTERM; prints ``listening on URL`` once bound (``--port 0`` picks a port)."""
    from execrl.serve.background import start_site

    runner, url = await start_site(app, host, port)
    print(f"listening on {url}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    x = subparsers.add_parser("export", help="write a run/checkpoint as a plain Hugging Face model directory")
    x.add_argument("source", help="run directory (newest checkpoint), checkpoint directory or HF directory")
    x.add_argument("out_dir", type=Path, help="new directory to write (must not exist or be empty)")
    x.add_argument(
        "--adapter-only",
        action="store_true",
        help="LoRA runs: write the PEFT adapter directory (over the base model) instead of folding it in",
    )
    x.set_defaults(func=_export)

    s = subparsers.add_parser("serve", help="OpenAI-compatible HTTP server (/v1/chat/completions)")
    s.add_argument(
        "--model", required=True, help="'smollm2-135m-instruct', HF dir, run dir, checkpoint or adapter dir"
    )
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=8000)
    s.add_argument("--served-model-name", help="the `model` clients must send (default: --model)")
    s.add_argument("--max-tokens", type=int, default=256, help="default max_tokens of a request")
    s.add_argument("--max-prompts-per-batch", type=int, default=32)
    s.add_argument("--threads", type=int, default=0, help="torch threads (0 = torch's default)")
    s.add_argument("--seed", type=int, default=0, help="seeds the server's generator of request seeds")
    s.set_defaults(func=_serve)
