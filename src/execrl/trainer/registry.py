"""A tiny name -> function registry for the places users extend (advantage estimators, policy losses).

Why a registry and not a flag: a new estimator or loss is one decorated function in the user's own file, not an
``if name == ...`` ladder threaded through the trainer (verl's ``register_adv_est`` is the model). Registering a
name twice raises, so a typo in a plugin cannot silently replace a built-in; looking up an unknown name lists
the known ones. No torch here, so configs can validate names cheaply.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

F = TypeVar("F", bound=Callable[..., object])


class Registry(Generic[F]):
    """Maps names to functions of one kind (``kind`` appears in error messages, e.g. "advantage estimator")."""

    def __init__(self, kind: str) -> None:
        self._kind = kind
        self._items: dict[str, F] = {}

    def register(self, name: str) -> Callable[[F], F]:
        """Decorator: ``@REGISTRY.register("my_name")``. Raises ``ValueError`` if the name is taken."""
        if not name or not isinstance(name, str):
            raise ValueError(f"{self._kind} name must be a non-empty string, got {name!r}")

        def decorate(fn: F) -> F:
            if name in self._items:
                raise ValueError(
                    f"{self._kind} {name!r} is already registered (by {self._items[name].__module__}."
                    f"{getattr(self._items[name], '__qualname__', '?')}); pick another name"
                )
            self._items[name] = fn
            return fn

        return decorate

    def get(self, name: str) -> F:
        """The function registered as ``name``; ``KeyError`` listing the known names otherwise."""
        try:
            return self._items[name]
        except KeyError:
            raise KeyError(
                f"unknown {self._kind} {name!r}; known: {', '.join(sorted(self._items))}"
            ) from None

    def names(self) -> list[str]:
        """Registered names, sorted."""
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items
