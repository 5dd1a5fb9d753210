"""One real sandbox per test module. Tests of a language whose toolchain is missing fail (the request
raises ``InvalidRequestError`` naming the Debian package): CI installs them with ``scripts/setup.sh --system``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from execrl.sandbox import Sandbox, SandboxConfig


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with Sandbox(SandboxConfig(workers=2)) as sb:
        yield sb
