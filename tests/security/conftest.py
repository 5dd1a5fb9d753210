"""One real sandbox per test module and seccomp policy for the adversarial suite: every hazard test runs
under the allow list (the default) and under the deny list alone (the fallback)."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from security_helpers import assert_no_survivors

from execrl.sandbox import Sandbox, SandboxConfig
from execrl.sandbox.zygote.seccomp import POLICIES


@pytest.fixture(scope="module", params=POLICIES)
def sandbox(request: pytest.FixtureRequest) -> Iterator[Sandbox]:
    with Sandbox(SandboxConfig(workers=2, seccomp_policy=request.param)) as sb:
        yield sb


@pytest.fixture(autouse=True)
def host_untouched(request: pytest.FixtureRequest) -> Iterator[None]:
    """After every hazard: no process of the run survives and the zygote that serves the next run lives."""
    yield
    if "sandbox" in request.fixturenames:
        sandbox: Sandbox = request.getfixturevalue("sandbox")
        assert_no_survivors(sandbox)
        assert sandbox._pool.process.poll() is None


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A host TCP listener that nothing in a sandbox may reach (``accept`` must raise BlockingIOError)."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    server.setblocking(False)
    yield server
    server.close()
