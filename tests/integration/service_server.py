"""A real ``execrl sandbox serve --port 0`` for integration tests, and a JSON POST helper."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

EXECRL = str(Path(sys.executable).with_name("execrl"))


@contextmanager
def running_server(*extra_args: str) -> Iterator[str]:
    """The server's base URL while it runs; it must exit 0 on SIGTERM."""
    command = [EXECRL, "sandbox", "serve", "--port", "0", "--workers", "2", *extra_args]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdout is not None
    line = process.stdout.readline()  # blocks until the server is listening (or has died)
    if "listening on" not in line:
        process.kill()
        pytest.fail(f"server did not start: {line!r} {process.communicate()[1]}")
    yield line.split("listening on ", 1)[1].strip()
    process.send_signal(signal.SIGTERM)
    process.communicate(timeout=30)  # also closes the pipes
    assert process.returncode == 0


def post(url: str, body: Any, *, raw: bytes | None = None) -> tuple[int, Any]:
    data = raw if raw is not None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())
