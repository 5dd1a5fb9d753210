"""One real sandbox per test module for the adversarial suite."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from security_helpers import assert_no_survivors

from execrl.sandbox import Sandbox, SandboxConfig


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with Sandbox(SandboxConfig(workers=2)) as sb:
        yield sb


@pytest.fixture(autouse=True)
def host_untouched(request: pytest.FixtureRequest) -> Iterator[None]:
    """After every hazard: no process of the run survives and the zygote that serves the next run lives."""
    yield
    if "sandbox" in request.fixturenames:
        sandbox: Sandbox = request.getfixturevalue("sandbox")
        assert_no_survivors(sandbox)
        assert sandbox._pool.process.poll() is None
