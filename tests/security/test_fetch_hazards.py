"""``fetch_files`` against a hostile program (issue 13): nothing outside the work directory comes back.

The program knows which names the client will fetch and plants, under those names, symbolic links to
host files, links through a directory, a FIFO (which would block a reader) and hard links. Each must
come back as a ``file_errors`` entry, the
run must end within its limits, and no host byte may appear in ``files``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from security_helpers import PROBE

from execrl.sandbox import ExecutionRequest, Limits, Sandbox, SandboxConfig, Verdict

LINKS = (
    "import os\n"
    "os.symlink('/etc/passwd', 'answer.txt')\n"
    "os.symlink('/proc/1/environ', 'environ.txt')\n"
    "os.symlink('/etc', 'etc')\n"
    "os.makedirs('a/b')\n"
    "os.symlink('../../answer.txt', 'a/b/c.txt')\n"
    "os.symlink('/', 'a/root')\n"
    "try:\n"
    "    os.mkfifo('pipe')\n"
    "except OSError:\n"  # the allow list refuses mknod (ENOSYS): no FIFO can be made at all
    "    pass\n"
)
FETCHED = ("answer.txt", "environ.txt", "etc/passwd", "a/b/c.txt", "a/root/etc/passwd", "pipe")


def _fetch(sandbox: Sandbox, program: str, fetch: tuple[str, ...]) -> object:
    limits = Limits(timeout_s=5.0, cpu_time_s=2.0, memory_mb=128, max_processes=16)
    return sandbox.run(ExecutionRequest(language="python", program=program, fetch_files=fetch, limits=limits))


def _assert_refused(result: object, paths: tuple[str, ...]) -> None:
    assert result.files == {}, result.files  # type: ignore[attr-defined]
    assert set(result.file_errors) == set(paths)  # type: ignore[attr-defined]


def test_links_and_fifos_named_like_fetched_files_are_refused(sandbox: Sandbox) -> None:
    result = _fetch(sandbox, LINKS, FETCHED)
    assert result.verdict is Verdict.PASSED  # type: ignore[attr-defined]
    _assert_refused(result, FETCHED)
    # Under the deny list the FIFO exists and is refused; the allow list already refused to make it.
    no_fifo = sandbox.config.seccomp_policy == "allow"
    expected = "not found in the work directory after the run" if no_fifo else "is not a regular file"
    assert result.file_errors["pipe"] == expected  # type: ignore[attr-defined]
    for path in FETCHED[:-1]:
        assert "symbolic link" in result.file_errors[path]  # type: ignore[attr-defined]


def test_hard_links_cannot_reach_outside_the_work_directory(sandbox: Sandbox) -> None:
    program = PROBE + "probe('link', lambda: os.link('/etc/ld.so.cache', 'cache'))\n"
    result = _fetch(sandbox, program, ("cache",))
    assert result.stdout == "link EXDEV\n"  # type: ignore[attr-defined]  # the work directory is its own tmpfs
    _assert_refused(result, ("cache",))


@pytest.fixture(scope="module")
def unisolated() -> Iterator[Sandbox]:
    with Sandbox(SandboxConfig(backend="unisolated", workers=1)) as sb:
        yield sb


def test_unisolated_backend_does_not_follow_links_to_host_files(unisolated: Sandbox) -> None:
    """Without the jail ``/etc/passwd`` is the host's own: still never returned (the backend is no
    security boundary, but fetching must not add a way out)."""
    assert Path("/etc/passwd").is_file()
    result = _fetch(unisolated, LINKS, FETCHED)
    _assert_refused(result, FETCHED)
