"""Issue 9, classes 4-7: the compile step's limits, ``socketpair``, host data in procfs and argv, and
channels between concurrent sandboxes through the shared read-only files."""

from __future__ import annotations

import fcntl
import os
import time

import pytest
from security_helpers import PROBE, assert_no_survivors, py

from execrl.sandbox import ExecutionRequest, Limits, Sandbox, Verdict
from execrl.sandbox.host.pool import SRC_DIR
from execrl.sandbox.service.fusion import parse_run_code


def _cpp(program: str, **limits: float) -> ExecutionRequest:
    limited = Limits(**limits)  # type: ignore[arg-type]
    return ExecutionRequest(language="cpp", program=program, limits=limited)


@pytest.mark.parametrize("path", ["/proc/self/fd/1", "/dev/stdout"])
def test_compile_step_is_bounded_by_the_requests_compile_timeout(sandbox: Sandbox, path: str) -> None:
    """Class 4. Bug: a source that ``#include``s one of the compiler's own descriptors (its output pipe,
    which it holds open itself) blocks the compiler; the run then took the fixed 30 s compile limit
    whatever the request said. Now ``Limits.compile_timeout_s`` bounds it."""
    request = _cpp(f'#include "{path}"\nint main() {{ return 0; }}\n', timeout_s=5.0, compile_timeout_s=1.0)
    start = time.monotonic()
    result = sandbox.run(request)
    elapsed_s = time.monotonic() - start
    assert result.verdict is Verdict.COMPILE_ERROR, result
    assert "compile time limit exceeded" in result.compile_output
    assert elapsed_s < 5.0  # 1 s of compile limit, plus start-up and a loaded machine
    assert_no_survivors(sandbox)


def test_sandbox_fusion_compile_timeout_is_applied(sandbox: Sandbox) -> None:
    """Class 4, through the SandboxFusion schema verl sends: ``compile_timeout`` was validated and then
    ignored (the fixed 30 s applied)."""
    body = {"code": '#include "/dev/stdout"\nint main() {}\n', "language": "cpp", "compile_timeout": 1}
    start = time.monotonic()
    result = sandbox.run(parse_run_code(body, default_memory_mb=256))
    assert result.verdict is Verdict.COMPILE_ERROR
    assert time.monotonic() - start < 5.0
    assert_no_survivors(sandbox)


def test_socketpair_is_filtered_like_socket(sandbox: Sandbox) -> None:
    """Class 5. Bug: only ``socket`` was checked, so ``socketpair`` reached the create routine of any
    family (AF_INET, AF_NETLINK, AF_VSOCK=40, AF_ALG=38...). Now: EPERM before the family is touched."""
    program = PROBE + (
        "import socket\n"
        "for family in (socket.AF_INET, socket.AF_INET6, socket.AF_NETLINK, socket.AF_PACKET, 38, 40):\n"
        "    probe(str(family), lambda: socket.socketpair(family, socket.SOCK_STREAM))\n"
        "probe('unix', lambda: socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM))\n"
    )
    result = sandbox.run(py(program))
    assert result.verdict is Verdict.PASSED
    assert result.stdout.splitlines() == [f"{f} EPERM" for f in (2, 10, 16, 17, 38, 40)] + ["unix OK"]


def test_procfs_shows_only_the_sandboxs_processes_and_no_host_path(sandbox: Sandbox) -> None:
    """Class 6. Bug: the full procfs was mounted (``/proc/cmdline``, the boot id, ``/proc/sys`` readable)
    and pid 1's command line carried the host's source directory. Now ``subset=pid`` and a command line
    whose code arrives on stdin."""
    program = PROBE + (
        "for path in ('/proc/cmdline', '/proc/sys/kernel/random/boot_id', '/proc/meminfo', '/proc/locks'):\n"
        "    probe(path, lambda: open(path, 'rb').read())\n"
        "print('entries', sorted(p for p in os.listdir('/proc') if not p.isdigit()))\n"
        "print('pid1', open('/proc/1/cmdline', 'rb').read().split(b'\\0')[1:])\n"
        "print('self', open('/proc/self/cmdline', 'rb').read().split(b'\\0')[1:])\n"
    )
    result = sandbox.run(py(program))
    assert result.verdict is Verdict.PASSED
    lines = result.stdout.splitlines()
    for path in ("/proc/cmdline", "/proc/sys/kernel/random/boot_id", "/proc/meminfo", "/proc/locks"):
        assert f"{path} ENOENT" in lines
    assert "entries ['self', 'thread-self']" in lines
    assert SRC_DIR not in result.stdout and "execrl" not in result.stdout
    with open("/proc/sys/kernel/random/boot_id") as fh:
        assert fh.read().strip() not in result.stdout
    assert_no_survivors(sandbox)


