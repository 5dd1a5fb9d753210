"""Session templates and their forks (jail side): one setup, many isolated copy-on-write sessions.

A *template* is pid 1 of a sandbox built like any session's (fresh pid/mount/ipc/uts/cgroup namespaces,
its slot's network namespace, a private tmpfs work directory, cgroups, its slot's uid) inside a user
namespace of its own, where it keeps the few capabilities building a fork's jail needs (namespaces,
mounts, ``setuid``) and none on the host, under a seccomp filter that allows the fork path's calls
(``session_userns.py``: how, and what a malicious setup cell can and cannot do). It runs only *trusted* setup
cells (the task's, never a model's: the parent refuses anything else, and refuses setup cells once it
has forked), with no effective capability while they run.

A *fork* is made by the template itself, ``clone`` with new pid, mount, ipc, uts and network namespaces
(owned by the template's user namespace), so its memory is a copy-on-write copy of the template's (a
100 MB dataset is shared, not copied). Before any cell of the fork runs, the fork, still holding the
template's capabilities and running only code of the template (which never ran an untrusted cell),
makes itself a sandbox as separate from its siblings as two independent sandboxes:

1. descriptors: it keeps only the four pipes the parent made for it (received by the template over its
   control socket, ``SCM_RIGHTS``); every descriptor the setup left open is closed. Files of the
   template's work directory are reopened on the fork's private copy, and read-only files of the
   read-only system tree and ``/dev/{null,zero,random,urandom}`` are reopened by path (the same file,
   checked by device and inode), each at the same number, status flags and offset: an open file
   description shared with siblings would let one move another's offset or flags (issue 35). Pipes,
   sockets, socket pairs, memfds, event fds and pidfds made during setup do not survive: they are the
   channels siblings could share.
2. cgroups: it waits until the parent has moved it into its own slot's cgroups (memory, pids, CPU), then
   enters a new cgroup namespace rooted there. Its memory limit bounds what it allocates after the fork;
   the pages it shares with the template stay charged to the template's cgroup (bounded by the
   template's limit), and the template's slot is held until every fork has ended.
3. files: it detaches the template's ``/proc`` (which lists the template's pid namespace, and so every
   sibling) and work directory, mounts its own (``jail.remount_own``) and copies the template's files
   into it, owned by its own uid: no file is shared writable.
4. memory: every shared mapping it inherited (``MAP_SHARED`` file or anonymous memory, memfds, System V
   segments) is replaced by a private copy at the same address, so a write by one sibling is never seen
   by another. Private mappings are copy-on-write already.
5. random state: ``random`` and ``numpy.random``'s global generators are reseeded (the clone is a raw
   system call, so no at-fork hook runs in it while it holds capabilities; the hooks the setup
   registered run once the fork's init starts the interpreter with ``os.fork``, after step 6, as that
   fork's code).
6. privileges: a new session, the hard rlimits, its slot's own uid, no capabilities, ``no_new_privs``,
   not dumpable, the seccomp deny list and Python's allow list (``jail.lock_down``) stacked on the
   template's filter, as every sandbox.

Then it becomes the fork's init and forks its interpreter (``worker.start_kernel``), which continues from
the template's namespace. Siblings are in disjoint pid namespaces (none sees another's pids, so no
signal, ``pidfd_open`` or ``ptrace`` can name one), in disjoint mount, ipc and network namespaces, under
different uids and cgroups. The template itself is outside every fork's pid and mount namespace. All
of this is the template's own code: it holds against untrusted cells of the forks, and against a
malicious setup cell only in so far as ``session_userns.py`` says (such a setup owns its own forks).

Standard library only (the zygote imports this module).
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import json
import os
import re
import select
import socket
import stat
import sys

from execrl.sandbox.zygote import jail, linux, seccomp
from execrl.sandbox.zygote import session_kernel as kernel
from execrl.sandbox.zygote import session_userns as userns
from execrl.sandbox.zygote import session_worker as worker

# Annotations only (the zygote stays lean, see ``child.py``).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, NoReturn

    Reopen = tuple[int, str, int, int, int, tuple[int, int, int] | None]  # see ``_close_inherited``

FORK_FLAGS = seccomp.TEMPLATE_CLONE_FLAGS  # new pid, mount, ipc, uts and network namespaces
SAFE_DEVICES = frozenset(os.makedev(1, minor) for minor in (3, 5, 8, 9))  # null, zero, random, urandom
CHUNK = 1 << 20


def template_main(spec: jail.JailSpec, reader: kernel.Lines, opening: dict[str, Any]) -> NoReturn:
    """The template's loop: setup cells from the job pipe (until the first fork), fork requests from the
    control socket, and the exit of every fork, reported to the parent. The parent has moved it into its
    slot's cgroups (before the warm-start hint it read): a cgroup namespace rooted there, so that a view
    of the cgroup hierarchy it mounts shows its own slot only."""
    linux.unshare(linux.CLONE_NEWCGROUP)
    userns.effective(False)
    worker.write_files(opening)
    namespace = kernel.new_namespace()
    kernel.install_interrupt_handler()
    kernel.send(worker.RESULT_FD, {"kind": "ready"})
    control = socket.socket(fileno=worker.CONTROL_FD)
    forks: dict[int, int] = {}  # pid of each live fork -> its pidfd
    forked = False
    shared: list[tuple[bytes, bytes, bytes, bytes, bytes]] = []
    while True:
        ready = [worker.JOB_FD] if reader.pending() else _wait(control, forks)
        for fd in ready:
            if fd == worker.JOB_FD:
                _setup_cell(reader, namespace, forked)
            elif fd == control.fileno():
                if not forked:  # the setup's objects to the permanent generation: no collection in a
                    gc.collect()  # fork walks (and copy-on-write faults) them, as in the zygote
                    gc.freeze()
                    shared = shared_mappings()
                forked = True
                _fork_request(control, spec, namespace, forks, shared)
            else:
                _reap(control, forks, fd)


def _wait(control: socket.socket, forks: dict[int, int]) -> list[int]:
    poller = select.poll()
    for fd in (worker.JOB_FD, control.fileno(), *forks.values()):
        poller.register(fd, select.POLLIN)
    return [fd for fd, _ in poller.poll()]


def _setup_cell(reader: kernel.Lines, namespace: dict[str, Any], forked: bool) -> None:
    line = reader.next()
    if line is None:  # the parent closed the template: its forks die with its pid namespace
        os._exit(0)
    message = json.loads(line)
    if forked:  # the parent never sends one: state after a fork would differ between siblings
        record = {"status": "error", "type": "SessionError", "message": "the template has forked", "tb": []}
    else:
        record = kernel.run_cell(namespace, message["code"], int(message["i"]), int(message["max_repr"]))
    kernel.send(worker.RESULT_FD, {"kind": "cell", "i": message["i"], **record})


def _reap(control: socket.socket, forks: dict[int, int], pidfd: int) -> None:
    for pid, fd in list(forks.items()):
        if fd == pidfd:
            _, status = os.waitpid(pid, 0)
            os.close(fd)
            del forks[pid]
            control.send(json.dumps({"op": "exited", "pid": pid, "status": status}).encode())


def _threads() -> int:
    return len(os.listdir("/proc/self/task"))


def _fork_request(
    control: socket.socket,
    spec: jail.JailSpec,
    namespace: dict[str, Any],
    forks: dict[int, int],
    shared: list[tuple[bytes, bytes, bytes, bytes, bytes]],
) -> None:
    """One fork: ``{"op": "fork", "i", "child": {...}}`` with its four pipe ends (job read end, result,
    stdout and stderr write ends). Answers ``forked`` with a pidfd of the fork, or ``fork_error``."""
    message, fds, _, _ = socket.recv_fds(control, 1 << 16, 4)
    if not message:
        os._exit(0)
    request = json.loads(message)
    reply: dict[str, Any] = {"op": "fork_error", "i": request["i"]}
    try:
        if len(fds) != 4:
            raise RuntimeError(f"a fork needs 4 descriptors, got {len(fds)}")
        if _threads() != 1:
            raise RuntimeError(
                f"the template runs {_threads()} threads; only a single-threaded process forks"
            )
        userns.effective(True)
        pid = linux.clone_process(FORK_FLAGS)
    except (OSError, RuntimeError) as exc:
        reply["error"] = str(exc)
        pid = -1
    if pid == 0:
        fork_main(request["child"], fds, spec, namespace, shared)
    for fd in fds:
        os.close(fd)
    if pid < 0:
        control.send(json.dumps(reply).encode())
        return
    pidfd = os.pidfd_open(pid)
    forks[pid] = pidfd
    socket.send_fds(control, [json.dumps({"op": "forked", "i": request["i"], "pid": pid}).encode()], [pidfd])


def fork_main(
    spec: dict[str, Any],
    pipes: list[int],
    template: jail.JailSpec,
    namespace: dict[str, Any],
    shared: list[tuple[bytes, bytes, bytes, bytes, bytes]],
) -> NoReturn:
    """The fork, from the clone to its interpreter (see the module docstring for the steps)."""
    report_fd = pipes[1]
    try:
        reopen = _close_inherited(set(pipes))
        _adopt(pipes)
        report_fd = worker.RESULT_FD
        reader = kernel.Lines(worker.JOB_FD)
        if reader.next() != b"go":  # the parent moved this process into its slot's cgroups
            os._exit(1)
        linux.unshare(linux.CLONE_NEWCGROUP)
        own = jail.JailSpec(
            isolate=True,
            uid=int(spec["uid"]),
            slot=int(spec["slot"]),
            workdir_mb=int(spec["workdir_mb"]),
            workdir_inodes=int(spec["workdir_inodes"]),
            seccomp_filters=template.seccomp_filters,
            role="fork",
        )
        cwd = os.getcwd()
        _private_workdir(own)
        os.chdir(cwd if os.path.isdir(cwd) and cwd.startswith(jail.WORKDIR) else jail.WORKDIR)
        _reopen(reopen)
        _privatise_shared_mappings(shared)
        _reseed()
        os.setsid()
        jail.lock_down(own)
        allow = own.seccomp_filters.by_language.get("python")
        if allow is not None:
            allow.install()
        worker.start_kernel(spec["limits"], reader, namespace)
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, which fails the fork
        with contextlib.suppress(OSError):
            kernel.send(report_fd, {"kind": "setup_error", "message": f"{type(exc).__name__}: {exc}"[:4000]})
    finally:
        os._exit(1)


def _close_inherited(keep: set[int]) -> list[Reopen]:
    """Close every descriptor inherited from the template but ``keep``, and note those to open again:
    the template's work-directory files (on the fork's private copy) and the read-only system files and
    harmless devices (the same file again, checked by device and inode). Nothing inherited stays open
    as it is: a descriptor kept across the clone shares its open file description (offset, status
    flags, owner) with the template and every sibling, so one sample's ``lseek``, ``read`` or
    ``F_SETFL`` would move another's, and a later fork would start where a sibling left it
    (issue 35, class 5). Each entry: ``(fd, path, flags, offset, fd flags, identity or None)``."""
    work_dev = os.stat(jail.WORKDIR).st_dev
    reopen: list[Reopen] = []
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd in keep:
            continue
        try:
            info = os.fstat(fd)
            flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        except OSError:  # the descriptor the listing itself used
            continue
        kind = stat.S_IFMT(info.st_mode)
        identity = None
        if kind in (stat.S_IFREG, stat.S_IFDIR) and info.st_dev == work_dev:
            wanted = fd > 4
        else:
            wanted = fd > 4 and _harmless(fd, info, flags)
            identity = (info.st_dev, info.st_ino, info.st_rdev)
        path = os.readlink(f"/proc/self/fd/{fd}") if wanted else ""
        if identity is None and not path.startswith(jail.WORKDIR):
            wanted = False
        if wanted and path.startswith("/") and not path.endswith(" (deleted)"):
            offset = 0  # a directory of the copy lists its entries in an order of its own: from the start
            with contextlib.suppress(OSError):  # a device, or an O_PATH descriptor, has none
                if identity is not None or kind == stat.S_IFREG:
                    offset = os.lseek(fd, 0, os.SEEK_CUR)
            reopen.append((fd, path, flags, offset, fcntl.fcntl(fd, fcntl.F_GETFD), identity))
        os.close(fd)
    return reopen


def _harmless(fd: int, info: os.stat_result, flags: int) -> bool:
    """A read-only file of the read-only system tree, or ``/dev/null``/``zero``/``random``/``urandom``:
    nothing a sibling could write or lock (seccomp refuses locks)."""
    kind = stat.S_IFMT(info.st_mode)
    if kind == stat.S_IFCHR:
        return info.st_rdev in SAFE_DEVICES
    read_only = (flags & os.O_ACCMODE) == os.O_RDONLY
    return kind in (stat.S_IFREG, stat.S_IFDIR) and read_only and bool(os.fstatvfs(fd).f_flag & os.ST_RDONLY)


def _adopt(pipes: list[int]) -> None:
    """The fork's own pipes onto the fixed numbers: job on 3, result on 4, stdout 1, stderr 2."""
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 100) for fd in pipes]
    for fd in pipes:
        os.close(fd)
    for fd, target in zip(high, (worker.JOB_FD, worker.RESULT_FD, 1, 2), strict=True):
        os.dup2(fd, target, inheritable=target <= 2)
        os.close(fd)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)


