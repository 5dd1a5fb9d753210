"""Per-execution isolation: what a freshly forked worker does before it parks (runs in the zygote's child).

Sequence for the strict ("namespace") backend, all with direct system calls:

1. Once, at start, the zygote moves into a private mount namespace whose root is a read-only skeleton
   (``build_template_root``): a small tmpfs with read-only, nosuid, nodev binds of ``/usr`` (and
   ``/bin``/``/lib*`` as the host has them), the host Python's prefix (only that directory: the rest of
   ``/root`` stays invisible), ``/etc/ld.so.cache`` (nothing else of ``/etc``: no passwd, no shadow),
   ``/dev/{null,zero,random,urandom}``, empty ``/proc`` and ``/tmp``; no ``/sys``; the JDK's
   ``/etc/java-*-openjdk`` and Debian's ``/etc/alternatives`` when present (``toolchain_config_dirs``).
2. Per execution, the zygote clones ``P`` straight into new pid/mount/ipc/uts/cgroup namespaces
   (``linux.clone_process``), inheriting its slot's empty network namespace (made once per slot, see
   ``make_network_namespaces``): ``P`` is pid 1 of its pid namespace and its mount namespace is a private
   copy of the skeleton, on which it mounts a fresh ``/proc`` of its pid namespace (``subset=pid``: no
   host-wide files) and the work directory ``/tmp``: a tmpfs of its own with ``size=`` and
   ``nr_inodes=`` (owned by the sandbox uid; also ``$HOME``). The parent moves ``P`` into its slot's
   cgroups before handing it a job.
3. Privileges: raise-able rlimits are capped (core 0), the capability bounding set is emptied, groups
   cleared, uid/gid set to the slot's own unprivileged id (one per concurrent sandbox, so RLIMIT_NPROC
   and signals cannot reach a neighbour), for the harness and the candidate alike
   (``_drop_privileges``), all capabilities cleared,
   ``PR_SET_NO_NEW_PRIVS`` (setuid bits and file capabilities stop working), ``PR_SET_DUMPABLE=0`` (the
   candidate cannot open ``/proc/1/fd``/``mem`` of the harness) and the seccomp filter (``seccomp.py``)
   is installed.

No user namespace: we are root already, so mapping ids would only cost a few writes per sandbox and add
attack surface (user-namespace-gated kernel code); the unprivileged uid and the empty bounding set give
the same effect. The net namespace only has ``lo``, left down; seccomp additionally refuses every socket
family but ``AF_UNIX``.

The "unisolated" backend only applies rlimits, a private temp directory and (when present) cgroups: it
is NOT a security boundary.
"""

from __future__ import annotations

import os
import resource
import signal

from execrl.sandbox.zygote import linux, seccomp
from execrl.sandbox.zygote.child import cap_rlimit

ROOT_MOUNT = "/tmp"  # where the new root is assembled, inside the private mount namespace
WORKDIR = "/tmp"  # the work directory, as the candidate sees it
DEVICES = ("null", "zero", "random", "urandom")
TOP_LEVEL_LINKS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
# An empty directory of the skeleton. In a session template's mount namespace a proc of an empty pid
# namespace sits on it, because the kernel mounts a proc in a user namespace only where one is visible
# already (``zygote/session_userns.py``); every other sandbox sees the empty directory.
TEMPLATE_PROC = "/.template-proc"
# The worker is cloned straight into these, from the zygote, which lives in the template mount namespace.
# No CLONE_NEWNET: the worker joins its slot's network namespace, made once (``make_network_namespaces``);
# CLONE_FLAGS_OWN_NET is the fallback for a slot that has none.
CLONE_FLAGS = (
    linux.CLONE_NEWNS | linux.CLONE_NEWPID | linux.CLONE_NEWIPC | linux.CLONE_NEWUTS | linux.CLONE_NEWCGROUP
)
CLONE_FLAGS_OWN_NET = CLONE_FLAGS | linux.CLONE_NEWNET
# Hard rlimits set while still root; the harness lowers them to the request's values (allowed unprivileged).
MAX_OPEN_FILES = 65536
MAX_FILE_BYTES = 4096 << 20
MAX_PROCESSES = 4096
ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "PYTHONHASHSEED": "0",
    "PYTHONDONTWRITEBYTECODE": "1",
    "TZ": "UTC",
    "HOME": WORKDIR,
    "TMPDIR": WORKDIR,
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    # One thread per BLAS/OpenMP pool: the python-data zygote imports numpy before it forks and must stay
    # single-threaded, and every thread counts against the sandbox's process limit.
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}


