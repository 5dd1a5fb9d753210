"""One name -> item registry for every place users extend execrl.

Used by reward verifiers (``execrl.rewards``), advantage estimators and policy losses (``execrl.trainer``),
rollout engines (``execrl.rollout``), sandbox backends, languages and Python runtimes (``execrl.sandbox``)
and task suites (``execrl.tasks``). Why a registry and not a flag: a new estimator, verifier or suite is one registered
object in the user's own file, not an ``if name == ...`` ladder threaded through the code (verl's
``register_adv_est`` is the model). Registering a name twice raises, so a typo in a plugin cannot silently
replace a built-in (``remove`` first to replace one on purpose); looking up an unknown name lists the known
ones. Each registry raises its package's own error classes, so callers keep catching what they caught.

No third-party imports here: sandbox, tasks and rewards code import this module, and must not pull torch.
Not thread-safe for registration (register at import time, as the built-ins do).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["Registry"]

T = TypeVar("T")


class Registry(Generic[T]):
    """Maps names to items of one kind.

    ``kind`` names one item in messages ("policy loss"); ``plural`` names the list of known ones
    ("known backends: ..."; ``None`` prints "known: ..."). ``duplicate_error`` is raised for a taken or
    empty name, ``unknown_error`` for a name not registered; ``remove_hint`` names the function that
    removes an entry, quoted in the duplicate message; ``unknown_hint`` is appended to the unknown message.
    """

    def __init__(
        self,
        kind: str,
        *,
        plural: str | None = None,
        duplicate_error: type[Exception] = ValueError,
        unknown_error: type[Exception] = KeyError,
        remove_hint: str = "",
        unknown_hint: str = "",
    ) -> None:
        self._kind, self._plural = kind, plural
        self._duplicate_error, self._unknown_error = duplicate_error, unknown_error
        self._remove_hint, self._unknown_hint = remove_hint, unknown_hint
        self._items: dict[str, T] = {}

    def add(self, name: str, item: T) -> T:
        """Register ``item`` as ``name`` and return it; a taken or empty name raises ``duplicate_error``."""
        self._check_name(name)
        if name in self._items:
            raise self._duplicate_error(self._duplicate_message(name))
        self._items[name] = item
        return item

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator: ``@REGISTRY.register("my_name")``; the decorated object is returned unchanged."""
        self._check_name(name)  # now, not only when the decorator is applied

        def decorate(item: T) -> T:
            return self.add(name, item)

        return decorate

    def remove(self, name: str) -> None:
        """Remove ``name`` (to replace a built-in on purpose, or in tests); unknown names raise."""
        self.get(name)
        del self._items[name]

    def get(self, name: str) -> T:
        """The item registered as ``name``; ``unknown_error`` listing the known names otherwise."""
        try:
            return self._items[name]
        except KeyError:
            raise self._unknown_error(self.unknown_message(name)) from None

    def unknown_message(self, name: str) -> str:
        """What ``get`` says about a name that is not registered (also for callers' own lookups)."""
        known = ", ".join(sorted(self._items)) or "(none)"
        label = f"known {self._plural}" if self._plural else "known"
        return f"unknown {self._kind} {name!r}; {label}: {known}{self._unknown_hint}"

    def names(self) -> list[str]:
        """Registered names, sorted."""
        return sorted(self._items)

    def items(self) -> dict[str, T]:
        """A sorted copy of the registry."""
        return dict(sorted(self._items.items()))

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def _check_name(self, name: object) -> None:
        if not isinstance(name, str) or not name.strip():
            raise self._duplicate_error(f"{self._kind} name must be a non-empty string, got {name!r}")

    def _duplicate_message(self, name: str) -> str:
        taken = self._items[name]
        qualname = getattr(taken, "__qualname__", None)  # functions and classes say who registered them
        by = f" (by {getattr(taken, '__module__', '?')}.{qualname})" if qualname else ""
        also = f" or call {self._remove_hint} first" if self._remove_hint else ""
        return f"{self._kind} {name!r} is already registered{by}; pick another name{also}"
