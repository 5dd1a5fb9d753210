"""A session template in a user namespace of its own (jail side): no host privilege in the template.

Why. A template's setup cells come from task files, and task files from imported datasets: "trusted"
is thin. It used to keep host root (saved uid 0, every capability, no seccomp filter) because building
its forks' jails needs namespaces, mounts and ``setuid``; a malicious setup cell could mount the host's
disk, remount ``/usr`` writable or rewrite its cgroup limits (``tests/security/test_template_hazards.py``).

How. The zygote (host root) clones the template straight into a new *user* namespace together with its
pid, mount, ipc, uts and cgroup namespaces, which that user namespace then owns, and writes its maps
itself (``write_maps``): the pool's block of uids, each to itself (and the gids alike, ``setgroups``
denied), nothing else, so host uid 0 has no name inside and no process there is ever root (an
``execve`` grants no capability; ``setuid(0)`` fails). The template becomes its slot's uid (``become``)
and holds capabilities only inside its user namespace, and only those its forks' jails need
(``KEPT_CAPABILITIES``: ``CAP_SYS_ADMIN`` for their namespaces and mounts, ``CAP_SETUID``/``SETGID`` for
their uids, ``CAP_CHOWN``/``FOWNER``/``DAC_OVERRIDE`` to copy the work directory to them), with an empty
bounding set, ``no_new_privs``, not dumpable, under a seccomp filter of its own (``lock_down``:
``seccomp.build_filter(template=True)``, the deny list but for the fork path's ``mount``, ``umount2``,
``unshare`` and ``clone``, each with that path's arguments only). Host capabilities it has none: the
kernel checks those in the host's user namespace.
The fork path runs as before (``session_fork.py``): each fork's namespaces belong to the template's user
namespace, it mounts its own ``/proc`` and work directory there and drops to its slot's uid. The
parent moves every process into its cgroups (host cgroup files are host root's, which no process in
the namespace can write).

Two details the kernel imposes. A proc is mounted in a user namespace only where a proc is visible
already (``mount_too_revealing``), and the skeleton has none: a second mount namespace of the zygote
(``template_root``, made once) holds a proc of an empty pid namespace, whose process ended, on
``jail.TEMPLATE_PROC``; templates are cloned from it (the template and its forks see it, mounted
``subset=pid`` and listing nothing: no process lives in that pid namespace; they cannot unmount it,
it is locked). And mounts copied into a less privileged mount namespace are locked: the template's own
``/proc`` and work directory are mounted from inside its user namespace, so a fork, whose mount
namespace the same user namespace owns, can still detach them.

What a malicious setup cell can do: everything the template's process can, since setup runs in it (the
effective set is emptied for setup cells, but the permitted set stays, as the saved uid did before): it
can corrupt its own forks' initial state and whatever they inherit, make them skip their lock-down or
share a channel (the fork path is code in its process), use the kept capabilities inside its own user
namespace (new pid, mount, ipc, uts and network namespaces of its own; mount file systems a user
namespace may mount: tmpfs, proc, cgroup views of its own slot, overlayfs; the kernel code behind
them is reachable, the user-namespace attack surface), use its slot's CPU, memory and processes, and
take any uid of the pool's block (its forks need theirs mapped), other sandboxes' uids included:
what keeps it from signalling their processes is its pid namespace, which shows none of them.
What it cannot do: anything that needs a capability in the host's user namespace (read host files
outside the jail, mount a host disk, remount the read-only system tree, write host cgroup files or
``/proc/sys``, load modules, change the clock), become host uid 0, ``setns``, ``ptrace``, ``chroot``,
open a socket other than ``AF_UNIX`` (seccomp), see or signal any process outside its pid namespace
(the host, other templates and their forks, sessions, runs), or make a user namespace. Its forks
belong to the same task: a setup that lowers their rewards could have set that task's tests.

Limits: a host without user namespaces (``user.max_user_namespaces`` 0, or a container runtime's
seccomp profile refusing ``CLONE_NEWUSER``) cannot open templates: ``clone`` says so, and there is no
fallback to a privileged template. Sessions and runs do not need user namespaces.
"""

from __future__ import annotations

import errno
import os
import signal

from execrl.sandbox.zygote import jail, linux, seccomp

# Annotations only (the zygote stays lean, see ``child.py``).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from execrl.sandbox.zygote.jail import JailSpec

CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_FOWNER, CAP_SETGID, CAP_SETUID, CAP_SYS_ADMIN = 0, 1, 3, 6, 7, 21
KEPT_CAPABILITIES = sum(
    1 << cap for cap in (CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_FOWNER, CAP_SETGID, CAP_SETUID, CAP_SYS_ADMIN)
)
LAST_CAPABILITY = 63  # the bounding set is emptied up to the kernel's last (EINVAL past it)

_filters: list[seccomp.PreparedFilter] = []  # built in the zygote before the first template's clone
_roots: list[int] = []  # the zygote's own mount namespace and the template one (``template_root``)


