"""Isolated, high-throughput code execution (no torch here).

The public API (filled in by the sandbox implementation):

    from execrl.sandbox import Sandbox, SandboxConfig, ExecutionRequest, CodeTest, Verdict
    with Sandbox(SandboxConfig()) as sandbox:
        result = sandbox.run(ExecutionRequest(language="python", program="print(1)"))
"""

from execrl.sandbox.errors import InvalidRequestError, SandboxError, SandboxFailure, UnsupportedHostError
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
    "Limits",
    "SandboxError",
    "SandboxFailure",
    "TestCase",
    "TestResult",
    "UnsupportedHostError",
    "Verdict",
]
