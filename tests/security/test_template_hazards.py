"""A hostile *setup* cell of a session template reaches nothing outside the template's own sandbox.

Setup cells come from task files, and task files from imported datasets: the template must not lend
them host privileges. Each test runs a setup cell that first takes every privilege the template's
process can take back (its uids, every permitted capability made effective, as the template's own code
does before it forks) and then tries what host root could: read a host file outside the jail, write a
host cgroup file, remount the read-only system tree, ``setns``, signal a host process, load a module,
become uid 0, write ``/proc/sys``, ``ptrace`` its parent, escape through ``/proc/<pid>/root``, open a
raw socket, ``chroot``, reach another template. Before the template ran in a user namespace of its
own (it kept host root, with no seccomp filter, and lowered only its effective uid for setup) nine of
these thirteen succeeded; each test's docstring says whether it did. One more test does the same from
an untrusted cell of a fork, and checks from the host that the fork's processes hold nothing there.
The sandbox fixture runs every test under both seccomp policies.
"""

from __future__ import annotations

import ast
import ctypes
import os
from collections.abc import Iterator

import pytest

from execrl.sandbox import CellResult, Sandbox, Session, SessionLimits, SessionTemplate
from execrl.sandbox.host.cgroups import CgroupSlot

LIMITS = SessionLimits(cell_timeout_s=10, memory_mb=128, max_processes=16)

# The attacker's first move: every id and capability the template's process can take (back).
PRELUDE = """
import ctypes, errno, os, socket
libc = ctypes.CDLL(None, use_errno=True)
for name, ids in (("setresgid", (0, 0, 0)), ("setresuid", (0, 0, 0)), ("setresgid", (-1, 0, -1)),
                  ("setresuid", (-1, 0, -1))):
    try:
        getattr(os, name)(*ids)
    except OSError:
        pass
_header = (ctypes.c_uint32 * 2)(0x20080522, 0)
_caps = (ctypes.c_uint32 * 6)()
if libc.capget(_header, _caps) == 0:
    _caps[0], _caps[3] = _caps[1], _caps[4]  # effective = permitted
    libc.capset(_header, _caps)

def attempt(fn):
    try:
        result = fn()
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))
    return "ok" if result is None else result

def check(rc):
    if rc == -1:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return None

def mount(source, target, fstype, flags, data=None):
    enc = lambda s: None if s is None else s.encode()
    return check(libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)))
"""


@pytest.fixture
def template(sandbox: Sandbox) -> Iterator[SessionTemplate]:
    made = sandbox.open_template(setup=[PRELUDE], limits=LIMITS)
    yield made
    made.close()


def _outcome(template: SessionTemplate, code: str) -> dict[str, str]:
    return _parsed(template.run_setup(code))


def _outcome_of(session: Session, code: str) -> dict[str, str]:
    return _parsed(session.run(code))


def _parsed(result: CellResult) -> dict[str, str]:
    assert result.passed, result
    assert result.value is not None
    outcome = ast.literal_eval(result.value)
    assert isinstance(outcome, dict)
    return outcome


def _refused(outcome: dict[str, str]) -> bool:
    return all(value != "ok" for value in outcome.values())


