"""Files into and out of the work directory, as the harness ``H`` does it inside the sandbox.

In: the request's files (text as UTF-8, a lone surrogate as its three bytes; bytes as given) and the program, created with ``O_EXCL |
O_NOFOLLOW`` before any candidate code runs.

Out (``ExecutionRequest.fetch_files``, SandboxFusion's ``fetch_files``): after every candidate process
is dead and reaped, each path is opened one component at a time from the work directory with
``O_NOFOLLOW`` (``openat``), so a symbolic link anywhere along the path, planted by the candidate to make
the sandbox return ``/etc/passwd`` or ``/proc/1/environ``, is refused instead of followed; only a
regular file is read (a FIFO would block, a directory is no file), and at most
``limits.max_fetch_file_bytes`` per file and ``limits.max_fetch_bytes`` in all. Hard links cannot point
outside either: the work directory is its own tmpfs (the "unisolated" backend, which is no security
boundary, uses a host directory). Each path answers one record: ``{"kind": "file", "path", "data"}``
(base64) or ``{"kind": "file", "path", "error"}``.

Standard library only, and only modules the zygote already has (``binascii`` and ``errno`` are built in):
everything imported here is imported by every sandbox's harness.
"""

from __future__ import annotations

import binascii
import errno
import os
import stat

# Annotations only: importing ``typing`` would add ~2 MB to the zygote, and to every fork of it.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def _write(path: str, data: bytes) -> None:
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def write_all(job: dict[str, Any]) -> None:
    """Create the job's text files, binary files (base64 in the job) and program in the work directory,
    after the toolchain's directories (``languages.BUILD_DIR``, where a compiler writes its output)."""
    for directory in job["language"].get("mkdirs", ()):
        os.mkdir(directory)
    write_inputs(job)
    _write(job["program_path"], job["program"].encode("utf-8", "surrogatepass"))


def write_inputs(job: dict[str, Any]) -> None:
    """The job's text files and binary files (base64 in the job); a session's files (``sessions/``)."""
    for path, text in job["files"].items():
        _write(path, text.encode("utf-8", "surrogatepass"))  # as ``child.text_bytes``
    for path, encoded in job.get("files_b64", {}).items():
        _write(path, binascii.a2b_base64(encoded))


def _open_in_workdir(path: str) -> int:
    """A descriptor of ``path`` under the current directory, following no symbolic link on the way."""
    parts = path.split("/")
    dir_fd = os.open(".", _DIR_FLAGS)
    try:
        for part in parts[:-1]:
            next_fd = os.open(part, _DIR_FLAGS, dir_fd=dir_fd)
            os.close(dir_fd)
            dir_fd = next_fd
        return os.open(parts[-1], _FILE_FLAGS, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)


def _why(exc: OSError) -> str:
    if exc.errno == errno.ENOENT:
        return "not found in the work directory after the run"
    if exc.errno in (errno.ELOOP, errno.ENOTDIR):  # O_NOFOLLOW on a link; a link or file as a directory
        return "is, or lies under, a symbolic link or a non-directory; links are not followed"
    return f"could not be opened: {os.strerror(exc.errno or 0)}"


def read_one(path: str, max_bytes: int) -> tuple[bytes | None, str | None]:
    """``(content, None)`` or ``(None, why not)`` for one path of ``fetch_files``."""
    try:
        fd = _open_in_workdir(path)
    except OSError as exc:
        return None, _why(exc)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None, "is not a regular file"
        if info.st_size > max_bytes:
            return None, f"holds {info.st_size} bytes, over limits.max_fetch_file_bytes ({max_bytes})"
        chunks, size = [], 0
        while size <= max_bytes:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    if size > max_bytes:
        return None, f"holds more than limits.max_fetch_file_bytes ({max_bytes}) bytes"
    return b"".join(chunks), None


def fetch_all(job: dict[str, Any], send: Callable[[dict[str, Any]], None]) -> None:
    """Send one ``file`` record per path of the job's ``fetch_files``, in order, within the limits."""
    limits = job["limits"]
    per_file, left = int(limits["max_fetch_file_bytes"]), int(limits["max_fetch_bytes"])
    for path in job.get("fetch_files", ()):
        data, error = read_one(path, per_file)
        if data is None:
            send({"kind": "file", "path": path, "error": error})
            continue
        if len(data) > left:
            error = f"holds {len(data)} bytes, over what limits.max_fetch_bytes leaves ({left})"
            send({"kind": "file", "path": path, "error": error})
            continue
        left -= len(data)
        send({"kind": "file", "path": path, "data": binascii.b2a_base64(data, newline=False).decode()})
