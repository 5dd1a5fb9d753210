"""Run an aiohttp application on its own thread and event loop (tests, benchmarks, in-process serving).

Why: the refine loop, the benchmark and the tests drive the server with blocking clients (the ``openai``
package), so the server needs its own loop; a subprocess would also work but hides tracebacks.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from aiohttp import web

__all__ = ["RUNNER_OPTIONS", "RunnerOptions", "make_runner", "serve_in_thread", "start_site"]


@dataclass(frozen=True)
class RunnerOptions:
    """How an app wants to be run: ``handler_cancellation`` cancels a handler whose client disconnected
    (``execrl serve`` uses it to stop generating for that client); ``shutdown_timeout_s`` bounds how long
    a stop waits for handlers still running."""

    handler_cancellation: bool = False
    shutdown_timeout_s: float = 60.0


RUNNER_OPTIONS = web.AppKey("runner_options", RunnerOptions)


def make_runner(app: web.Application) -> web.AppRunner:
    """An ``AppRunner`` with the options ``app`` asks for (``app[RUNNER_OPTIONS]``; aiohttp's defaults)."""
    options = app.get(RUNNER_OPTIONS) or RunnerOptions()
    return web.AppRunner(
        app,
        handler_cancellation=options.handler_cancellation,
        shutdown_timeout=options.shutdown_timeout_s,
    )


async def start_site(
    app: web.Application, host: str, port: int, *, runner: web.AppRunner | None = None
) -> tuple[web.AppRunner, str]:
    """Set up ``app`` and listen on ``host:port``; returns the runner and the bound base URL."""
    runner = runner or make_runner(app)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    server = site._server
    if server is None or not getattr(server, "sockets", None):
        raise RuntimeError(f"aiohttp did not bind {host}:{port}")
    return runner, f"http://{host}:{server.sockets[0].getsockname()[1]}"  # type: ignore[attr-defined]


@contextmanager
def serve_in_thread(app: web.Application, host: str = "127.0.0.1", port: int = 0) -> Iterator[str]:
    """Serve ``app`` until the block exits; yields the base URL (``port=0`` picks a free port)."""
    loop = asyncio.new_event_loop()
    runner = make_runner(app)
    ready = threading.Event()
    bound: list[str] = []

    async def start() -> None:
        bound.append((await start_site(app, host, port, runner=runner))[1])

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(start())
        ready.set()
        loop.run_forever()

    thread = threading.Thread(target=run, name="execrl-serve", daemon=True)
    thread.start()
    if not ready.wait(timeout=60) or not bound:
        raise RuntimeError(f"the server did not start on {host}:{port} within 60 s")
    try:
        yield bound[0]
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(timeout=60)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=60)
        loop.close()
