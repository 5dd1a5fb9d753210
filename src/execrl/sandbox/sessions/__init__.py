"""Sandbox sessions: persistent interpreters in the sandbox's jail, and copy-on-write forks of them.

Imported by the zygote (its jail-side modules ``kernel``, ``worker`` and ``forking``), so this file
imports nothing; the public names (``Session``, ``SessionTemplate``, ``SessionLimits``, ``CellResult``,
...) load on first use from ``sessions.api`` and ``sessions.types``, and ``execrl.sandbox`` exports them.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_PUBLIC = {
    "CellResult": "types",
    "SessionClosedError": "types",
    "SessionError": "types",
    "SessionForkError": "types",
    "SessionLimits": "types",
    "Session": "api",
    "SessionTemplate": "template",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
