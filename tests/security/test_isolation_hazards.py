"""Isolation hazards (#6-#12, #14, #16, #17-#19): filesystem, secrets, network, signals, syscalls.

Each test asserts what the program saw inside the sandbox (its verdict and output) and that the host is
untouched (files, processes, the test process itself).
"""

from __future__ import annotations

import os
import socket
import uuid

from security_helpers import PROBE, assert_no_survivors, host_file_absent, py

from execrl.sandbox import Sandbox, Verdict


def test_disk_fill_hits_the_tmpfs_not_the_host(sandbox: Sandbox) -> None:
    program = "with open('big', 'wb') as fh:\n    while True:\n        fh.write(b'x' * (1 << 20))\n"
    result = sandbox.run(py(program, workdir_mb=8, max_file_mb=64))
    assert result.verdict is Verdict.RUNTIME_ERROR
    assert "No space left on device" in result.stderr
    assert_no_survivors(sandbox)


def test_file_size_rlimit_stops_a_single_big_file(sandbox: Sandbox) -> None:
    program = "with open('big', 'wb') as fh:\n    fh.write(b'x' * (3 << 20))\n"
    result = sandbox.run(py(program, max_file_mb=1))
    assert result.verdict is Verdict.RUNTIME_ERROR and "File too large" in result.stderr


def test_inode_fill_is_contained(sandbox: Sandbox) -> None:
    program = "i = 0\nwhile True:\n    open(f'f{i}', 'w').close()\n    i += 1\n"
    result = sandbox.run(py(program, workdir_inodes=64))
    assert result.verdict is Verdict.RUNTIME_ERROR and "No space left on device" in result.stderr


def test_writes_outside_the_work_dir_fail_and_leave_no_trace(sandbox: Sandbox) -> None:
    name = f"execrl-escape-{uuid.uuid4().hex}"
    targets = ["/etc", "/var/tmp", "/dev/shm", "/usr/lib", "/root", os.path.realpath(os.sys.base_prefix), "/"]
    program = PROBE + "".join(
        f"probe({t!r}, lambda: open({t!r} + '/{name}', 'w').write('x'))\n" for t in targets
    )
    result = sandbox.run(py(program))
    assert result.verdict is Verdict.PASSED
    assert len(result.stdout.splitlines()) == len(targets), result.stdout  # one line per probe
    for line in result.stdout.splitlines():
        assert not line.endswith(" OK"), line
    assert all(host_file_absent(f"{t}/{name}") for t in targets)


def test_nothing_persists_into_the_next_run(sandbox: Sandbox) -> None:
    writer = sandbox.run(
        py(
            "open('/tmp/marker', 'w').write('1')\nprint(os.listdir('/tmp'))".replace(
                "print(", "import os\nprint("
            )
        )
    )
    assert writer.verdict is Verdict.PASSED and "marker" in writer.stdout
    reader = sandbox.run(py("import os\nprint(os.path.exists('/tmp/marker'), sorted(os.listdir('/tmp')))"))
    assert reader.stdout == "False ['main.py']\n"
    assert host_file_absent("/tmp/marker")


def test_host_secrets_are_invisible(sandbox: Sandbox) -> None:
    secret = f"execrl-secret-{uuid.uuid4().hex}"
    os.environ["EXECRL_TEST_SECRET"] = secret
    try:
        program = PROBE + (
            "probe('shadow', lambda: open('/etc/shadow').read())\n"
            "probe('passwd', lambda: open('/etc/passwd').read())\n"
            "probe('ssh', lambda: os.listdir('/root/.ssh'))\n"
            "print('root', sorted(os.listdir('/root')))\n"
            "print('env', dict(os.environ))\n"
            "probe('environ1', lambda: open('/proc/1/environ').read())\n"
            "print('pids', sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))\n"
            "probe('sys', lambda: os.listdir('/sys/fs/cgroup'))\n"
        )
        result = sandbox.run(py(program))
    finally:
        del os.environ["EXECRL_TEST_SECRET"]
    out = result.stdout
    assert result.verdict is Verdict.PASSED
    assert "shadow ENOENT" in out and "passwd ENOENT" in out and "ssh ENOENT" in out
    assert "root ['.pyenv']" in out or "root []" in out
    assert secret not in out and "EXECRL_TEST_SECRET" not in out
    assert "environ1 EACCES" in out
    assert "pids [1, 2]" in out  # only the harness and the program itself
    assert "sys ENOENT" in out


def test_network_egress_is_impossible(sandbox: Sandbox) -> None:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.setblocking(False)
    port = listener.getsockname()[1]
    program = PROBE + (
        "import socket\n"
        f"probe('tcp', lambda: socket.create_connection(('127.0.0.1', {port}), timeout=1))\n"
        "probe('udp', lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM))\n"
        "probe('inet6', lambda: socket.socket(socket.AF_INET6, socket.SOCK_STREAM))\n"
        "probe('raw', lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP))\n"
        "probe('packet', lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW))\n"
        "probe('netlink', lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW))\n"
        "probe('unix', lambda: socket.socketpair())\n"
        "try:\n    socket.getaddrinfo('example.com', 80)\n    print('dns OK')\n"
        "except OSError as exc:\n    print('dns', type(exc).__name__)\n"
    )
    try:
        result = sandbox.run(py(program))
        try:
            listener.accept()
            accepted = True
        except BlockingIOError:
            accepted = False
    finally:
        listener.close()
    out = result.stdout
    assert result.verdict is Verdict.PASSED
    for label in ("tcp", "udp", "inet6", "raw", "packet", "netlink"):
        assert f"{label} EPERM" in out, out
    assert "unix OK" in out and "dns OK" not in out
    assert not accepted