def test_setup_cannot_read_a_host_file(template: SessionTemplate) -> None:
    """Two routes to ``/etc/shadow``, which is not in the jail: ``open_by_handle_at`` with the file's
    handle on the host's file system (reachable through the bound ``/usr``: the "shocker" escape; the
    handle, here taken on the host, can be guessed) and a device node of the host's root disk, mounted.
    Both read it on main (root with CAP_DAC_READ_SEARCH, CAP_MKNOD and CAP_SYS_ADMIN in the host's user
    namespace)."""
    handle = _host_handle("/etc/shadow")
    if handle is None or os.stat("/usr").st_dev != os.stat("/etc/shadow").st_dev:
        pytest.skip("/etc/shadow has no file handle on the file system of /usr here")
    kind, raw = handle
    disk = os.stat("/").st_dev
    code = f"""
class Handle(ctypes.Structure):
    _fields_ = [("size", ctypes.c_uint), ("kind", ctypes.c_int), ("data", ctypes.c_char * {len(raw)})]
def by_handle():
    usr = os.open("/usr", os.O_RDONLY)
    fd = libc.open_by_handle_at(usr, ctypes.byref(Handle({len(raw)}, {kind}, {raw!r})), os.O_RDONLY)
    check(fd)
    return "read %d bytes" % len(os.read(fd, 4096))
def by_disk():
    os.makedirs("/tmp/dev", exist_ok=True)
    os.makedirs("/tmp/disk", exist_ok=True)
    mount("none", "/tmp/dev", "tmpfs", 0)  # device nodes need a mount without nodev
    os.mknod("/tmp/dev/disk", 0o600 | 0o060000, {disk})
    for fstype in ("ext4", "xfs", "btrfs"):
        for flags in (1, 0):  # read-only, else as the host mounted it (a second mount shares its state)
            if attempt(lambda: mount("/tmp/dev/disk", "/tmp/disk", fstype, flags)) == "ok":
                return "read %d bytes" % len(open("/tmp/disk/etc/shadow", "rb").read())
    raise OSError(errno.EINVAL, "no file system")
{{"handle": attempt(by_handle), "disk": attempt(by_disk), "path": attempt(lambda: open("/etc/shadow").read())}}
"""
    outcome = _outcome(template, code)
    assert _refused(outcome) and not any("read" in value for value in outcome.values()), outcome


def _host_handle(path: str) -> tuple[int, bytes] | None:
    libc = ctypes.CDLL(None, use_errno=True)

    class Handle(ctypes.Structure):
        _fields_ = [("size", ctypes.c_uint), ("kind", ctypes.c_int), ("data", ctypes.c_char * 128)]

    handle, mount_id = Handle(128, 0), ctypes.c_int()
    if libc.name_to_handle_at(-100, path.encode(), ctypes.byref(handle), ctypes.byref(mount_id), 0) != 0:
        return None
    return handle.kind, handle.data[: handle.size]


def test_setup_cannot_write_a_host_cgroup_file(template: SessionTemplate) -> None:
    """The template mounts the cgroup hierarchy it can see and raises its own memory limit (or any
    other). On main it could (root in the host's user namespace, in a cgroup namespace rooted at the
    execrl process's own cgroup: every slot, and the trainer's own limits, were writable)."""
    slot = template._endpoint.slot
    if slot is None:
        pytest.skip("no cgroups on this host")
    version = slot.version
    code = f"""
def raise_limit():
    os.makedirs("/tmp/cg", exist_ok=True)
    if {version} == 1:
        mount("cgroup", "/tmp/cg", "cgroup", 6, "memory")
        path = [l for l in open("/proc/self/cgroup") if ":memory:" in l][0].split(":", 2)[2].strip()
        names = ["memory.memsw.limit_in_bytes", "memory.limit_in_bytes"]  # memsw >= memory, always
    else:
        mount("cgroup2", "/tmp/cg", "cgroup2", 6)
        path = open("/proc/self/cgroup").read().split("::", 1)[1].strip()
        names = ["memory.max"]
    for name in names:
        if os.path.exists("/tmp/cg" + path.rstrip("/") + "/" + name):
            with open("/tmp/cg" + path.rstrip("/") + "/" + name, "w") as fh:
                fh.write(str(1 << 40))
{{"limit": attempt(raise_limit)}}
"""
    before = _limit(slot)
    try:
        outcome = _outcome(template, code)
        assert _refused(outcome), outcome
        assert _limit(slot) == before
    finally:  # where the attack worked, the slot's next user gets its limit back
        if _limit(slot) != before:
            slot._write_limits(LIMITS.memory_mb, LIMITS.max_processes + 2)


def _limit(slot: CgroupSlot) -> str:
    dirs = slot.dirs
    if "memory" in dirs:
        return (dirs["memory"] / "memory.limit_in_bytes").read_text()
    return (dirs["unified"] / "memory.max").read_text()