def test_compiler_cannot_echo_host_procfs_files(sandbox: Sandbox) -> None:
    """Class 6: what the compiler echoes into ``compile_output`` (an included file's text in its errors)
    or embeds into the program (``.incbin``) carries no host-wide /proc file."""
    with open("/proc/cmdline") as fh:
        host_cmdline = fh.read().strip()
    included = sandbox.run(_cpp('#include "/proc/cmdline"\nint main() {}\n'))
    assert included.verdict is Verdict.COMPILE_ERROR
    assert "No such file" in included.compile_output
    program = (
        "#include <cstdio>\n"
        'asm(".global blob\\nblob:\\n.incbin \\"/proc/cmdline\\"\\n.byte 0\\n");\n'
        "extern char blob[];\nint main() { std::puts(blob); }\n"
    )
    embedded = sandbox.run(_cpp(program))
    assert embedded.verdict is Verdict.COMPILE_ERROR
    for result in (included, embedded):
        assert host_cmdline not in result.compile_output + result.stdout
    assert_no_survivors(sandbox)


def test_shared_files_carry_no_lock_or_notification_channel(sandbox: Sandbox) -> None:
    """Class 7. Bug: a file of the read-only Python prefix could be ``flock``ed (or fcntl-locked) by one
    sandbox and tested by another (or by the host), and inotify/fanotify/dnotify watched its reads: a
    channel between concurrent sandboxes. Now locks are ENOLCK and notification is EPERM; here the host
    holds an exclusive lock a sandbox used to see."""
    target = os.path.realpath(os.__file__)
    program = PROBE + (
        "import ctypes, fcntl, struct\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        f"fd = os.open({target!r}, os.O_RDONLY)\n"
        "probe('flock', lambda: fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB))\n"
        "lock = struct.pack('hhqqi', fcntl.F_RDLCK, 0, 0, 0, 0)\n"
        "probe('setlk', lambda: fcntl.fcntl(fd, fcntl.F_SETLK, lock))\n"
        "probe('getlk', lambda: fcntl.fcntl(fd, fcntl.F_GETLK, lock))\n"
        "probe('ofd_setlk', lambda: fcntl.fcntl(fd, fcntl.F_OFD_SETLK, lock))\n"
        "dirfd = os.open(os.path.dirname(" + repr(target) + "), os.O_RDONLY)\n"
        "probe('dnotify', lambda: fcntl.fcntl(dirfd, fcntl.F_NOTIFY, fcntl.DN_ACCESS))\n"
        "for name, call in (('inotify_init1', lambda: libc.inotify_init1(0)),\n"
        "                   ('fanotify_init', lambda: libc.fanotify_init(0, 0))):\n"
        "    print(name, call(), errno.errorcode.get(ctypes.get_errno()))\n"
    )
    with open(target, "rb") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        result = sandbox.run(py(program))
    assert result.verdict is Verdict.PASSED
    assert result.stdout.splitlines() == [
        "flock ENOLCK",
        "setlk ENOLCK",
        "getlk ENOLCK",
        "ofd_setlk ENOLCK",
        "dnotify EPERM",
        "inotify_init1 -1 EPERM",
        "fanotify_init -1 EPERM",
    ]
    assert_no_survivors(sandbox)


def test_fcntl_on_descriptors_still_works(sandbox: Sandbox) -> None:
    """The lock filter catches lock commands only: flags and duplication (which Python uses itself)
    keep working, and so does a subprocess."""
    program = (
        "import fcntl, os, subprocess\n"
        "r, w = os.pipe()\n"
        "fcntl.fcntl(r, fcntl.F_SETFL, os.O_NONBLOCK)\n"
        "nonblocking = bool(fcntl.fcntl(r, fcntl.F_GETFL) & os.O_NONBLOCK)\n"
        "print(nonblocking, fcntl.fcntl(r, fcntl.F_DUPFD_CLOEXEC, 10) >= 10)\n"
        "print(subprocess.run(['/bin/echo', 'ok'], capture_output=True, text=True).stdout.strip())\n"
    )
    result = sandbox.run(py(program))
    assert result.stdout == "True True\nok\n"
