"""``fetch_files`` pieces without a sandbox: the harness's reader (``workfiles``) on a real directory and
the parent's reading of its records (``verdicts.fetched_files``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from execrl.sandbox import ExecutionRequest, Limits
from execrl.sandbox.errors import InvalidRequestError
from execrl.sandbox.host.runner import RunState
from execrl.sandbox.judge.verdicts import fetched_files
from execrl.sandbox.zygote.workfiles import fetch_all, read_one


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f.txt").write_bytes(b"abc")
    (tmp_path / "big.bin").write_bytes(b"x" * 10)
    os.symlink("/etc/hostname", tmp_path / "link")
    os.symlink("d", tmp_path / "dirlink")
    os.mkfifo(tmp_path / "fifo")
    return tmp_path


def test_read_one_reads_regular_files_only(workdir: Path) -> None:
    assert read_one("d/f.txt", 100) == (b"abc", None)
    assert read_one("missing", 100) == (None, "not found in the work directory after the run")
    assert read_one("fifo", 100) == (None, "is not a regular file")
    assert read_one("d", 100) == (None, "is not a regular file")
    for path in ("link", "dirlink/f.txt", "d/f.txt/x"):
        data, why = read_one(path, 100)
        assert data is None and why is not None and "symbolic link or a non-directory" in why
    assert read_one("big.bin", 9) == (None, "holds 10 bytes, over limits.max_fetch_file_bytes (9)")
    assert read_one("big.bin", 10) == (b"x" * 10, None)


def test_fetch_all_keeps_the_total_limit_in_request_order(workdir: Path) -> None:
    sent: list[dict[str, Any]] = []
    job = {
        "fetch_files": ["big.bin", "d/f.txt", "fifo"],
        "limits": {"max_fetch_file_bytes": 10, "max_fetch_bytes": 12},
    }
    fetch_all(job, sent.append)
    assert sent == [
        {"kind": "file", "path": "big.bin", "data": "eHh4eHh4eHh4eA=="},
        {"kind": "file", "path": "d/f.txt", "error": "holds 3 bytes, over what limits.max_fetch_bytes leaves (2)"},
        {"kind": "file", "path": "fifo", "error": "is not a regular file"},
    ]  # fmt: skip


def test_parent_reads_file_records_by_type() -> None:
    """Regression guard: records are data; a non-string path, an unrequested path, a second record for a
    path or garbled base64 never raises and never adds a file that was not asked for."""
    request = ExecutionRequest(language="python", program="x", fetch_files=("a", "b", "c", "d"))
    state = RunState(records=[
        {"kind": "file", "path": ["a"], "data": "eA=="},
        {"kind": "file", "path": "zzz", "data": "eA=="},
        {"kind": "file", "path": "a", "data": "eA=="},
        {"kind": "file", "path": "a", "data": "eQ=="},
        {"kind": "file", "path": "b", "data": "%%"},
        {"kind": "file", "path": "c", "error": 5},
    ], kill_reason="wall")  # fmt: skip
    files, errors = fetched_files(request, state)
    assert files == {"a": b"x"}
    assert errors == {
        "b": "the harness sent it garbled (not base64)",
        "c": "the harness gave no reason",
        "d": "not read: the sandbox was stopped before its harness read the work directory (wall-clock limit)",
    }


@pytest.mark.parametrize(
    ("fetch", "message"),
    [
        (("/etc/passwd",), "is absolute"),
        (("../x",), "'..'"),
        (("a", "a"), "listed twice"),
        (("",), "non-empty"),
    ],
)
def test_request_refuses_bad_fetch_paths(fetch: tuple[str, ...], message: str) -> None:
    with pytest.raises(InvalidRequestError, match=message):
        ExecutionRequest(language="python", program="x", fetch_files=fetch, limits=Limits())
