"""Deliver alarm payloads by HTTP POST, with a timeout and bounded retries.

Delivery is best effort by design: a chat hook being down must never stop a training run, so every
network failure is logged and reported as ``False``; only a malformed configuration raises (at startup).
Uses the standard library (urllib) so that the training process needs no event loop for it.

Limits: synchronous; with the defaults a dead endpoint costs at most
``attempts * timeout_s + backoff`` (about 5 s) per fired alarm, and alarms fire once per episode.
"""

from __future__ import annotations

import json
import logging
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

__all__ = ["WebhookConfig", "post_json"]

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WebhookConfig:
    """Where alarm payloads go. ``retries`` counts extra attempts after the first."""

    url: str
    timeout_s: float = 2.0
    retries: int = 2
    backoff_s: float = 0.25

    def __post_init__(self) -> None:
        parsed = urlparse(self.url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ValueError(f"webhook url must be an http(s) URL like 'https://host/path', got {self.url!r}")
        if self.timeout_s <= 0:
            raise ValueError(f"webhook timeout_s must be > 0, got {self.timeout_s}")
        if self.retries < 0:
            raise ValueError(f"webhook retries must be >= 0, got {self.retries}")


def post_json(config: WebhookConfig, payload: Mapping[str, Any]) -> bool:
    """POST ``payload`` as JSON; True on a 2xx answer, False (logged) when every attempt failed."""
    body = json.dumps(payload, allow_nan=False).encode("utf-8")
    for attempt in range(config.retries + 1):
        request = urllib.request.Request(
            config.url, data=body, method="POST", headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=config.timeout_s) as response:
                if 200 <= response.status < 300:
                    return True
                reason = f"HTTP {response.status}"
        except urllib.error.HTTPError as exc:
            reason = f"HTTP {exc.code}"
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            reason = f"{type(exc).__name__}: {exc}"
        _log.warning(
            "webhook %s attempt %d/%d failed: %s", config.url, attempt + 1, config.retries + 1, reason
        )
        if attempt < config.retries:
            time.sleep(config.backoff_s * (2**attempt))
    _log.error(
        "webhook %s: giving up after %d attempts; the alarm is still in alarms.jsonl", config.url, attempt + 1
    )
    return False