class JailSpec:
    """Everything the worker needs to isolate itself (sent by the parent with each spawn command).

    A plain class, not a dataclass or NamedTuple: ``dataclasses`` pulls in ``inspect``, ``typing`` adds
    ~2 MB, and every module the zygote imports makes every fork of it slower.
    """

    __slots__ = ("isolate", "uid", "slot", "workdir_mb", "workdir_inodes", "seccomp_filters", "role")

    def __init__(
        self,
        *,
        isolate: bool,
        uid: int,
        slot: int,
        workdir_mb: int,
        workdir_inodes: int,
        seccomp_filters: seccomp.Filters,
        role: str = "run",
    ) -> None:
        """``role``: ``"run"`` (the harness, ``harness.main``), ``"session"`` or ``"template"``
        (``zygote/session_worker.py``; a template runs in a user namespace of its own and keeps the capabilities
        its forks' jails need there, ``zygote/session_userns.py``)."""
        self.role = role
        self.isolate = isolate
        self.uid = uid
        self.slot = slot
        self.workdir_mb = workdir_mb
        self.workdir_inodes = workdir_inodes
        self.seccomp_filters = seccomp_filters


def make_network_namespaces(count: int) -> list[int]:
    """Run once, in the zygote, before it pivots (it needs the host's ``/proc``): ``count`` empty network
    namespaces (only ``lo``, down), one per sandbox slot, as open descriptors. The zygote stays in the
    last one made and later ``setns``es into a slot's namespace right before cloning that slot's worker
    (it never needs a network itself).

    Why: a fresh network namespace per worker was the most expensive namespace (about 0.5 ms of wall
    time and 1 ms of CPU per execution, much of it in the kernel's serialised set-up and RCU-deferred
    tear-down). Each worker is cloned into its slot's namespace instead. One namespace per slot, not one
    for all: abstract Unix sockets (and socket autobind names) are scoped by network namespace, so two
    sandboxes that run at the same time never share one; a slot runs one execution at a time, and a
    socket's abstract name dies with the last process holding the socket, which the slot's janitor
    waits for before the slot is reused.
    """
    fds = []
    for _ in range(count):
        linux.unshare(linux.CLONE_NEWNET)
        fds.append(os.open("/proc/self/ns/net", os.O_RDONLY | os.O_CLOEXEC))
    return fds


def _ro_bind(source: str, target: str) -> None:
    linux.mount(source, target, None, linux.MS_BIND | linux.MS_REC)
    flags = linux.MS_BIND | linux.MS_REMOUNT | linux.MS_RDONLY | linux.MS_NOSUID | linux.MS_NODEV
    linux.mount(None, target, None, flags)


def _touch(path: str) -> None:
    with open(path, "w"):
        pass


