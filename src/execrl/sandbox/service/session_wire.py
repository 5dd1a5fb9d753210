"""The wire under ``client_sessions.py``: one HTTP call to a replica's session endpoints, the retry loop
over ``ClientConfig``'s attempts and backoff, and strict readers of what a replica answers.

Why its own HTTP (stdlib ``http.client``, one connection per call) and not ``client.py``'s aiohttp: the
tool environment sends one cell at a time from synchronous code; an aiohttp session per cell costs an event
loop each and cannot run inside a running one. Connecting is a separate step, so a call that failed there
is known not to have been sent (the one failure that is always safe to retry). ``request_timeout_s``
bounds each socket operation (connect, send, each read), not the call as a whole.

The readers are strict because a replica's answer is untrusted output: ``cell_from_dict`` accepts exactly
``CellResult.to_dict()``'s fields, each of its type (``ValueError`` otherwise); the caller turns that into
a ``sandbox_error`` cell.
"""

from __future__ import annotations

import http.client
import json
import time
import types
import typing
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, fields
from enum import Enum
from typing import TYPE_CHECKING, Any

from execrl.sandbox.sessions.types import CellResult, SessionStats
from execrl.sandbox.types import ellipsize

if TYPE_CHECKING:
    from execrl.sandbox.service.client import ClientConfig

__all__ = ["Answer", "GaveUp", "MaybeRan", "Wire", "call", "cell_from_dict", "short", "stats_from_dict"]

MAX_REASON_CHARS = 300


# -- strict reading of what a replica answers ------------------------------------------------------------
def _value(value: Any, hint: Any) -> Any:
    """``value`` as JSON gives it, checked against a field's type hint (and converted: enums, tuples)."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        for option in typing.get_args(hint):
            try:
                return _value(value, option)
            except ValueError:
                continue
        raise ValueError(f"{value!r} is not {hint}")
    if typing.get_origin(hint) is tuple:
        (item, _) = typing.get_args(hint)
        if not isinstance(value, list):
            raise ValueError(f"{value!r} is not a list")
        return tuple(_value(v, item) for v in value)
    if isinstance(hint, type) and issubclass(hint, Enum):
        return hint(value)  # ValueError when not a member
    if hint is type(None):
        if value is not None:
            raise ValueError(f"{value!r} is not null")
        return None
    if hint is float and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if type(value) is not hint:  # bool is not an int, an int is not a str
        raise ValueError(f"{value!r} is not {hint.__name__}")
    return value


def _strict(cls: type[Any], data: Any) -> Any:
    """``cls(**data)`` when ``data`` has exactly ``cls``'s fields, each of its type; else ``ValueError``."""
    if not isinstance(data, dict):
        raise ValueError(f"expected a JSON object, got {type(data).__name__}")
    names = [f.name for f in fields(cls)]
    if set(data) != set(names):
        raise ValueError(f"fields {sorted(set(data) ^ set(names))} missing or unexpected")
    hints = typing.get_type_hints(cls)
    return cls(**{name: _value(data[name], hints[name]) for name in names})


def cell_from_dict(data: Any) -> CellResult:
    """Inverse of ``CellResult.to_dict``, strict (``ValueError`` on any other shape)."""
    result: CellResult = _strict(CellResult, data)
    return result


def stats_from_dict(data: Any) -> SessionStats:
    """Inverse of ``SessionStats.to_dict``, strict."""
    stats: SessionStats = _strict(SessionStats, data)
    return stats


# -- one HTTP call, and the retry loop -------------------------------------------------------------------
class NotSent(Exception):
    """Connecting failed: the request never left this process (safe to retry)."""


class MaybeRan(Exception):
    """Sent, then failed (timeout, dropped connection): the call may have done its work."""


@dataclass(frozen=True)
class Answer:
    status: int
    data: Any  # the JSON body, or None when it is not JSON
    text: str  # the body, shortened, for messages

    def error(self) -> str:
        shown = self.data.get("error") if isinstance(self.data, dict) else None
        return f"HTTP {self.status}: {short(shown) if isinstance(shown, str) else self.text}"


class GaveUp(Exception):
    """Every attempt failed to connect or got a retried status (``last``: the last answer, if any)."""

    def __init__(self, reason: str, last: Answer | None) -> None:
        super().__init__(reason)
        self.last = last


def short(text: str) -> str:
    return ellipsize(" ".join(text.split()), MAX_REASON_CHARS)


def call(url: str, method: str, path: str, body: Any, timeout_s: float) -> Answer:
    """One HTTP call: ``NotSent`` when connecting failed, ``MaybeRan`` when it failed after that."""
    parts = urllib.parse.urlsplit(url)
    kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    connection = kind(parts.hostname or "", parts.port, timeout=timeout_s)
    try:
        try:
            connection.connect()
        except OSError as exc:
            raise NotSent(f"{url}: cannot connect: {exc}") from None
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"} if data is not None else {}
        try:
            connection.request(method, parts.path + path, body=data, headers=headers)
            response = connection.getresponse()
            text = response.read().decode("utf-8", "replace")
        except (OSError, http.client.HTTPException) as exc:
            raise MaybeRan(f"{url}: {type(exc).__name__}: {exc} (not retried: it may have run)") from None
    finally:
        connection.close()
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    return Answer(response.status, parsed, short(text))


class Wire:
    """The session calls of one ``ServiceClient``: the retry loop and its counters."""

    def __init__(self, config: ClientConfig) -> None:
        self.config = config
        self.counts = {"session_calls": 0, "session_retries": 0, "session_errors": 0}

    def request(
        self, method: str, path: str, body: Any = None, *, to: Callable[[str | None], str],
        retry: frozenset[int] = frozenset(),
    ) -> tuple[str, Answer]:  # fmt: skip
        """``(replica, answer)``; ``to(last_failed)`` names each attempt's replica. A failure to connect,
        or a status in ``retry``, is tried again up to ``max_attempts`` with backoff; ``GaveUp`` after the
        last, ``MaybeRan`` at once."""
        failed: str | None = None
        reasons: list[str] = []
        last: Answer | None = None
        for attempt in range(1, self.config.max_attempts + 1):
            url = to(failed)
            self.counts["session_calls"] += 1
            self.counts["session_retries"] += attempt > 1
            try:
                answer = call(url, method, path, body, self.config.request_timeout_s)
            except NotSent as exc:
                reasons.append(str(exc))
            else:
                if answer.status not in retry:
                    return url, answer
                last = answer
                reasons.append(f"{url}: {answer.error()}")
            failed = url
            if attempt < self.config.max_attempts:
                time.sleep(self.config.backoff(attempt))
        raise GaveUp(f"gave up after {self.config.max_attempts} attempts: {'; '.join(reasons[-2:])}", last)

    def error(self) -> None:
        """One call answered as a sandbox error because of the service (``ClientStats.session_errors``)."""
        self.counts["session_errors"] += 1
