"""Sessions keep interpreter state between cells; each cell answers its output, value and error."""

from __future__ import annotations

import pytest

from execrl.sandbox import (
    CellResult,
    Sandbox,
    SessionClosedError,
    SessionForkError,
    SessionLimits,
    Verdict,
)
from execrl.sandbox.errors import InvalidRequestError


def test_globals_imports_and_files_persist(sandbox: Sandbox) -> None:
    with sandbox.open_session(files={"data/in.txt": "3 4\n", "raw.bin": b"\x00\xff"}) as session:
        assert session.run("import math\nx, y = map(int, open('data/in.txt').read().split())").passed
        assert session.run("def hyp(a, b):\n    return math.hypot(a, b)").passed
        assert session.run("open('out.txt', 'w').write(str(hyp(x, y)))").value == "3"
        assert (
            session.run("open('out.txt').read(), open('raw.bin', 'rb').read()").value
            == "('5.0', b'\\x00\\xff')"
        )
        assert session.cells_run == 4


def test_last_expression_value_and_streams(sandbox: Sandbox) -> None:
    with sandbox.open_session() as session:
        result = session.run("import sys\nprint('out')\nsys.stderr.write('err\\n')\n[1, 2]")
        assert (result.stdout, result.stderr, result.value) == ("out\n", "err\n", "[1, 2]")
        assert session.run("x = 5").value is None  # a statement has no value
        assert session.run("None").value is None
        assert session.run("_").value == "[1, 2]"  # the last value, as in the REPL


def test_exception_reports_the_cells_own_frames_only(sandbox: Sandbox) -> None:
    """The traceback names cells, never the harness's modules or any host path."""
    with sandbox.open_session() as session:
        session.run("def f(d):\n    return d['missing']")
        result = session.run("import json\njson.loads('{}')\nf({})")
    assert result.verdict is Verdict.RUNTIME_ERROR and result.session_alive
    assert (result.error_type, result.error_message) == ("KeyError", "'missing'")
    text = "\n".join(result.traceback)
    assert 'File "<cell 2>", line 3, in <module>' in text and 'File "<cell 1>", line 2, in f' in text
    assert "return d['missing']" in text and text.endswith("KeyError: 'missing'")
    assert "execrl" not in text and "/work" not in text and ".py" not in text


def test_library_frames_are_counted_not_shown(sandbox: Sandbox) -> None:
    with sandbox.open_session() as session:
        result = session.run("import json\njson.loads('not json')")
    assert result.error_type == "JSONDecodeError"
    assert any("frame(s) outside the cells" in line for line in result.traceback)
    assert not any("json/" in line for line in result.traceback)


def test_syntax_error_and_system_exit_keep_the_session(sandbox: Sandbox) -> None:
    with sandbox.open_session() as session:
        session.run("kept = 1")
        syntax = session.run("x = (")
        assert syntax.error_type == "SyntaxError" and syntax.session_alive
        assert any("<cell 2>" in line for line in syntax.traceback)
        exit_ = session.run("import sys; sys.exit(3)")
        assert (exit_.verdict, exit_.error_type, exit_.session_alive) == (
            Verdict.RUNTIME_ERROR,
            "SystemExit",
            True,
        )
        assert session.run("kept").value == "1"


def test_repr_that_raises_is_the_cells_error(sandbox: Sandbox) -> None:
    with sandbox.open_session() as session:
        result = session.run("class Bad:\n    def __repr__(self):\n        raise ValueError('no')\nBad()")
    assert (result.error_type, result.session_alive) == ("ValueError", True)


def test_read_files_refuses_links(sandbox: Sandbox) -> None:
    with sandbox.open_session() as session:
        session.run("import os\nopen('a.txt', 'w').write('A')\nos.symlink('/etc/ld.so.cache', 'link')")
        files, errors = session.read_files(["a.txt", "link", "missing"])
    assert files == {"a.txt": b"A"}
    assert set(errors) == {"link", "missing"} and "link" in errors["link"]


def test_closed_session_raises_and_fork_is_refused(sandbox: Sandbox) -> None:
    session = sandbox.open_session()
    with pytest.raises(SessionForkError, match="only a SessionTemplate"):
        session.fork(2)
    session.close()
    session.close()  # idempotent
    with pytest.raises(SessionClosedError):
        session.run("1")


def test_bad_arguments_are_the_callers_error(sandbox: Sandbox) -> None:
    with pytest.raises(InvalidRequestError, match="limits.memory_mb"):
        SessionLimits(memory_mb=1.5)  # type: ignore[arg-type]
    with pytest.raises(InvalidRequestError, match="cell_timeout_s"):
        SessionLimits(cell_timeout_s=0)
    with pytest.raises(InvalidRequestError, match="absolute"):
        sandbox.open_session(files={"/etc/x": "y"})
    with sandbox.open_session() as session, pytest.raises(InvalidRequestError, match="code must be a str"):
        session.run(b"1")  # type: ignore[arg-type]


def test_async_twin_runs_cells(sandbox: Sandbox) -> None:
    import asyncio

    async def main() -> list[CellResult]:
        session = sandbox.open_session()
        try:
            return [await session.arun("a = 2"), await session.arun("a * 21")]
        finally:
            await session.aclose()

    assert asyncio.run(main())[1].value == "42"


def test_python_data_runtime_session(sandbox: Sandbox) -> None:
    with sandbox.open_session(runtime="python-data") as session:
        session.run("import numpy as np, pandas as pd\ndf = pd.DataFrame({'a': np.arange(5)})")
        assert session.run("int(df['a'].sum())").value == "10"


def test_stats_report_cells_cpu_and_memory(sandbox: Sandbox) -> None:
    with sandbox.open_session() as session:
        session.run("x = bytearray(20 << 20)\nsum(range(10**6))")
        stats = session.stats()
    assert stats.alive and stats.cells == 1 and stats.cpu_s > 0
    assert stats.memory_mb >= 20 and stats.peak_memory_mb >= 20


def test_sessions_need_the_namespace_backend() -> None:
    from execrl.sandbox import SandboxConfig, UnsupportedHostError

    with (
        Sandbox(SandboxConfig(backend="unisolated", workers=1)) as unisolated,
        pytest.raises(UnsupportedHostError, match="namespace backend"),
    ):
        unisolated.open_session()