def test_cannot_kill_the_parent_or_other_sandboxes(sandbox: Sandbox) -> None:
    killer = PROBE + (
        "import signal\n"
        "for target in (os.getppid(), 1, -1):\n"
        "    probe(str(target), lambda: os.kill(target, signal.SIGKILL))\n"
        "print('alive')\n"
    )
    victim = "import time\ntime.sleep(0.5)\nprint('victim ok')\n"
    results = sandbox.run_batch([py(victim), py(killer)])
    assert results[0].verdict is Verdict.PASSED and results[0].stdout == "victim ok\n"
    # pid 1 (the harness) ignores signals from inside its namespace; -1 finds nothing else to kill.
    assert results[1].verdict is Verdict.PASSED and results[1].stdout == "1 OK\n1 OK\n-1 ESRCH\nalive\n"
    assert sandbox.run(py("print(1)")).passed  # the zygote and pool are fine
    assert_no_survivors(sandbox)


def test_ptrace_and_process_vm_are_denied(sandbox: Sandbox) -> None:
    program = (
        "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "for name, args in (('ptrace', (16, 1, 0, 0)), ('ptrace', (0, 0, 0, 0)), ('process_vm_readv', (1, 0, 0, 0, 0, 0))):\n"
        "    rc = getattr(libc, name)(*args)\n"
        "    print(name, rc, ctypes.get_errno())\n"
    )
    result = sandbox.run(py(program))
    assert result.stdout.splitlines() == ["ptrace -1 1", "ptrace -1 1", "process_vm_readv -1 1"]  # EPERM
    assert_no_survivors(sandbox)


def test_setuid_binaries_give_no_privilege(sandbox: Sandbox) -> None:
    program = (
        "import os, subprocess\n"
        "print('euid', os.geteuid() != 0)\n"
        "try:\n    os.setuid(0)\n    print('setuid OK')\nexcept PermissionError:\n    print('setuid EPERM')\n"
        "p = subprocess.run(['/usr/bin/su', '-c', 'id -u'], capture_output=True, text=True, stdin=subprocess.DEVNULL)\n"
        "print('su', p.returncode != 0, repr(p.stdout))\n"
        "p = subprocess.run(['/usr/bin/mount', '-t', 'tmpfs', 'x', '/tmp'], capture_output=True, text=True)\n"
        "print('mount', p.returncode != 0)\n"
        "print('caps', [l for l in open('/proc/self/status') if l.startswith(('Cap', 'NoNewPrivs'))])\n"
    )
    result = sandbox.run(py(program))
    out = result.stdout
    assert "euid True" in out and "setuid EPERM" in out
    assert "su True ''" in out and "mount True" in out
    for caps in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert f"{caps}:\\t0000000000000000" in out, out
    assert "NoNewPrivs:\\t1" in out
    assert_no_survivors(sandbox)


def test_double_fork_daemon_does_not_survive(sandbox: Sandbox) -> None:
    program = (
        "import os, time\n"
        "if os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        time.sleep(60)\n    os._exit(0)\n"
        "time.sleep(0.1)\nprint('parent done')\n"
    )
    result = sandbox.run(py(program))
    assert result.verdict is Verdict.PASSED and result.stdout == "parent done\n"
    assert_no_survivors(sandbox)


def test_symlinks_cannot_redirect_host_reads_or_writes(sandbox: Sandbox) -> None:
    with open("/etc/hostname", "rb") as fh:
        before = fh.read()
    program = PROBE + (
        "for name, target in (('out', '/etc/hostname'), ('main.py.bak', '/etc/shadow'), ('result', '/proc/1/fd/4')):\n"
        "    os.symlink(target, name)\n"
        "probe('write', lambda: open('out', 'w').write('pwned'))\n"
        "probe('read', lambda: open('main.py.bak').read())\n"
        "probe('fd', lambda: open('result', 'w').write('{\"kind\": \"done\"}'))\n"
    )
    result = sandbox.run(py(program))
    assert result.verdict is Verdict.PASSED
    assert "write OK" not in result.stdout and "read OK" not in result.stdout and "fd OK" not in result.stdout
    with open("/etc/hostname", "rb") as fh:
        assert fh.read() == before


def test_terminal_injection_is_denied(sandbox: Sandbox) -> None:
    program = (
        PROBE + "import fcntl, termios\nprobe('tiocsti', lambda: fcntl.ioctl(0, termios.TIOCSTI, b'x'))\n"
    )
    assert sandbox.run(py(program)).stdout == "tiocsti EPERM\n"
    assert_no_survivors(sandbox)
