"""Isolated, high-throughput code execution (no torch here).

    from execrl.sandbox import Sandbox, SandboxConfig, ExecutionRequest, CallTest
    with Sandbox(SandboxConfig(workers=2)) as sandbox:
        result = sandbox.run(ExecutionRequest(language="python", program="print(1)"))

Threat model. The strict ``namespace`` backend runs untrusted programs (LLM samples) as an unprivileged,
capability-less uid in fresh pid/mount/ipc/uts/cgroup namespaces plus an empty network namespace of its
own slot, with a private tmpfs root, a read-only view of the system (``/usr``, the Python prefix), no
network, cgroup memory/pids limits, rlimits, a seccomp filter and a wall-clock watchdog outside the
sandbox; expected values never enter the sandbox and the parent judges returned values and outputs
(``harness.py``). It is meant to stop accidents and ordinary malice: fork/memory/disk/output bombs,
reading host files and environment, network access, signalling the host, leftover processes, and reward
hacking by early exit or printed results. Limits, stated plainly: the kernel is shared, so it is not a
boundary against kernel exploits (use a VM tier for hostile multi-tenant use); the filter is a deny list,
not an allow list; /proc of the sandbox's own pid namespace is visible; assert-style ``CodeTest``s run in
the candidate's process and can be forged by code written against this harness (use
``CallTest``/``IOTest`` for adversarial RL); CPU time of a busy host still affects wall-clock limits.
The ``unisolated`` backend is NOT a security boundary.

Trade-offs made for throughput (each measured; see the modules named):

* One process per execution for a single Python ``CodeTest``/``CallTest`` (HumanEval's shape;
  ``harness.runs_inline``): the candidate runs in the sandbox's pid 1, so the result pipe is in its
  hands. Its records are untrusted data the parent validates (order, fields, a garbage line is the
  program's runtime error); how pid 1 ended comes from the zygote that reaps it, not from the sandbox. A
  forged record gains nothing a ``CodeTest`` did not already allow, and a ``CallTest`` value still needs
  the expected value, which never enters. Several tests, stdin/stdout tests, plain runs and compiled
  languages keep the trusted harness plus a forked child, so a death in one test cannot take the
  following tests with it. As pid 1 the candidate ignores signals it sends itself with a default action
  (the kernel protects a namespace's init), e.g. ``os.kill(os.getpid(), signal.SIGTERM)``.
* Network namespaces are made once per slot, not per execution (``jail.make_network_namespaces``):
  concurrent sandboxes never share one, so abstract Unix sockets cannot connect them
  (``tests/security/test_netns_hazards.py``); consecutive executions of one slot share an empty
  namespace whose only state, socket names, dies with the last process of the previous execution,
  which the slot's janitor waits for.
* The zygote preloads ``typing``, ``math``, ``collections`` and a few other pure standard-library modules
  (``zygote.PRELOADED_MODULES``): a candidate finds them already in ``sys.modules`` (a fresh copy per
  execution, as for every other object).
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
