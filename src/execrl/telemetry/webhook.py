"""Deliver alarm payloads by HTTP POST: an overall deadline per attempt, no redirects, off the loop's thread.

Delivery is best effort by design: a chat hook being down must never stop or slow a training run.
``WebhookSender.submit`` only puts the payload on a bounded queue; one daemon thread POSTs it. A full
queue drops the payload (counted in ``dropped`` and logged: the alarm is still in alarms.jsonl), and
``close`` flushes what is queued within a bounded time. ``post_json`` is the synchronous attempt loop the
thread runs; it returns ``False`` (logged) when every attempt failed.

Why not ``urllib.request.urlopen``: its timeout bounds each socket read, not the request, so a server
that trickles its headers one byte a second held the training loop (45 s seen); and it follows
redirects, turning the POST into a body-less GET to wherever the ``Location`` points, which then counted
as delivered. Here each attempt runs ``http.client`` under a watchdog that shuts the socket down when
``timeout_s`` has passed since the attempt began, and any 3xx is a failed delivery that names its
``Location``. Uses the standard library only, so the training process needs no event loop for it.

Limits: the DNS lookup inside ``connect`` is not interruptible; it is bounded by the resolver's own
timeout, and it happens on the sender thread, not the training loop's.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import logging
import math
import queue
import socket
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from execrl.retry import backoff_delay

__all__ = ["WebhookConfig", "WebhookSender", "post_json"]

_log = logging.getLogger(__name__)
_STOP = object()


@dataclass(frozen=True)
class WebhookConfig:
    """Where alarm payloads go. ``timeout_s`` bounds one whole attempt (connect, send, read the answer);
    ``retries`` counts extra attempts after the first; ``queue_size`` bounds undelivered payloads."""

    url: str
    timeout_s: float = 2.0
    retries: int = 2
    backoff_s: float = 0.25
    queue_size: int = 64

    def __post_init__(self) -> None:
        try:
            parsed = urlsplit(self.url)
            port_ok = parsed.port is None or 0 < parsed.port < 65536
        except ValueError:  # a port that is not a number
            parsed, port_ok = urlsplit(""), False
        if parsed.scheme not in ("http", "https") or not parsed.hostname or not port_ok:
            raise ValueError(f"webhook url must be an http(s) URL like 'https://host/path', got {self.url!r}")
        if any(c.isspace() or ord(c) < 0x20 for c in self.url):
            raise ValueError(f"webhook url must not contain spaces or control characters, got {self.url!r}")
        if not (math.isfinite(self.timeout_s) and 0 < self.timeout_s <= 300):
            raise ValueError(f"webhook timeout_s must be in (0, 300] seconds, got {self.timeout_s}")
        if not (math.isfinite(self.backoff_s) and 0 <= self.backoff_s <= 60):
            raise ValueError(f"webhook backoff_s must be in [0, 60] seconds, got {self.backoff_s}")
        if not 0 <= self.retries <= 10:
            raise ValueError(f"webhook retries must be in 0..10, got {self.retries}")
        if self.queue_size < 1:
            raise ValueError(f"webhook queue_size must be >= 1, got {self.queue_size}")


def _connection(url: str, timeout_s: float) -> tuple[http.client.HTTPConnection, str]:
    parts = urlsplit(url)
    cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return cls(parts.hostname or "", parts.port, timeout=timeout_s), target


def _attempt(config: WebhookConfig, body: bytes) -> str | None:
    """One POST within ``timeout_s`` overall; None when delivered (2xx), else why not."""
    conn, target = _connection(config.url, config.timeout_s)
    expired = threading.Event()

    def watchdog() -> None:
        expired.set()
        sock = conn.sock
        if sock is not None:
            with contextlib.suppress(OSError):  # already closed: nothing left to interrupt
                sock.shutdown(socket.SHUT_RDWR)  # wakes a blocked read at once

    timer = threading.Timer(config.timeout_s, watchdog)
    timer.daemon = True
    timer.start()
    try:
        headers = {"Content-Type": "application/json", "Content-Length": str(len(body))}
        conn.request("POST", target, body=body, headers=headers)
        if expired.is_set():
            raise TimeoutError
        response = conn.getresponse()
        status, location = response.status, response.getheader("Location")
        response.read(1 << 16)  # a short answer body; the connection is closed anyway
    except (OSError, http.client.HTTPException) as exc:
        if expired.is_set():
            return f"no complete answer within {config.timeout_s:g} s"
        return f"{type(exc).__name__}: {exc}"
    finally:
        timer.cancel()
        conn.close()
    if 200 <= status < 300:
        return None
    if 300 <= status < 400:
        return f"HTTP {status} redirect to {str(location)[:200]!r} (redirects are not followed)"
    return f"HTTP {status}"


def post_json(config: WebhookConfig, payload: Mapping[str, Any]) -> bool:
    """POST ``payload`` as JSON; True on a 2xx answer, False (logged) when every attempt failed.

    Blocks for at most ``(retries + 1) * timeout_s`` plus the backoff; call it from ``WebhookSender``'s
    thread, not from a training loop.
    """
    body = json.dumps(payload, allow_nan=False).encode("utf-8")
    attempts = config.retries + 1
    for attempt in range(attempts):
        reason = _attempt(config, body)
        if reason is None:
            return True
        _log.warning("webhook %s attempt %d/%d failed: %s", config.url, attempt + 1, attempts, reason)
        if attempt < config.retries:
            time.sleep(backoff_delay(attempt + 1, base_s=config.backoff_s))
    _log.error(
        "webhook %s: giving up after %d attempts; the alarm is still in alarms.jsonl", config.url, attempts
    )
    return False


class WebhookSender:
    """A bounded queue and one daemon thread that delivers payloads with ``post_json``.

    ``submit`` never blocks; counters say what happened: ``delivered``, ``failed`` (every attempt
    failed), ``dropped`` (the queue was full, or the sender was closed).
    """

    def __init__(self, config: WebhookConfig) -> None:
        self.config = config
        self.delivered = self.failed = self.dropped = 0
        self._queue: queue.Queue[object] = queue.Queue(maxsize=config.queue_size)
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="execrl-webhook", daemon=True)
        self._thread.start()

    def submit(self, payload: Mapping[str, Any]) -> bool:
        """Queue ``payload`` for delivery; False (counted, logged) when it had to be dropped."""
        if not self._closed:
            try:
                self._queue.put_nowait(dict(payload))
                return True
            except queue.Full:
                pass
        self.dropped += 1
        why = "the sender is closed" if self._closed else f"{self.config.queue_size} payloads are waiting"
        _log.error("webhook %s: dropped an alarm payload (%s); it is in alarms.jsonl", self.config.url, why)
        return False

    def _run(self) -> None:
        while (item := self._queue.get()) is not _STOP:
            assert isinstance(item, dict)
            if post_json(self.config, item):
                self.delivered += 1
            else:
                self.failed += 1

    def close(self, timeout_s: float | None = None) -> None:
        """Deliver what is queued, waiting at most ``timeout_s`` (default: one full retry cycle per
        queued payload, capped at 60 s); what is still queued then is counted as dropped."""
        if self._closed:
            return
        self._closed = True
        pending = self._queue.qsize()
        per_item = (
            self.config.retries + 1
        ) * self.config.timeout_s + self.config.backoff_s * 2**self.config.retries
        budget = min(60.0, per_item * (pending + 1)) if timeout_s is None else timeout_s
        started = time.monotonic()
        try:
            self._queue.put(_STOP, timeout=budget)
            stop_queued = 1
        except queue.Full:
            stop_queued = 0
        self._thread.join(timeout=max(0.0, budget - (time.monotonic() - started)))
        if self._thread.is_alive():
            left = max(0, self._queue.qsize() - stop_queued)
            self.dropped += left
            _log.error("webhook %s: %d alarm payload(s) not delivered by close", self.config.url, left)
