"""What only the seccomp allow list blocks: system calls no sandboxed runtime needs that the deny list
lets through, each a known attack surface of a shared kernel (threat model: ``execrl.sandbox``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from security_helpers import py

from execrl.sandbox import Sandbox, SandboxConfig, Verdict
from execrl.sandbox.zygote.seccomp import DENIED_SYSCALLS

SYSCALL = "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nlibc.syscall.restype = ctypes.c_long\n"
# name -> (x86_64 number, arguments as Python source) of calls that succeed when nothing refuses them.
RARE_CALLS = {
    "io_setup": (206, "1, ctypes.byref(ctypes.c_ulong(0))"),  # native AIO: long a source of kernel bugs
    "msgget": (68, "0, 0o600"),  # System V message queues: a favourite kernel-heap spraying primitive
    "kcmp": (312, "os.getpid(), os.getpid(), 0, 0, 0"),  # compares kernel objects: pointer-ordering leaks
    "personality": (135, "0xFFFFFFFF"),  # execution domains (READ_IMPLIES_EXEC and friends)
    "vmsplice": (278, "-1, 0, 0, 0"),  # Dirty Pipe (CVE-2022-0847) moved page-cache pages with splice
}
PROGRAM = (
    SYSCALL
    + "import os\n"
    + "".join(
        f"r = libc.syscall({nr}, {args}); print({name!r}, r if r < 0 else 0, ctypes.get_errno() if r < 0 else 0)\n"
        for name, (nr, args) in RARE_CALLS.items()
    )
)


@pytest.fixture(scope="module", params=("allow", "deny"))
def policy_sandbox(request: pytest.FixtureRequest) -> Iterator[tuple[str, Sandbox]]:
    with Sandbox(SandboxConfig(workers=1, seccomp_policy=request.param)) as sb:
        yield request.param, sb


def test_rare_calls_are_not_on_the_deny_list() -> None:
    assert not set(RARE_CALLS) & set(DENIED_SYSCALLS)


def test_only_the_allow_list_refuses_rare_calls(policy_sandbox: tuple[str, Sandbox]) -> None:
    """Under the allow list each call fails with ENOSYS (38) before reaching its kernel code; under the
    deny list alone the same program reaches it: io_setup, msgget, kcmp and personality succeed,
    vmsplice fails on the bad descriptor (EBADF, 9) inside the kernel."""
    policy, sandbox = policy_sandbox
    result = sandbox.run(py(PROGRAM))
    assert result.verdict == Verdict.PASSED, result
    if policy == "allow":
        expected = [f"{name} -1 38" for name in RARE_CALLS]
    else:
        expected = ["io_setup 0 0", "msgget 0 0", "kcmp 0 0", "personality 0 0", "vmsplice -1 9"]
    assert result.stdout.splitlines() == expected
