"""A source that blocks its compiler costs the request's own wall limit, not the compile step's 30 s.

Guards against issue 23's leftover: ``execrl sandbox run --timeout-s 1`` on a C++ source whose
``#include "/dev/stdout"`` makes the compiler read its own output pipe took ~33 s (the compile limit,
30 s in CPU and wall time, ignored the request's wall limit; a blocked compiler uses no CPU), and the
CLI had no ``--compile-timeout-s``. Now a compile whose process tree gains no CPU time for the run's
``timeout_s`` is stopped (``sandbox/zygote/stall.py``), while a compile that works longer than ``timeout_s``
still finishes, and the CLI sets the compile limit.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from execrl.cli import main
from execrl.sandbox import ExecutionRequest, Limits, Sandbox, SandboxConfig, Verdict

BLOCKED = '#include "/dev/stdout"\nint main() { return 0; }\n'
BUSY = '#include <bits/stdc++.h>\nint main() { std::cout << "hi" << std::endl; }\n'  # ~1-2 s of CPU here


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with Sandbox(SandboxConfig(workers=1)) as sb:
        yield sb


def test_a_blocked_compiler_is_stopped_at_the_requests_wall_limit(sandbox: Sandbox) -> None:
    request = ExecutionRequest(language="cpp", program=BLOCKED, limits=Limits(timeout_s=1.0, cpu_time_s=1.0))
    result = sandbox.run(request)
    assert result.verdict is Verdict.COMPILE_ERROR and result.compile_timed_out, result
    assert "blocked" in result.compile_output, result.compile_output
    assert result.wall_time_s < 10.0, result.wall_time_s  # the compile limit is 30 s


def test_a_compile_that_works_longer_than_the_wall_limit_still_finishes(sandbox: Sandbox) -> None:
    request = ExecutionRequest(language="cpp", program=BUSY, limits=Limits(timeout_s=0.2, cpu_time_s=1.0))
    result = sandbox.run(request)
    assert result.verdict is Verdict.PASSED and result.stdout == "hi\n", (result.compile_output, result)


def test_the_cli_sets_the_compile_limit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "blocked.cpp"
    source.write_text(BLOCKED)
    code = main(["sandbox", "run", str(source), "--timeout-s", "60", "--compile-timeout-s", "1.5", "--json"])
    out = capsys.readouterr().out
    assert code == 1 and '"compile_timed_out": true' in out, out
    assert "compile time limit exceeded" in out  # the compile limit (1.5 s) came before 60 s of waiting