def prepare_filter() -> None:
    """In the zygote, once: the template's filter, inherited by every template it clones. The deny
    list's variant under both policies: a per-language allow list is for the cells of sessions and forks
    (a setup may use, say, System V shared memory, which each fork then gets a private copy of)."""
    if not _filters:
        _filters.append(seccomp.PreparedFilter(seccomp.build_filter(template=True)))


def template_root(host_proc: int) -> tuple[int, int]:
    """In the zygote, once: (its mount namespace, a copy of it with a proc of an empty pid namespace on
    ``jail.TEMPLATE_PROC``), as descriptors; ``host_proc`` is the host's ``/proc``, opened before the
    zygote pivoted."""
    if not _roots:
        flags = os.O_RDONLY | os.O_CLOEXEC
        main = os.open("self/ns/mnt", flags, dir_fd=host_proc)
        linux.unshare(linux.CLONE_NEWNS)
        try:
            _mount_empty_proc(jail.TEMPLATE_PROC)
            _roots.extend((main, os.open("self/ns/mnt", flags, dir_fd=host_proc)))
        finally:
            _enter(main)
    return _roots[0], _roots[1]


def _mount_empty_proc(path: str) -> None:
    """A proc of a new pid namespace on ``path``, mounted by that namespace's only process, which then
    exits: the proc stays, listing no process."""
    pid = linux.clone_process(linux.CLONE_NEWPID)
    if pid == 0:
        try:
            flags = linux.MS_NOSUID | linux.MS_NODEV | linux.MS_NOEXEC
            linux.mount("proc", path, "proc", flags, "subset=pid")
            os._exit(0)
        finally:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    if status != 0:
        raise OSError(errno.EPERM, f"could not mount an empty proc on {path} (status {status})")


def clone(flags: int, host_proc: int, uids: tuple[int, int]) -> tuple[int, int]:
    """In the zygote: clone a template into a new user namespace, with ``flags``' other namespaces, from
    the template mount namespace; write its maps (``uids``: first uid of the pool's block and how many)
    before it runs. Returns ``(pid, fd)``: in the template ``(0, the descriptor to wait on)``, in the
    zygote ``(pid, -1)``."""
    main, template = template_root(host_proc)
    ready_r, ready_w = os.pipe()
    linux.setns(template, linux.CLONE_NEWNS)
    try:
        pid = linux.clone_process(flags | linux.CLONE_NEWUSER)
    except OSError as exc:
        _enter(main)
        for fd in (ready_r, ready_w):
            os.close(fd)
        # No fallback to a template with host privileges: the template is refused instead.
        message = f"a session template needs a user namespace of its own ({exc.strerror}; see sysctl "
        raise OSError(exc.errno, message + "user.max_user_namespaces)") from exc
    if pid == 0:
        os.close(ready_w)
        return 0, ready_r
    _enter(main)
    os.close(ready_r)
    try:
        write_maps(host_proc, pid, uids)
        os.write(ready_w, b"1")
    except OSError:
        os.kill(pid, signal.SIGKILL)  # reaped by the zygote's loop, as any child
        raise
    finally:
        os.close(ready_w)
    return pid, -1


def _enter(mount_ns: int) -> None:
    linux.setns(mount_ns, linux.CLONE_NEWNS)
    os.chdir("/")


def write_maps(host_proc: int, pid: int, uids: tuple[int, int]) -> None:
    """The template's uid and gid maps: the pool's block, each id to itself; ``setgroups`` denied."""
    first, count = uids
    line = f"{first} {first} {count}\n"
    for name, text in (("uid_map", line), ("setgroups", "deny"), ("gid_map", line)):
        fd = os.open(f"{pid}/{name}", os.O_WRONLY | os.O_CLOEXEC, dir_fd=host_proc)
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)


def become(ready: int, uid: int) -> None:
    """In the template, first: wait until the zygote wrote the maps, then take the slot's uid and gid
    for good. No uid 0 is mapped, so the capabilities the clone gave stay (the kernel drops them when
    root's uid is left, and there is no root here)."""
    if os.read(ready, 1) != b"1":
        os._exit(1)
    os.close(ready)
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)


def lock_down(spec: JailSpec) -> None:
    """In the template, once its ``/proc`` and work directory are mounted: hard rlimits, an empty
    bounding set, only ``KEPT_CAPABILITIES`` (``forking.template_main`` makes them not effective while
    setup cells run, ``effective``), ``no_new_privs``, not dumpable, the template's seccomp filter."""
    jail._set_hard_limits()
    for cap in range(LAST_CAPABILITY + 1):
        try:
            linux.prctl(linux.PR_CAPBSET_DROP, cap)
        except OSError as exc:
            if exc.errno != errno.EINVAL:
                raise
            break
    linux.set_capabilities(KEPT_CAPABILITIES, KEPT_CAPABILITIES)
    linux.prctl(linux.PR_SET_NO_NEW_PRIVS, 1)
    linux.prctl(linux.PR_SET_DUMPABLE, 0)
    for prepared in _filters:
        prepared.install()


def effective(on: bool) -> None:
    """The kept capabilities effective (building a fork) or not (setup cells: a barrier against the
    setup's accidents only, since the permitted set stays)."""
    linux.set_capabilities(KEPT_CAPABILITIES, KEPT_CAPABILITIES if on else 0)