def build_template_root(
    python_prefix: str, packages_dir: str | None = None, ro_dirs: tuple[str, ...] = ()
) -> None:
    """Run once, in the zygote: move it into a private mount namespace whose root is the read-only
    skeleton every sandbox shares (``/usr``, the Python prefix, devices, empty ``/proc`` and ``/tmp``),
    plus, for a runtime with packages (``runtimes.py``), its packages directory, read-only like the rest,
    and ``ro_dirs`` (host directories a toolchain reads: Go's warm build cache, ``gocache.py``).

    Each worker is then cloned with a new mount namespace, which copies this small tree; the worker only
    mounts its own ``/proc`` and work directory. Building the tree per worker instead (about ten mounts,
    a ``pivot_root`` and detaching a copy of every host mount) cost about 1 ms of CPU per execution.
    """
    root = ROOT_MOUNT
    linux.unshare(linux.CLONE_NEWNS)
    linux.mount(None, "/", None, linux.MS_REC | linux.MS_PRIVATE)
    linux.mount(
        "execrl-root", root, "tmpfs", linux.MS_NOSUID | linux.MS_NODEV, "size=1m,nr_inodes=512,mode=755"
    )
    for name in ("usr", "etc", "proc", "dev", "tmp", ".old", TEMPLATE_PROC.lstrip("/")):
        os.mkdir(f"{root}/{name}")
    _ro_bind("/usr", f"{root}/usr")
    for name in TOP_LEVEL_LINKS:
        host = f"/{name}"
        if os.path.islink(host):
            os.symlink(os.readlink(host), f"{root}/{name}")
        elif os.path.isdir(host):
            os.mkdir(f"{root}/{name}")
            _ro_bind(host, f"{root}/{name}")
    if os.path.exists("/etc/ld.so.cache"):
        _touch(f"{root}/etc/ld.so.cache")
        _ro_bind("/etc/ld.so.cache", f"{root}/etc/ld.so.cache")
    for host in toolchain_config_dirs():
        os.makedirs(f"{root}{host}")
        _ro_bind(host, f"{root}{host}")
    prefix = os.path.realpath(python_prefix)
    if not prefix.startswith("/usr/"):
        os.makedirs(f"{root}{prefix}", exist_ok=True)
        _ro_bind(prefix, f"{root}{prefix}")
    for host in (packages_dir, *ro_dirs) if packages_dir is not None else ro_dirs:
        os.makedirs(f"{root}{host}", exist_ok=True)
        _ro_bind(host, f"{root}{host}")
    _add_devices(root)
    os.chdir(root)
    linux.pivot_root(".", ".old")
    os.chdir("/")
    linux.umount2("/.old", linux.MNT_DETACH)
    os.rmdir("/.old")
    ro_flags = linux.MS_REMOUNT | linux.MS_BIND | linux.MS_RDONLY | linux.MS_NOSUID | linux.MS_NODEV
    linux.mount(None, "/", None, ro_flags)


def toolchain_config_dirs() -> list[str]:
    """Host configuration directories a toolchain under ``/usr`` cannot start without, bound read-only
    at the same path: Debian's OpenJDK links its ``lib/jvm.cfg`` and ``conf/`` into
    ``/etc/java-<version>-openjdk`` (the JVM's own settings: no credentials, no host identity), and
    ``/etc/alternatives`` holds the links Debian's ``update-alternatives`` resolves ``/usr/bin/awk``,
    ``which``, ``cc``, ``java``... through (links into ``/usr`` and nothing else, checked by
    ``tests/integration/test_sandbox_drop_in.py``; without it ``awk`` was "command not found" in Bash).
    Nothing else of ``/etc`` is visible."""
    try:
        names = os.listdir("/etc")
    except FileNotFoundError:
        return []
    java = [f"/etc/{name}" for name in names if name.startswith("java-") and name.endswith("-openjdk")]
    alternatives = ["/etc/alternatives"] if "alternatives" in names else []
    return sorted(java + alternatives)


def _add_devices(root: str) -> None:
    for name in DEVICES:
        _touch(f"{root}/dev/{name}")
        linux.mount(f"/dev/{name}", f"{root}/dev/{name}", None, linux.MS_BIND)
    links = {"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1"}
    links["stderr"] = "/proc/self/fd/2"
    for name, target in links.items():
        os.symlink(target, f"{root}/dev/{name}")


def _mount_own(spec: JailSpec) -> None:
    """In the worker's copy of the template: a /proc of its pid namespace and its own work directory.

    ``subset=pid``: only the process directories (and ``self``/``thread-self``), none of the host-wide
    files (``/proc/cmdline``, ``/proc/sys``, the boot id, ``/proc/locks``, ``/proc/meminfo``...)."""
    flags = linux.MS_NOSUID | linux.MS_NODEV | linux.MS_NOEXEC
    linux.mount("proc", "/proc", "proc", flags, "subset=pid")
    options = (
        f"size={spec.workdir_mb}m,nr_inodes={spec.workdir_inodes},mode=700,uid={spec.uid},gid={spec.uid}"
    )
    linux.mount("execrl-work", WORKDIR, "tmpfs", linux.MS_NOSUID | linux.MS_NODEV, options)


def _set_hard_limits() -> None:
    cap_rlimit(resource.RLIMIT_CORE, 0)
    cap_rlimit(resource.RLIMIT_NOFILE, MAX_OPEN_FILES)
    cap_rlimit(resource.RLIMIT_FSIZE, MAX_FILE_BYTES)
    cap_rlimit(resource.RLIMIT_NPROC, MAX_PROCESSES)