def test_setup_cannot_remount_the_system_tree_writable(template: SessionTemplate) -> None:
    """``/usr`` (the host's, bound read-only) remounted read-write would let a setup write host
    binaries. On main the remount succeeded (undone at once here)."""
    code = """
def remount():
    mount(None, "/usr", None, 32 | 4096)  # MS_REMOUNT | MS_BIND: read-write
    mount(None, "/usr", None, 32 | 4096 | 1)  # and back (only reached where the first worked)
{"remount": attempt(remount), "bind": attempt(lambda: mount("/usr", "/tmp", None, 4096))}
"""
    assert _refused(_outcome(template, code))


def test_setup_cannot_setns(template: SessionTemplate) -> None:
    """``setns`` is what an escape does once it holds a host namespace's descriptor (the template is
    given none). On main the call itself passed (root, no filter)."""
    code = """
fd = os.open("/proc/self/ns/net", os.O_RDONLY)
{"net": attempt(lambda: check(libc.setns(fd, 0x40000000))), "any": attempt(lambda: check(libc.setns(fd, 0)))}
"""
    assert _refused(_outcome(template, code))


def test_setup_cannot_signal_a_host_process(template: SessionTemplate) -> None:
    """The test process, the zygote and host pid 1, by pid and by pidfd. Refused on main too: the
    template's own pid namespace hides them (a guard, not a regression test)."""
    zygote = template._pool.process.pid
    code = f"""
out = {{}}
for pid in ({os.getpid()}, {zygote}):
    out["kill %d" % pid] = attempt(lambda: os.kill(pid, signal.SIGCONT))
    out["pidfd %d" % pid] = attempt(lambda: os.close(os.pidfd_open(pid)))
out
"""
    assert _refused(_outcome(template, "import signal\n" + code))


def test_setup_cannot_load_a_kernel_module(template: SessionTemplate) -> None:
    """``init_module`` with a non-module and ``finit_module`` of ``/dev/null``: EPERM (the capability)
    or ENOSYS (a kernel without modules, as here: so this passed on main too)."""
    code = """
null = os.open("/dev/null", os.O_RDONLY)
{"init": attempt(lambda: check(libc.syscall(175, b"\\0" * 64, 64, b""))),
 "finit": attempt(lambda: check(libc.syscall(313, null, b"", 0)))}
"""
    outcome = _outcome(template, code)
    assert set(outcome.values()) <= {"EPERM", "ENOSYS"}, outcome


def test_setup_cannot_become_root_on_the_host(template: SessionTemplate) -> None:
    """After the prelude tried every uid change: the template's process, seen from the host, has no
    uid 0 (on main its saved uid was 0, and ``setresuid(0, 0, 0)`` made it host root), sits in a user
    namespace of its own that maps no host uid 0, and holds no capability beyond the fork path's, none
    it could pass on through ``execve`` (empty bounding set, ``no_new_privs``), under seccomp."""
    assert template.run_setup("os.getresuid()").value != "(0, 0, 0)"
    pid = template._endpoint.worker.pid
    with open(f"/proc/{pid}/status") as fh:
        status = dict(line.rstrip("\n").split(":\t", 1) for line in fh if ":\t" in line)
    assert "0" not in status["Uid"].split(), status["Uid"]
    from execrl.sandbox.zygote import (
        session_userns as userns,  # here: this file also runs against main, to compare
    )

    assert int(status["CapPrm"], 16) & ~userns.KEPT_CAPABILITIES == 0 and int(status["CapBnd"], 16) == 0
    assert status["NoNewPrivs"] == "1" and status["Seccomp"] == "2"
    assert os.stat(f"/proc/{pid}/ns/user").st_ino != os.stat("/proc/self/ns/user").st_ino
    with open(f"/proc/{pid}/uid_map") as fh:
        host_ids = [(int(first), int(count)) for _, first, count in (line.split() for line in fh)]
    assert not any(first <= 0 < first + count for first, count in host_ids), host_ids


