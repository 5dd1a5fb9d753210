"""The alarm webhook against hostile loopback servers (issue 14, class 5).

Regressions: the timeout bounded each socket read, so a server trickling its headers held the training
loop (45 s seen); a 302 was followed, turning the POST into a body-less GET that still counted as
delivered; delivery ran on the training thread, so a slow hook slowed a step.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from execrl.telemetry.alarms import AlarmRule
from execrl.telemetry.run import RunTelemetry
from execrl.telemetry.webhook import WebhookConfig, post_json

Handler = Callable[[socket.socket, bytes], None]


class LoopbackServer:
    """A raw TCP server on 127.0.0.1 that records each request's head and lets ``handler`` answer."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.requests: list[bytes] = []
        self.received = threading.Event()
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/hook"
        self._threads: list[threading.Thread] = []
        self._accepter = threading.Thread(target=self._accept, daemon=True)
        self._accepter.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            thread.start()
            self._threads.append(thread)

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            data = b""
            while b"\r\n\r\n" not in data and (chunk := conn.recv(4096)):
                data += chunk
            head, _, body = data.partition(b"\r\n\r\n")
            length = next(
                (
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                ),
                0,
            )
            while len(body) < length and (chunk := conn.recv(4096)):
                body += chunk
            data = head + b"\r\n\r\n" + body
            self.requests.append(data)
            self.received.set()
            with contextlib.suppress(OSError):  # the client gave up: what this server is for
                self.handler(conn, data)

    def close(self) -> None:
        self.sock.close()
        for thread in self._threads:
            thread.join(timeout=30)


@pytest.fixture
def serve() -> Iterator[Callable[[Handler], LoopbackServer]]:
    servers: list[LoopbackServer] = []

    def start(handler: Handler) -> LoopbackServer:
        servers.append(LoopbackServer(handler))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def _trickle(conn: socket.socket, _: bytes) -> None:
    """Headers one byte every 0.1 s for up to 20 s: every read succeeds well within any timeout."""
    for byte in (b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 1000)[:200]:
        conn.sendall(bytes([byte]))
        time.sleep(0.1)


def test_trickling_headers_hit_the_overall_deadline(serve, caplog) -> None:
    server = serve(_trickle)
    config = WebhookConfig(url=server.url, timeout_s=1.0, retries=0)
    started = time.monotonic()
    assert post_json(config, {"alarm": 1}) is False
    assert time.monotonic() - started < 6.0  # 1 s deadline; the trickle would last 20 s
    assert "no complete answer within 1 s" in caplog.text


def _redirect(conn: socket.socket, _: bytes) -> None:
    conn.sendall(b"HTTP/1.1 302 Found\r\nLocation: /elsewhere\r\nContent-Length: 0\r\n\r\n")


def test_redirect_is_a_failed_delivery_and_is_not_followed(serve, caplog) -> None:
    server = serve(_redirect)
    config = WebhookConfig(url=server.url, timeout_s=2.0, retries=1, backoff_s=0.0)
    assert post_json(config, {"alarm": 1}) is False
    assert [r.split(b" ", 2)[:2] for r in server.requests] == [[b"POST", b"/hook"]] * 2  # no GET
    assert "HTTP 302 redirect to '/elsewhere' (redirects are not followed)" in caplog.text


def _held(release: threading.Event, answered: threading.Event) -> Handler:
    def handler(conn: socket.socket, _: bytes) -> None:
        release.wait(20)
        conn.sendall(b"HTTP/1.1 204 No Content\r\n\r\n")
        answered.set()

    return handler


def test_alarm_delivery_never_blocks_the_training_step(serve, tmp_path) -> None:
    release, answered = threading.Event(), threading.Event()
    server = serve(_held(release, answered))
    rule = AlarmRule("hook", "above", "kl/mean", threshold=1.0, action="webhook")
    config = WebhookConfig(url=server.url, timeout_s=30.0, retries=0)
    with RunTelemetry(tmp_path, rules=[rule], webhook=config, tensorboard=False) as tel:
        assert tel.log(0, {"kl/mean": 2.0}).fired
        assert not answered.is_set()  # the step returned while the hook was still holding the POST
        release.set()
    # close flushed the delivery: the sender counted the server's answer. (The server thread sets
    # ``answered`` just after sending it, so it may lag the client by a moment: CI flake under load.)
    assert tel.alarms.sender is not None and tel.alarms.sender.delivered == 1
    assert answered.wait(5)
    body = server.requests[0]
    assert body.startswith(b"POST /hook ")


def test_full_queue_drops_are_counted_and_logged(serve, caplog) -> None:
    from execrl.telemetry.webhook import WebhookSender

    release, answered = threading.Event(), threading.Event()
    server = serve(_held(release, answered))
    sender = WebhookSender(WebhookConfig(url=server.url, timeout_s=30.0, retries=0, queue_size=1))
    assert sender.submit({"n": 1})
    assert server.received.wait(10)  # the worker is busy with payload 1
    with caplog.at_level(logging.ERROR):
        assert sender.submit({"n": 2}) and not sender.submit({"n": 3})
    assert sender.dropped == 1 and "dropped an alarm payload" in caplog.text
    release.set()
    sender.close()
    assert (sender.delivered, sender.failed, sender.dropped) == (2, 0, 1)
    assert len(server.requests) == 2


@pytest.mark.parametrize(
    "url", ["ftp://h/x", "http://", "http://h:99999/x", "http://h:port/x", "http://h/a b", "javascript:x"]
)
def test_invalid_urls_are_refused(url: str) -> None:
    with pytest.raises(ValueError, match="webhook url"):
        WebhookConfig(url=url)


@pytest.mark.parametrize("timeout_s", [0.0, -1.0, float("inf"), float("nan")])
def test_timeouts_must_be_finite_and_positive(timeout_s: float) -> None:
    with pytest.raises(ValueError, match="timeout_s"):
        WebhookConfig(url="http://127.0.0.1/x", timeout_s=timeout_s)


def test_json_body_reaches_a_good_server(serve) -> None:
    def ok(conn: socket.socket, head: bytes) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")

    server = serve(ok)
    assert post_json(WebhookConfig(url=server.url + "?a=1"), {"x": 1}) is True
    head = server.requests[0]
    assert head.startswith(b"POST /hook?a=1 ") and b"application/json" in head
    assert json.loads(head.split(b"\r\n\r\n", 1)[1]) == {"x": 1}
