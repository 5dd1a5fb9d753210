"""Exceptions raised when the sandbox itself cannot do its job.

A candidate program failing is never an exception: it is an ``ExecutionResult`` with a verdict.

    SandboxError
    ├── InvalidRequestError      bad input: unknown language, empty program, invalid limits, bad paths
    ├── UnsupportedHostError     this kernel/host lacks a primitive the chosen backend needs
    └── SandboxFailure           setup or teardown failed at run time (reported as Verdict.SANDBOX_ERROR
                                 inside batch calls, so one broken run never crashes a training step)
"""

from __future__ import annotations


class SandboxError(Exception):
    """Base class of every error the sandbox raises."""


class InvalidRequestError(SandboxError, ValueError):
    """The request cannot be run as given; the message names the field and what to set."""


class UnsupportedHostError(SandboxError):
    """The host lacks something the backend needs (namespaces, cgroups, seccomp, a compiler)."""


class SandboxFailure(SandboxError):
    """The sandbox broke while running a request (not the candidate's fault)."""
