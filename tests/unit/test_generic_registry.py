"""``execrl.registry.Registry``: the one name registry behind verifiers, losses, engines, backends, suites."""

from __future__ import annotations

import subprocess
import sys

import pytest

from execrl.registry import Registry


class WidgetError(Exception):
    pass


def test_duplicate_empty_and_unknown_names() -> None:
    registry: Registry[object] = Registry("widget")
    registry.register("a")(len)
    with pytest.raises(
        ValueError, match=r"widget 'a' is already registered \(by builtins.len\); pick another"
    ):
        registry.register("a")(len)
    with pytest.raises(KeyError, match="unknown widget 'b'; known: a"):
        registry.get("b")
    with pytest.raises(ValueError, match="non-empty string"):
        registry.register(" ")
    assert registry.get("a") is len and "a" in registry and registry.names() == ["a"]


def test_package_errors_plural_and_hints() -> None:
    registry: Registry[int] = Registry(
        "gadget",
        plural="gadgets",
        duplicate_error=WidgetError,
        unknown_error=WidgetError,
        remove_hint="unregister_gadget",
        unknown_hint=". Add one with register_gadget",
    )
    assert registry.add("y", 2) == 2 and registry.add("x", 1) == 1
    with pytest.raises(
        WidgetError,
        match="^gadget 'x' is already registered; pick another name or call unregister_gadget first$",
    ):
        registry.add("x", 3)
    with pytest.raises(
        WidgetError, match=r"^unknown gadget 'z'; known gadgets: x, y\. Add one with register_gadget$"
    ):
        registry.get("z")
    assert registry.items() == {"x": 1, "y": 2} and list(registry.items()) == ["x", "y"]


def test_remove_then_register_again() -> None:
    """Replacing a built-in on purpose is remove + add; removing an unknown name raises."""
    registry: Registry[int] = Registry("thing")
    registry.add("a", 1)
    registry.remove("a")
    assert "a" not in registry and registry.add("a", 2) == 2
    with pytest.raises(KeyError, match="unknown thing 'b'; known: a"):
        registry.remove("b")


def test_import_pulls_nothing_heavy() -> None:
    """sandbox, tasks and rewards import this module: it must not bring torch (house rule)."""
    code = "import sys, execrl.registry; print(sorted(m for m in ('torch', 'pydantic', 'transformers') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
