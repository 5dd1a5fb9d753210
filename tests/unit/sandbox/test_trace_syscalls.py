"""``scripts/trace_syscalls.py``'s parser of ``strace -f`` output, on hand-written traces."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "trace_syscalls.py"


@pytest.fixture(scope="module")
def trace() -> ModuleType:
    spec = importlib.util.spec_from_file_location("trace_syscalls", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("trace_syscalls", module)
    spec.loader.exec_module(module)
    return module


JOB = '{\\"language\\": {\\"name\\": \\"go\\", \\"mode\\": \\"binary\\"'


def test_padded_pids_are_parsed(trace: ModuleType) -> None:
    """Regression: strace pads pids to the widest one seen (``3381  clone(``); the parser matched one
    space only, so every sandbox whose pids had fewer digits than the test runner's was never counted
    (c, go, rust and bash were missing from the first trace of the languages)."""
    lines = [
        "3381  clone(child_stack=NULL, flags=CLONE_NEWNS|CLONE_NEWPID|SIGCHLD <unfinished ...>",
        "3381  <... clone resumed>)              = 3384",
        "3384  getpid()                          = 1",
        "3384  read(0,  <unfinished ...>",
        f'3384  <... read resumed>"{JOB}"..., 1048576) = 720',
        "3384  sigaltstack(NULL, {ss_sp=NULL}) = 0",
    ]
    # pid 1's calls until its job arrives run before the allow list is stacked: not counted
    assert trace.parse(lines) == {"go": {"sigaltstack"}}


def test_a_reused_pid_starts_unplaced(trace: ModuleType) -> None:
    """Regression: a pid that ended inside a sandbox kept its language, so a later host process given
    the same pid (pids wrap) had its calls counted for that language."""
    lines = [
        "40 clone(child_stack=NULL, flags=CLONE_NEWPID|SIGCHLD) = 41",
        f'41 read(0, "{JOB}"..., 1048576) = 720',
        "41 +++ exited with 0 +++",
        "41 mount(NULL, NULL, NULL, 0, NULL) = 0",
    ]
    assert trace.parse(lines) == {"go": {"read"}}
