"""Python runtimes: which third-party packages a sandboxed Python program may import.

``python`` (the default) is the host interpreter's standard library and nothing else: the fast path,
unchanged. ``python-data`` adds the packages pinned in ``requirements/python-data.txt`` (numpy, pandas,
scipy, scikit-learn and their dependencies), which ``scripts/setup.sh`` installs with
``pip --target`` into a directory of their own, ``$EXECRL_RUNTIMES_DIR/python-data/py3.X`` (default
``/opt/execrl/runtimes``), for the same interpreter the sandbox runs; never execrl's own venv, whose
site-packages the jail never shows.

A runtime other than ``python`` runs in a zygote of its own (``pool.WorkerPool``): the runtime's
directory is bound read-only into that zygote's jail and put on its ``sys.path``, and the runtime's
``preload`` modules are imported there once, before any fork, so a program's ``import numpy, pandas``
is a dictionary look-up instead of ~0.45 s of imports per execution (measured in the README). Limits:
``.pth`` files of the installed packages are not processed (``site`` is not run); the BLAS and OpenMP
thread pools are pinned to one thread (``jail.ENV``), because the zygote must stay single-threaded to
fork and because each thread counts against ``Limits.max_processes``.
"""

from __future__ import annotations

import hashlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from execrl.registry import Registry
from execrl.sandbox.errors import InvalidRequestError
from execrl.sandbox.langs.registry import get_language

__all__ = [
    "DEFAULT_RUNTIME",
    "Runtime",
    "get_runtime",
    "list_runtimes",
    "register_runtime",
    "resolve_runtime",
]

DEFAULT_RUNTIME = "python"
RUNTIMES_DIR_ENV = "EXECRL_RUNTIMES_DIR"
DEFAULT_RUNTIMES_DIR = "/opt/execrl/runtimes"
MARKER = ".execrl-runtime"  # written by setup.sh after a complete install: the requirements' sha256
_REPO_ROOT = Path(__file__).resolve().parents[4]


@dataclass(frozen=True)
class Runtime:
    """A Python environment for sandboxed programs. ``requirements``: the pins file, relative to the
    repository root (``None`` for the standard library); ``preload``: modules imported in its zygote."""

    name: str
    requirements: str | None = None
    preload: tuple[str, ...] = ()
    setup_command: str = ""

    @property
    def packages_dir(self) -> str | None:
        """Where the packages live for this interpreter's version (``None``: standard library only)."""
        if self.requirements is None:
            return None
        root = os.environ.get(RUNTIMES_DIR_ENV, DEFAULT_RUNTIMES_DIR)
        return f"{root}/{self.name}/py{sys.version_info[0]}.{sys.version_info[1]}"

    def problem(self) -> str | None:
        """Why this runtime cannot run here (not installed, or installed from other pins), else None."""
        directory = self.packages_dir
        if directory is None:
            return None
        marker = Path(directory) / MARKER
        if not marker.is_file():
            return f"runtime {self.name!r} is not installed at {directory}; run `{self.setup_command}`"
        pins = _REPO_ROOT / str(self.requirements)
        if pins.is_file() and marker.read_text().strip() != hashlib.sha256(pins.read_bytes()).hexdigest():
            return (
                f"runtime {self.name!r} at {directory} was installed from other pins than "
                f"{self.requirements}; run `{self.setup_command}` again"
            )
        return None


_RUNTIMES: Registry[Runtime] = Registry("runtime", plural="runtimes", unknown_error=InvalidRequestError)


def register_runtime(runtime: Runtime) -> Runtime:
    """Add ``runtime`` under its name; a name already registered raises ``ValueError``."""
    return _RUNTIMES.add(runtime.name, runtime)


def list_runtimes() -> list[str]:
    return _RUNTIMES.names()


def get_runtime(name: str) -> Runtime:
    return _RUNTIMES.get(name)


def resolve_runtime(language: str, name: str | None) -> Runtime:
    """The runtime a request runs in: ``name`` (only for Python) or the default; raises
    ``InvalidRequestError`` naming the problem and, for a missing runtime, the command that installs it."""
    if name is None:
        return _RUNTIMES.get(DEFAULT_RUNTIME)
    if get_language(language).mode != "python":
        raise InvalidRequestError(
            f"runtime={name!r} applies to Python programs only (language is {language!r}); leave it unset"
        )
    runtime = get_runtime(name)
    problem = runtime.problem()
    if problem is not None:
        raise InvalidRequestError(problem)
    return runtime


register_runtime(Runtime(DEFAULT_RUNTIME))
register_runtime(
    Runtime(
        "python-data",
        requirements="requirements/python-data.txt",
        preload=("numpy", "pandas"),
        setup_command="scripts/setup.sh --python-data",
    )
)
