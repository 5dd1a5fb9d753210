"""Isolated, high-throughput code execution (no torch here).

    from execrl.sandbox import Sandbox, SandboxConfig, ExecutionRequest, CallTest
    with Sandbox(SandboxConfig(workers=2)) as sandbox:
        result = sandbox.run(ExecutionRequest(language="python", program="print(1)"))

Threat model. The strict ``namespace`` backend runs untrusted programs (LLM samples) as an unprivileged,
capability-less uid in fresh pid/net/mount/ipc/uts/cgroup namespaces with a private tmpfs root, a
read-only view of the system (``/usr``, the Python prefix), no network, cgroup memory/pids limits,
rlimits, a seccomp filter and a wall-clock watchdog outside the sandbox; results travel over a pipe the
program cannot reach, and expected values never enter the sandbox (``harness.py``). It is meant to stop
accidents and ordinary malice: fork/memory/disk/output bombs, reading host files and environment,
network access, signalling the host, leftover processes, and reward hacking by early exit or printed
results. Limits, stated plainly: the kernel is shared, so it is not a boundary against kernel exploits
(use a VM tier for hostile multi-tenant use); the filter is a deny list, not an allow list; /proc of the
sandbox's own pid namespace is visible; assert-style ``CodeTest``s run in the candidate's process and
can be forged by code written against this harness (use ``CallTest``/``IOTest`` for adversarial RL);
CPU time of a busy host still affects wall-clock limits. The ``unisolated`` backend is NOT a security
boundary.
"""

from execrl.sandbox.api import Sandbox, SandboxConfig, default_sandbox
from execrl.sandbox.backends import list_backends, register_backend
from execrl.sandbox.errors import InvalidRequestError, SandboxError, SandboxFailure, UnsupportedHostError
from execrl.sandbox.languages import Language, list_languages, register_language
from execrl.sandbox.types import (
    CallTest,
    CodeTest,
    ExecutionRequest,
    ExecutionResult,
    IOTest,
    Limits,
    TestCase,
    TestResult,
    Verdict,
)

__all__ = [
    "CallTest",
    "CodeTest",
    "ExecutionRequest",
    "ExecutionResult",
    "IOTest",
    "InvalidRequestError",
    "Language",
    "Limits",
    "Sandbox",
    "SandboxConfig",
    "SandboxError",
    "SandboxFailure",
    "TestCase",
    "TestResult",
    "UnsupportedHostError",
    "Verdict",
    "default_sandbox",
    "list_backends",
    "list_languages",
    "register_backend",
    "register_language",
]