def prepare_zygote(isolate: bool) -> None:
    """Once, in the zygote: what every worker would otherwise redo and inherits instead. Signals back to
    their defaults (the zygote has no terminal and dies with its parent's socket anyway) and, for the
    strict backend, an empty capability bounding set (the zygote never ``execve``s, so it loses nothing:
    its effective capabilities stay). Each redone in a worker cost ~60 page faults (~0.2 ms). No
    supplementary groups either: a session template's user namespace cannot drop them (``setgroups`` is
    denied there), and a host group kept would still grant its file access."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, signal.SIG_DFL)
    if isolate:
        linux.drop_bounding_set()
        os.setgroups([])


def _drop_privileges(spec: JailSpec) -> None:
    """The bounding set is already empty (``prepare_zygote``); setting the uids then clears permitted and
    effective capabilities, and ``capset`` clears them (and inheritable, and with them ambient) explicitly.

    The harness and the candidate share the slot's uid. What a same-uid candidate could do to the
    harness is closed elsewhere: ``prlimit``, ``setpriority``, CPU affinity and scheduling on any pid
    but 0 are refused by seccomp (``seccomp.py`` rule 6); ``ptrace``, ``/proc/1/mem`` and
    ``process_vm_readv`` need the harness to be dumpable (it is not, ``PR_SET_DUMPABLE=0``); as pid 1 of
    its pid namespace it receives no signal it has no handler for. An earlier version gave the harness
    an effective uid of its own as a second wall behind seccomp; measured, it cost about 1 ms of p50 per
    execution inside the jail (interleaved runs of 200 ``print(1)``: 5.37 vs 4.12 ms; cause in the kernel
    not found), a quarter of the whole budget, for a call seccomp already refuses."""
    if os.getgroups():  # none since ``prepare_zygote``; a template's forks could not call it (``setgroups``)
        os.setgroups([])
    os.setresgid(spec.uid, spec.uid, spec.uid)
    os.setresuid(spec.uid, spec.uid, spec.uid)
    linux.clear_all_capabilities()
    linux.prctl(linux.PR_SET_NO_NEW_PRIVS, 1)
    linux.prctl(linux.PR_SET_DUMPABLE, 0)
    spec.seccomp_filters.deny.install()  # the language's allow list is stacked once the job arrived


def isolate_pid1(spec: JailSpec) -> str:
    """Run in ``P`` (pid 1 of the new namespaces, in a copy of the template root): mount its own
    ``/proc`` and work directory, drop privileges (a session template locks down on its own terms after
    this, ``zygote/session_userns.py``). Returns the work directory."""
    os.setsid()
    _mount_own(spec)
    linux.sethostname("sandbox")
    fd = os.open("/dev/null", os.O_RDONLY)
    os.dup2(fd, 0)
    os.close(fd)
    os.chdir(WORKDIR)
    if spec.role != "template":
        lock_down(spec)
    return WORKDIR


def lock_down(spec: JailSpec) -> None:
    """Hard rlimits, then the slot's uid, no capabilities, ``no_new_privs``, not dumpable, seccomp."""
    _set_hard_limits()
    _drop_privileges(spec)


def remount_own(spec: JailSpec) -> None:
    """In a fork of a session template (its own new mount namespace, still holding the template's
    capabilities, inside the template's user namespace, ``zygote/session_userns.py``): detach the template's
    ``/proc`` (which lists the template's pid namespace, every sibling fork included) and work directory,
    and mount this sandbox's own (``zygote/session_fork.py`` copies the files over first)."""
    linux.umount2("/proc", linux.MNT_DETACH)
    linux.umount2(WORKDIR, linux.MNT_DETACH)
    _mount_own(spec)


def isolate_unisolated(spec: JailSpec) -> str:
    """The "unisolated" backend while parked: only session and stdin (signals: ``prepare_zygote``).
    NOT a security boundary."""
    os.setsid()
    fd = os.open(os.devnull, os.O_RDONLY)
    os.dup2(fd, 0)
    os.close(fd)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    return ""


def unisolated_workdir() -> str:
    """Made only once a job arrived, so parked workers leave nothing behind; the parent removes it."""
    import tempfile  # only the unisolated backend needs it; the zygote stays lean

    workdir = tempfile.mkdtemp(prefix="execrl-unisolated-")
    os.chdir(workdir)
    return workdir