def _private_workdir(own: jail.JailSpec) -> None:
    """The fork's own tmpfs on the work directory, with a copy of the template's files."""
    old = os.open(jail.WORKDIR, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        jail.remount_own(own)
        new = os.open(jail.WORKDIR, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            _copy_tree(old, new, own.uid)
        finally:
            os.close(new)
    finally:
        os.close(old)


def _copy_tree(source: int, target: int, uid: int) -> None:
    """Copy a directory tree between two open directories without following any link; regular files,
    directories, links and FIFOs (sockets and devices are skipped). Iterative: no recursion limit."""
    stack = [(source, target, False)]
    while stack:
        src, dst, owned = stack.pop()
        try:
            for entry in os.scandir(src):
                pair = _copy_entry(entry.name, src, dst, uid)
                if pair is not None:
                    stack.append((*pair, True))
        finally:
            if owned:
                os.close(src)
                os.close(dst)


def _copy_entry(name: str, src: int, dst: int, uid: int) -> tuple[int, int] | None:
    info = os.stat(name, dir_fd=src, follow_symlinks=False)
    mode = stat.S_IMODE(info.st_mode) & 0o777
    nofollow = os.O_NOFOLLOW | os.O_CLOEXEC
    subdirs = None
    if stat.S_ISDIR(info.st_mode):
        os.mkdir(name, mode, dir_fd=dst)
        flags = os.O_RDONLY | os.O_DIRECTORY | nofollow
        subdirs = (os.open(name, flags, dir_fd=src), os.open(name, flags, dir_fd=dst))
    elif stat.S_ISREG(info.st_mode):
        _copy_file(name, src, dst, mode, info.st_size)
    elif stat.S_ISLNK(info.st_mode):
        os.symlink(os.readlink(name, dir_fd=src), name, dir_fd=dst)
    elif stat.S_ISFIFO(info.st_mode):
        os.mkfifo(name, mode, dir_fd=dst)
    else:
        return None
    os.chown(name, uid, uid, dir_fd=dst, follow_symlinks=False)
    os.utime(name, ns=(info.st_atime_ns, info.st_mtime_ns), dir_fd=dst, follow_symlinks=False)
    return subdirs


def _copy_file(name: str, src: int, dst: int, mode: int, size: int) -> None:
    nofollow = os.O_NOFOLLOW | os.O_CLOEXEC
    source = os.open(name, os.O_RDONLY | os.O_NONBLOCK | nofollow, dir_fd=src)
    try:
        target = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | nofollow, mode, dir_fd=dst)
        try:
            while os.sendfile(target, source, None, CHUNK) > 0:
                pass
        finally:
            os.close(target)
    finally:
        os.close(source)


_NOT_REOPENED = os.O_CREAT | os.O_EXCL | os.O_TRUNC | os.O_ASYNC  # (O_ASYNC cannot be set by open)


def _reopen(reopen: list[Reopen]) -> None:
    """Open again what ``_close_inherited`` noted, at the same numbers, status flags and offsets: a
    work-directory file on the fork's private copy, a system file or device only if its path still
    names the same file (else it stays closed, as a file gone from the copy does)."""
    for fd, path, flags, offset, fd_flags, identity in reopen:
        try:
            new = os.open(path, (flags & ~_NOT_REOPENED) | os.O_NOFOLLOW | os.O_NOCTTY)
        except OSError:
            continue  # gone from the copy (a FIFO's reader, a replaced path): the setup's descriptor ends
        info = os.fstat(new)
        if identity is not None and (info.st_dev, info.st_ino, info.st_rdev) != identity:
            os.close(new)
            continue
        if offset:
            with contextlib.suppress(OSError):
                os.lseek(new, offset, os.SEEK_SET)
        os.dup2(new, fd, inheritable=not fd_flags & fcntl.FD_CLOEXEC)
        os.close(new)


_SHARED = re.compile(rb"^([0-9a-f]+)-([0-9a-f]+) ([r-])([w-])([x-])s ", re.MULTILINE)


def shared_mappings() -> list[tuple[bytes, bytes, bytes, bytes, bytes]]:
    """The calling process's shared mappings (start, end, r, w, x). Read once by the template, at its
    first fork, and passed on in memory: its mappings no longer change (it runs no more setup cells),
    and reading ``/proc/self/maps`` of a process with numpy loaded cost ~2 ms of CPU per fork."""
    with open("/proc/self/maps", "rb") as fh:
        found: list[tuple[bytes, bytes, bytes, bytes, bytes]] = _SHARED.findall(fh.read())
    return found


def _privatise_shared_mappings(shared: list[tuple[bytes, bytes, bytes, bytes, bytes]]) -> None:
    """Replace every shared mapping by a private anonymous one holding the same bytes. Read through
    ``/proc/self/mem``, which answers EIO (not SIGBUS) for pages past the end of a mapped file."""
    if not shared:
        return
    # Not dumpable (as its template), the fork's /proc files belong to host root, whom its user namespace
    # does not map: dumpable only while it opens its own memory, before any cell.
    linux.prctl(linux.PR_SET_DUMPABLE, 1)
    try:
        mem = os.open("/proc/self/mem", os.O_RDWR | os.O_CLOEXEC)
    finally:
        linux.prctl(linux.PR_SET_DUMPABLE, 0)
    try:
        for low, high, read, write, execute in shared:
            start, end = int(low, 16), int(high, 16)
            prot = (read == b"r") | (write == b"w") << 1 | (execute == b"x") << 2
            data = _read_memory(mem, start, end - start)
            linux.map_anonymous_fixed(start, end - start, prot)
            for offset in range(0, len(data), CHUNK):
                os.pwrite(mem, data[offset : offset + CHUNK], start + offset)
    finally:
        os.close(mem)


def _read_memory(mem: int, start: int, length: int) -> bytes:
    out = bytearray(length)
    page = 4096
    for offset in range(0, length, CHUNK):
        size = min(CHUNK, length - offset)
        try:
            out[offset : offset + size] = os.pread(mem, size, start + offset).ljust(size, b"\0")
        except OSError:  # some page is not backed (past the end of a file): read page by page
            for sub in range(offset, offset + size, page):
                with contextlib.suppress(OSError):
                    out[sub : sub + page] = os.pread(mem, page, start + sub).ljust(page, b"\0")
    return bytes(out)


def _reseed() -> None:
    """Fresh global random state per fork, from 256 bits of the OS's entropy (the clone runs no at-fork
    hook, so ``random`` and ``numpy.random`` would otherwise give every sibling the same numbers).
    numpy's from an array of words: its entropy-pool seeding cost ~1 ms per fork, this ~5 us."""
    module = sys.modules.get("random")
    if module is not None:
        module.seed(os.urandom(32))
    module = sys.modules.get("numpy.random")
    if module is not None:
        module.seed([int.from_bytes(os.urandom(4), "little") for _ in range(8)])