def test_setup_cannot_reach_another_template_or_its_forks(sandbox: Sandbox) -> None:
    """Template A's setup takes template B's uid (its user namespace maps the whole pool's block, B's
    slot uid included), then signals B and B's fork by host pid and by pidfd: both lie outside A's pid
    namespace. Refused on main too (the pid namespace): a guard."""
    other = sandbox.open_template(setup=["x = 1"], limits=LIMITS)
    (fork,) = other.fork(1)
    hostile = sandbox.open_template(setup=[PRELUDE], limits=LIMITS)
    try:
        pids = [other._endpoint.worker.pid, *fork._endpoint.slot.pids()] if fork._endpoint.slot else []
        uid = other._pool.uid_base + other._endpoint.worker.slot
        code = f"""
import signal
attempt(lambda: os.setresuid({uid}, {uid}, {uid}))
out = {{"uid": str(os.getuid() == {uid})}}
for pid in {pids or [other._endpoint.worker.pid]}:
    out["kill %d" % pid] = attempt(lambda: os.kill(pid, signal.SIGKILL))
    out["pidfd %d" % pid] = attempt(lambda: os.close(os.pidfd_open(pid)))
out
"""
        outcome = _outcome(hostile, code)
        assert _refused(outcome), outcome
        assert fork.run("x + 1").value == "2"
    finally:
        for session in (hostile, fork, other):
            session.close()


