"""``execrl monitor RUN_DIR``: a live page of a run's curves and alarms, served locally with aiohttp.

The page (``static/monitor.html`` + two small JS files, no CDN: machines often have no internet) polls
``/api/metrics?since=STEP`` every 1.5 s. The server reads ``metrics.jsonl`` incrementally by byte offset,
merges lines that share a step, and answers with the rows after ``since`` plus all fired alarms, so
polling costs one ``stat`` when nothing changed.

Limits: all rows stay in memory (fine for the 10^4 steps of a run); there is no authentication, so it
binds to 127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import functools
import json
import logging
import math
import os
import signal
import socket
import stat
import threading
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from aiohttp import web

from execrl.telemetry.reader import JsonlTail
from execrl.telemetry.records import strict_obj

__all__ = ["MonitorHandle", "MonitorState", "build_app", "run_monitor", "start_monitor_in_thread"]

_log = logging.getLogger(__name__)
_STATIC = {
    "monitor.html": "text/html",
    "monitor.js": "application/javascript",
    "charts.js": "application/javascript",
    "monitor.css": "text/css",
}
_CONFIG_MAX_CHARS = 20_000


class MonitorState:
    """The run as the page sees it: rows merged by step, alarms, and a generation bumped on rewrites."""

    def __init__(self, run_dir: str | Path) -> None:
        self.run_dir = Path(run_dir)
        self.metrics = JsonlTail(self.run_dir / "metrics.jsonl")
        self.alarm_tail = JsonlTail(self.run_dir / "alarms.jsonl")
        self.rows: dict[int, dict[str, Any]] = {}
        self.steps: list[int] = []
        self.alarms: list[dict[str, Any]] = []

    def refresh(self) -> None:
        generation = self.metrics.generation
        new_rows = self.metrics.poll()
        if self.metrics.generation != generation:
            self.rows.clear()
            self.steps.clear()
        for obj in new_rows:
            self._merge(obj)
        alarm_generation = self.alarm_tail.generation
        new_alarms = self.alarm_tail.poll()
        if self.alarm_tail.generation != alarm_generation:
            self.alarms.clear()
        self.alarms.extend(_finite(a) for a in new_alarms)

    def _merge(self, obj: dict[str, Any]) -> None:
        try:
            clean = strict_obj(obj)
        except ValueError as exc:  # one bad line costs that line only
            self.metrics.skipped_lines += 1
            _log.warning("%s: skipping a metrics line (%s)", self.metrics.path, exc)
            return
        step = clean["step"]
        row = self.rows.get(step)
        if row is None:
            self.rows[step] = clean
            bisect.insort(self.steps, step)
            return
        nonfinite = {**row.get("nonfinite", {}), **clean.get("nonfinite", {})}
        row.update(clean)
        if nonfinite:
            row["nonfinite"] = nonfinite

    def snapshot(self, since: int) -> dict[str, Any]:
        start = bisect.bisect_right(self.steps, since)
        return {
            "run": self.run_dir.name,
            "generation": self.metrics.generation,
            "rows": [self.rows[s] for s in self.steps[start:]],
            "alarms": self.alarms,
            "last_step": self.steps[-1] if self.steps else None,
            "skipped_lines": self.metrics.skipped_lines + self.alarm_tail.skipped_lines,
        }

    def info(self) -> dict[str, Any]:
        return {"run": self.run_dir.name, "run_dir": str(self.run_dir.resolve()), "config": self._config()}

    def _config(self) -> str | None:
        """``config.toml`` when it is a regular file directly in the run directory; never a symlink (a
        link to ``~/.ssh/id_rsa`` named config.toml would otherwise be served to anyone who can reach the
        page) and never anything else (a FIFO would block the server)."""
        try:
            fd = os.open(self.run_dir / "config.toml", os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:  # missing, a symlink (ELOOP), unreadable: nothing to show
            return None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
            data = os.read(fd, 4 * _CONFIG_MAX_CHARS)
        finally:
            os.close(fd)
        return data.decode("utf-8", errors="replace")[:_CONFIG_MAX_CHARS]


def _finite(value: Any) -> Any:
    """``value`` with every non-finite float replaced by null (the page parses strict JSON)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


_strict_dumps = functools.partial(json.dumps, allow_nan=False)


def _static_handler(name: str) -> Any:
    body = resources.files("execrl.telemetry").joinpath("static", name).read_bytes()

    async def handler(request: web.Request) -> web.Response:
        return web.Response(body=body, content_type=_STATIC[name], headers={"Cache-Control": "no-cache"})

    return handler


def build_app(run_dir: str | Path) -> web.Application:
    """The aiohttp application for one run directory (the directory may not exist yet)."""
    state = MonitorState(run_dir)

    async def metrics(request: web.Request) -> web.Response:
        try:
            since = int(request.query.get("since", "-1"))
        except ValueError:
            raise web.HTTPBadRequest(text="since must be an integer step") from None
        state.refresh()
        body = state.snapshot(since)
        return web.json_response(body, headers={"Cache-Control": "no-store"}, dumps=_strict_dumps)

    async def info(request: web.Request) -> web.Response:
        return web.json_response(state.info(), dumps=_strict_dumps)

    app = web.Application()
    app.router.add_get("/", _static_handler("monitor.html"))
    for name in _STATIC:
        app.router.add_get(f"/{name}", _static_handler(name))
    app.router.add_get("/api/metrics", metrics)
    app.router.add_get("/api/info", info)
    return app


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    return sock


@dataclass
class MonitorHandle:
    """A monitor running in a background thread (tests, notebooks). ``close()`` stops it."""

    url: str
    _loop: asyncio.AbstractEventLoop
    _runner: web.AppRunner
    _thread: threading.Thread

    def close(self) -> None:
        future = asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop)
        future.result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()


def start_monitor_in_thread(run_dir: str | Path, *, host: str = "127.0.0.1", port: int = 0) -> MonitorHandle:
    """Serve the monitor from a daemon thread; ``port=0`` picks a free port (see ``handle.url``)."""
    sock = _bind(host, port)
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(build_app(run_dir), access_log=None)

    async def _start() -> None:
        await runner.setup()
        await web.SockSite(runner, sock).start()

    thread = threading.Thread(target=loop.run_forever, name="execrl-monitor", daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(_start(), loop).result(timeout=10)
    bound_port = sock.getsockname()[1]
    return MonitorHandle(f"http://{host}:{bound_port}/", loop, runner, thread)


def run_monitor(run_dir: str | Path, *, host: str = "127.0.0.1", port: int = 8765) -> None:
    """Serve until interrupted (the ``execrl monitor`` command)."""
    sock = _bind(host, port)
    if host not in ("127.0.0.1", "localhost", "::1"):
        _log.warning(
            "monitor listens on %s without authentication; anyone who can reach it sees the run", host
        )

    async def _serve() -> None:
        runner = web.AppRunner(build_app(run_dir), access_log=None)
        await runner.setup()
        await web.SockSite(runner, sock).start()
        print(f"execrl monitor: http://{host}:{sock.getsockname()[1]}/  (Ctrl-C to stop)", flush=True)
        stopped = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stopped.set)  # clean exit on kill
        try:
            await stopped.wait()
        finally:
            await runner.cleanup()

    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is the normal way to stop it
        asyncio.run(_serve())
