"""Backend registry: how strictly a sandbox isolates (``SandboxConfig.backend``).

* ``namespace`` (default, strict): fresh pid/net/mount/ipc/uts/cgroup namespaces, a private tmpfs root,
  cgroup memory/pids limits, an unprivileged per-slot uid, no capabilities, seccomp. Needs root, cgroups
  and Linux namespaces.
* ``unisolated``: fork + rlimits + a private temp directory (+ cgroup limits when running as root on
  a host with cgroups; otherwise ``memory_mb`` is not enforced and only RLIMIT_NPROC bounds processes).
  It is **NOT a security boundary**: the program runs as the parent's user, can read and write anything
  the parent can, reach the network and leave processes behind. Use it only for trusted code on hosts
  without namespaces.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from execrl.registry import Registry
from execrl.sandbox.errors import InvalidRequestError, UnsupportedHostError
from execrl.sandbox.zygote import linux


@dataclass(frozen=True)
class Backend:
    name: str
    isolate: bool
    requires_cgroups: bool
    check_host: Callable[[], None]
    description: str


def _check_namespaces() -> None:
    if not linux.IS_X86_64:
        raise UnsupportedHostError("the namespace backend's seccomp filter is written for x86_64 only")
    if not linux.supports_namespaces():
        raise UnsupportedHostError(
            "the namespace backend needs root and pid/net/mount/ipc/uts namespaces; "
            "set SandboxConfig(backend='unisolated') on this host (NOT a security boundary)"
        )


def _check_nothing() -> None:
    return None


_BACKENDS: Registry[Backend] = Registry(
    "sandbox backend", plural="backends", unknown_error=InvalidRequestError
)


def register_backend(backend: Backend) -> Backend:
    """Add a backend under ``backend.name``; a name already registered raises ``ValueError``."""
    return _BACKENDS.add(backend.name, backend)


def get_backend(name: str) -> Backend:
    """The backend called ``name``; an unknown name raises ``InvalidRequestError`` listing the known ones."""
    return _BACKENDS.get(name)


def list_backends() -> list[str]:
    return _BACKENDS.names()


register_backend(
    Backend("namespace", True, True, _check_namespaces, "namespaces + cgroups + seccomp (strict)")
)
register_backend(
    Backend("unisolated", False, False, _check_nothing, "fork + rlimits only: NOT a security boundary")
)
