"""Sandbox sessions: persistent interpreters in the sandbox's jail, and copy-on-write forks of them.

The parent's side (this package): ``api.py`` (``Session``), ``template.py`` (``SessionTemplate``) and
``forks.py`` (the parent's steps of one fork), ``manager.py`` (a sandbox's sessions: pools, registry,
watchdog, opening), ``driver.py`` (one session's pipes, pid 1, cgroup slot and cell loop), ``judge.py``
(a cell's verdict), ``types.py`` (limits, results, errors). The jail's side is in ``zygote/``:
``session_worker.py`` (a session's pid 1), ``session_kernel.py`` (the interpreter),
``session_fork.py`` (templates and their forks), ``session_userns.py`` (a template's user namespace).

This file imports nothing (the jail-side modules once lived here and the zygote imported it): the
public names (``Session``, ``SessionTemplate``, ``SessionLimits``, ``CellResult``, ...) load on first
use, and ``execrl.sandbox`` exports them.
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
