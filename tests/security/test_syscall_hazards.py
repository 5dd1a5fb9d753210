"""Seccomp hazards (#11, #18): io_uring, the 32-bit ABI via int 0x80, mount/unshare/clone with namespaces."""

from __future__ import annotations

from security_helpers import assert_no_survivors, py

from execrl.sandbox import Sandbox, Verdict

SYSCALL = "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nlibc.syscall.restype = ctypes.c_long\n"


def test_io_uring_is_denied(sandbox: Sandbox) -> None:
    program = SYSCALL + (
        "params = ctypes.create_string_buffer(120)\n"
        "for nr in (425, 426, 427):\n"
        "    print(nr, libc.syscall(nr, 8, ctypes.byref(params)), ctypes.get_errno())\n"
    )
    assert sandbox.run(py(program)).stdout == "425 -1 1\n426 -1 1\n427 -1 1\n"
    assert_no_survivors(sandbox)


def test_mount_unshare_setns_and_namespaced_clone_are_denied(sandbox: Sandbox) -> None:
    program = SYSCALL + (
        "print('mount', libc.mount(b'none', b'/tmp', b'tmpfs', 0, None), ctypes.get_errno())\n"
        "print('unshare', libc.unshare(0x10000000), ctypes.get_errno())\n"
        "print('setns', libc.setns(0, 0), ctypes.get_errno())\n"
        "print('clone', libc.syscall(56, 0x10000000 | 17, 0, 0, 0, 0), ctypes.get_errno())\n"
        "print('pivot_root', libc.syscall(155, b'/', b'/tmp'), ctypes.get_errno())\n"
        "print('bpf', libc.syscall(321, 0, 0, 0), ctypes.get_errno())\n"
        "print('userfaultfd', libc.syscall(323, 0), ctypes.get_errno())\n"
        "print('keyctl', libc.syscall(250, 0, 0, 0), ctypes.get_errno())\n"
    )
    lines = sandbox.run(py(program)).stdout.splitlines()
    assert_no_survivors(sandbox)
    assert lines == [
        f"{n} -1 1"
        for n in ("mount", "unshare", "setns", "clone", "pivot_root", "bpf", "userfaultfd", "keyctl")
    ]


def test_plain_fork_and_threads_still_work(sandbox: Sandbox) -> None:
    """The clone filter must only catch namespace flags: ordinary fork/threads/subprocess keep working."""
    program = (
        "import os, subprocess, threading\n"
        "t = threading.Thread(target=print, args=('thread',)); t.start(); t.join()\n"
        "print(subprocess.run(['/bin/echo', 'exec'], capture_output=True, text=True).stdout.strip())\n"
        "pid = os.fork()\nif pid == 0:\n    os._exit(7)\nprint('fork', os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))\n"
    )
    result = sandbox.run(py(program))
    assert result.stdout == "thread\nexec\nfork 7\n"


def test_32bit_int80_syscall_kills_the_process(sandbox: Sandbox) -> None:
    """``int 0x80`` enters the kernel with the i386 ABI; the arch check kills the process (SIGSYS)."""
    program = SYSCALL + (
        "import mmap\n"
        "code = bytes([0xB8, 0x14, 0, 0, 0, 0xCD, 0x80, 0xC3])  # mov eax, 20 (getpid, i386); int 0x80; ret\n"
        "buf = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)\n"
        "buf.write(code)\n"
        "addr = ctypes.addressof(ctypes.c_char.from_buffer(buf))\n"
        "fn = ctypes.CFUNCTYPE(ctypes.c_int)(addr)\n"
        "print('before', flush=True)\n"
        "print('returned', fn())\n"
    )
    result = sandbox.run(py(program))
    assert result.verdict is Verdict.RUNTIME_ERROR
    assert result.stdout == "before\n" and result.signal == 31  # SIGSYS
    assert_no_survivors(sandbox)


def test_x32_syscall_numbers_kill_the_process(sandbox: Sandbox) -> None:
    """Numbers with the x32 bit (0x40000000) reach the kernel's x32 table; the filter kills instead."""
    program = SYSCALL + "print('before', flush=True)\nprint(libc.syscall(0x40000000 + 39))\n"
    result = sandbox.run(py(program))
    assert result.verdict is Verdict.RUNTIME_ERROR
    assert result.stdout == "before\n" and result.signal == 31  # SIGSYS
