"""One real sandbox per test module; sessions open in pools of their own (``sandbox/sessions/``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from execrl.sandbox import Sandbox, SandboxConfig


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with Sandbox(SandboxConfig(workers=1, max_sessions=16)) as sb:
        yield sb
