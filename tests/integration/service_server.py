"""A real ``execrl sandbox serve --port 0`` for integration tests, and a JSON POST helper."""

from __future__ import annotations

import json
import signal
import socket
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
    try:
        yield line.split("listening on ", 1)[1].strip()
    finally:  # a failing test must not leave its server running
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


def wait_for_url(process: subprocess.Popen[str], timeout_s: float = 120.0) -> str:
    """The base URL a server started with ``--port 0`` prints (``listening on URL``), read from stdout."""
    import time

    assert process.stdout is not None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if "listening on" in line:
            return line.split("listening on ", 1)[1].strip()
        assert line or process.poll() is None, "the server exited before listening"
    raise AssertionError(f"the server did not start within {timeout_s:.0f} s")


def raw_post(url: str, path: str, body: bytes, *, content_length: int | None = None) -> socket.socket:
    """A POST sent on a raw socket and left open: ``content_length`` may announce more than ``body`` (a
    server that checks the length first answers without waiting for the rest); close it to walk away."""
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=120)
    length = len(body) if content_length is None else content_length
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {length}\r\n\r\n"
    )
    sock.sendall(head.encode() + body)
    return sock