def _host_status(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/status") as fh:
        return dict(line.rstrip("\n").split(":\t", 1) for line in fh if ":\t" in line)


def test_a_forks_cell_is_not_host_root_and_reaches_neither_template_nor_sibling(
    template: SessionTemplate,
) -> None:
    """An untrusted cell of a fork (a model's) runs the prelude (every uid and capability it could take
    back), then acts as host root would on the template and on its sibling: signal and ``ptrace`` them
    by host pid, open them by pidfd, write the template's work directory through ``/proc/<pid>/root``,
    mount, make a user namespace. All refused, and, seen from the host, each of the fork's processes
    has no uid 0 and no capability, and lives in the template's user namespace (which maps no host
    uid 0), not the host's. On main every attack was refused too (the fork's own lock-down), but the
    fork lived in the host's user namespace: a capability its lock-down missed would have been a host
    capability. Only that last assertion failed there."""
    template_pid = template._endpoint.worker.pid
    template_user_ns = os.stat(f"/proc/{template_pid}/ns/user").st_ino
    a, b = template.fork(2)
    try:
        assert a._endpoint.slot is not None and b._endpoint.slot is not None
        targets = [template_pid, *b._endpoint.slot.pids()]
        code = f"""
import signal
exec(compile({PRELUDE!r}, "<prelude>", "exec"))
out = {{"uid 0": attempt(lambda: os.setresuid(0, 0, 0)),
       "mount": attempt(lambda: mount("none", "/tmp", "tmpfs", 0)),
       "userns": attempt(lambda: check(libc.unshare(0x10000000))),
       "template files": attempt(lambda: open("/proc/{template_pid}/root/tmp/planted", "w").close())}}
for pid in {targets}:
    out["kill %d" % pid] = attempt(lambda: os.kill(pid, signal.SIGKILL))
    out["ptrace %d" % pid] = attempt(lambda: check(libc.ptrace(0x4206, pid, 0, 0)))  # PTRACE_SEIZE
    out["pidfd %d" % pid] = attempt(lambda: os.close(os.pidfd_open(pid)))
out
"""
        outcome = _outcome_of(a, code)
        assert _refused(outcome), outcome
        host_user_ns = os.stat("/proc/self/ns/user").st_ino
        for pid in a._endpoint.slot.pids():
            status = _host_status(pid)
            assert "0" not in status["Uid"].split(), status["Uid"]
            assert {status[f"Cap{kind}"] for kind in ("Inh", "Prm", "Eff", "Bnd", "Amb")} == {"0" * 16}
            assert status["NoNewPrivs"] == "1" and status["Seccomp"] == "2"
            user_ns = os.stat(f"/proc/{pid}/ns/user").st_ino
            assert user_ns == template_user_ns != host_user_ns
        assert b.run("'still here'").value == "'still here'"
    finally:
        for fork in (a, b):
            fork.close()


def test_setup_cannot_write_proc_sys(template: SessionTemplate) -> None:
    """A fresh ``/proc`` (the template's is ``subset=pid``) and a kernel-wide setting opened for writing
    (written with its own value). On main: writable (root)."""
    code = """
def write_sysctl():
    os.makedirs("/tmp/p", exist_ok=True)
    mount("proc", "/tmp/p", "proc", 14)
    path = "/tmp/p/sys/kernel/printk_ratelimit"
    value = open(path).read()
    with open(path, "w") as fh:
        fh.write(value)
{"sysctl": attempt(write_sysctl), "own proc": attempt(lambda: open("/proc/sys/kernel/printk_ratelimit", "w").close())}
"""
    assert _refused(_outcome(template, code))


def test_setup_cannot_ptrace_its_parent(template: SessionTemplate) -> None:
    """A child of the setup attaches to the template's process (pid 1, its parent). On main it could."""
    code = """
r, w = os.pipe()
child = os.fork()
if child == 0:
    result = attempt(lambda: check(libc.ptrace(0x4206, 1, 0, 0)))  # PTRACE_SEIZE
    os.write(w, result.encode())
    os._exit(0)
os.close(w)
os.waitpid(child, 0)
{"seize": os.read(r, 100).decode()}
"""
    assert _refused(_outcome(template, code))


def test_setup_cannot_escape_through_proc_root(template: SessionTemplate) -> None:
    """Every process the setup can see through a fresh ``/proc``: none has a root outside the jail (no
    ``/etc/shadow`` under any). Refused on main too (the pid namespace): a guard."""
    code = """
def roots():
    os.makedirs("/tmp/p2", exist_ok=True)
    attempt(lambda: mount("proc", "/tmp/p2", "proc", 14))
    found = []
    for base in ("/proc", "/tmp/p2"):
        names = os.listdir(base) if os.path.isdir(base) else []
        for pid in (p for p in names if p.isdigit()):
            if os.path.exists(f"{base}/{pid}/root/etc/shadow"):
                found.append(pid)
    return "found %s" % found if found else None
{"root": attempt(roots), "pid 1": attempt(lambda: open("/proc/1/root/etc/shadow").read())}
"""
    outcome = _outcome(template, code)
    assert not outcome["root"].startswith("found") and outcome["pid 1"] != "ok", outcome


def test_setup_cannot_open_a_raw_socket(template: SessionTemplate) -> None:
    """Packet and raw IP sockets, and netlink (the route to netfilter in a network namespace). On main
    all three opened (root with CAP_NET_RAW, no filter)."""
    code = """
{"packet": attempt(lambda: socket.socket(17, socket.SOCK_RAW, 0).close()),
 "raw": attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, 1).close()),
 "netlink": attempt(lambda: socket.socket(16, socket.SOCK_RAW, 12).close())}
"""
    assert _refused(_outcome(template, code))


def test_setup_cannot_chroot(template: SessionTemplate) -> None:
    """The classic way back out of a chroot (chroot into a subdirectory, walk up, chroot there): it
    cannot leave the jail's mount namespace even on main, where ``chroot`` itself passed (root)."""
    code = """
def out():
    os.makedirs("/tmp/c", exist_ok=True)
    here = os.open("/", os.O_RDONLY)
    check(libc.chroot(b"/tmp/c"))
    os.fchdir(here)
    for _ in range(64):
        os.chdir("..")
    check(libc.chroot(b"."))
    return "escaped" if os.path.exists("/etc/shadow") else None
{"chroot": attempt(out)}
"""
    assert _refused(_outcome(template, code))
