"""The ``domain -> verifier`` registry: how a task's ``domain`` finds the code that scores it.

Routing is by a registry key, never by ``if data_source == ...`` ladders (verl's ``default_compute_score``
is the counter-example). Users add a domain with the decorator::

    @register_verifier("sql")
    def score_sql(task, completion, config) -> Score: ...

or from a config/CLI string ``register_verifier("sql", "my_pkg.rewards:score_sql")``. A function is a pure
verifier; an object (or a class, instantiated without arguments) with ``prepare``/``finish`` methods is an
execution verifier (see ``execrl.rewards.types.Verifier``). Registering a domain twice raises: silently
replacing the code grader of a run is how rewards change without anyone noticing.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, TypeVar, overload

from execrl.registry import Registry
from execrl.rewards.types import PureVerifier, Verifier

T = TypeVar("T")


class UnknownVerifierError(KeyError):
    """No verifier is registered for a domain; the message lists the known ones."""

    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0])


_REGISTRY: Registry[Verifier] = Registry(
    "verifier domain",
    plural="domains",
    unknown_error=UnknownVerifierError,
    remove_hint="unregister_verifier",
    unknown_hint=". Register one with @register_verifier(domain) or register_verifier(domain, 'module:function')",
)


class VerifierImportError(ImportError):
    """A ``"module:function"`` verifier path cannot be imported or does not name a verifier."""


def as_verifier(obj: Any) -> Verifier:
    """Normalise a registrable object: a ``Verifier`` instance, a class of one, or a pure function."""
    if isinstance(obj, type):
        if not (callable(getattr(obj, "prepare", None)) and callable(getattr(obj, "finish", None))):
            raise TypeError(f"class {obj.__qualname__} has no prepare/finish methods; it is not a Verifier")
        obj = obj()
    if isinstance(obj, Verifier):
        return obj
    if callable(obj):
        return PureVerifier(obj)
    raise TypeError(
        f"{obj!r} is not a verifier: pass a function (task, completion, config) -> Score or an object "
        "with prepare/finish methods"
    )


def resolve_verifier(path: str) -> Verifier:
    """Import ``"package.module:attribute"`` and return it as a ``Verifier``."""
    module_name, sep, attr = path.partition(":")
    if not sep or not module_name or not attr:
        raise VerifierImportError(f"verifier path {path!r} must look like 'package.module:function'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise VerifierImportError(
            f"cannot import module {module_name!r} of verifier {path!r}: {exc}"
        ) from exc
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise VerifierImportError(f"module {module_name!r} has no attribute {attr!r} (verifier {path!r})")
        obj = getattr(obj, part)
    if not callable(obj) and not isinstance(obj, Verifier):
        raise VerifierImportError(f"{path!r} is a {type(obj).__name__}, not a callable verifier")
    try:
        return as_verifier(obj)
    except TypeError as exc:
        raise VerifierImportError(f"{path!r}: {exc}") from exc


@overload
def register_verifier(domain: str) -> Callable[[T], T]: ...


@overload
def register_verifier(domain: str, verifier: T) -> T: ...


def register_verifier(domain: str, verifier: Any = None) -> Any:
    """Register a verifier for ``domain``; use as ``@register_verifier("x")`` or call with the verifier
    (an object, a function or a ``"module:function"`` string). Returns the decorated object unchanged."""
    decorate = _REGISTRY.register(domain)  # checks the name now, for the decorator form too

    def add(obj: T) -> T:
        decorate(resolve_verifier(obj) if isinstance(obj, str) else as_verifier(obj))
        return obj

    if verifier is None:
        return add
    return add(verifier)


def unregister_verifier(domain: str) -> None:
    """Remove a domain (to swap a built-in on purpose, or in tests)."""
    _REGISTRY.remove(domain)


def get_verifier(domain: str) -> Verifier:
    """The verifier of ``domain``; ``UnknownVerifierError`` listing the known domains otherwise."""
    return _REGISTRY.get(domain)


def list_verifiers() -> dict[str, Verifier]:
    """Registered domains (a copy), sorted by name."""
    return _REGISTRY.items()


def describe_verifier(verifier: Verifier) -> str:
    """The first line of the verifier's docstring (what ``execrl rewards ls`` prints)."""
    doc = getattr(verifier, "__doc__", None) or type(verifier).__doc__ or ""
    first = doc.strip().splitlines()[0] if doc.strip() else "(no docstring)"
    return first
