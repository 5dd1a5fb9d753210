"""One real sandbox per test module (starting one costs ~0.1 s; runs cost milliseconds)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from execrl.sandbox import Sandbox, SandboxConfig


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with Sandbox(SandboxConfig(workers=2)) as sb:
        yield sb
