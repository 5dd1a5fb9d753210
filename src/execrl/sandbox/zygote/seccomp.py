"""Hand-assembled classic-BPF seccomp filters, installed via prctl: a deny list with argument checks,
and per-language allow lists stacked on it (``SandboxConfig.seccomp_policy``).

The deny list (``build_filter``) is installed in every worker while it parks, under both policies: the
system calls that matter for escapes and host interference are a short, well-known list (Docker's and
isolate's defaults; research notes, hazards 11, 17, 18), and some need argument checks. Under the
``"allow"`` policy the harness then stacks the job's language's allow list (``build_allow_filter``,
lists in ``syscalls.py``): the kernel runs both filters and the stricter answer wins, so the allow list
only has to say which numbers pass; everything else fails with ENOSYS before reaching its kernel code.
Why both: a deny list cannot stop a bug in a call nobody thought to list (shared kernel); an allow list
alone would have to repeat every argument check. Cost: ``execrl bench seccomp``.

Deny-list program layout (every jump is forward, as cBPF requires; ``_rule`` computes the offsets):

1. ``arch != AUDIT_ARCH_X86_64`` -> kill the process (blocks the 32-bit ``int 0x80`` entry).
2. ``nr >= 0x40000000`` (x32 ABI numbers) -> kill the process.
3. ``socket(family, ...)`` and ``socketpair(family, ...)``: allowed only for ``AF_UNIX``; anything else ->
   EPERM (before the kernel reaches the family's create routine).
4. ``ioctl(fd, TIOCSTI | TIOCLINUX, ...)`` -> EPERM (terminal injection).
5. ``clone(flags)`` with any namespace flag -> EPERM; ``clone3`` -> ENOSYS (its flags sit behind a
   pointer BPF cannot read; the C library then falls back to ``clone``).
6. Calls that act on another process's limits or scheduling are allowed only on the caller itself
   (pid/who 0): ``prlimit64``, ``setpriority``, ``sched_setaffinity``/``setscheduler``/``setparam``/
   ``setattr``, ``ioprio_set``; else EPERM. The harness shares the candidate's uid, so this rule is what
   keeps the harness's limits and scheduling out of the candidate's reach. ``resource.prlimit`` with
   the caller's own pid instead of 0 is refused too; ``setrlimit``, ``os.nice`` work as usual.
   ``pidfd_open`` of pid 1 (the harness) -> EPERM, so no call that takes a pidfd (``pidfd_send_signal``,
   ``process_madvise``, ``process_mrelease``; ``pidfd_getfd`` is denied outright) can name the harness;
   the harness's own ``pidfd_open`` of its children passes. The other calls that name a process by pid
   need it to be traceable (``kcmp``, ``get_robust_list``, ``move_pages``, ``migrate_pages``: the harness
   is not dumpable), only read (``sched_get*``, ``getpgid``, ``getsid``, ``capget``, ``ioprio_get``), or
   are signals, which pid 1 of a namespace ignores from inside it unless it handles them (it handles
   none); ``kcmp`` and the NUMA calls are not on any allow list either.
7. File locks and change notification, the channels shared read-only files would open between
   concurrent sandboxes (and the host): ``flock`` and ``fcntl`` lock commands (``F_GETLK``,
   ``F_SETLK(W)``, the ``F_OFD_*`` twins) -> ENOLCK, the errno a file system without locking gives;
   ``fcntl(F_NOTIFY)`` (dnotify) and ``F_SETLEASE`` -> EPERM; ``inotify_init(1)`` and ``fanotify_init``
   are in the deny list. BPF cannot see which file a descriptor names, so locks on the sandbox's own
   files are refused too (a program that locks its own files, e.g. SQLite on a file, fails).
8. Denied syscalls (``DENIED_SYSCALLS``) -> EPERM. Everything else is allowed.

Cost: a syscall whose outcome does not depend on its arguments never runs the filter (the kernel's
seccomp action cache); those with argument rules measured about 10 ns more with rules 3-7 than before
them (``fcntl``: 362 -> 371 ns per call, ``getppid``: 263 -> 270 ns; noise of the same size).
The allow list adds one ``prctl`` per execution (stacked once the job names its language, since a
worker is built before that): 60-100 us on a loaded 2-core machine (copy, JIT and the action cache's
walk over every syscall number, which the binary search keeps short: 11 instructions at most for the
123 runs of today's lists); per call, ``getppid`` and ``fcntl`` cost the same with it as without.
``execrl bench seccomp --rounds 4 --executions 300 --cpp-executions 20 --latency-samples 200`` (2026-12-01
07:59, quiet machine, ``docs/evals/bench_seccomp.json``): ``print(1)`` 1.06x the deny list's executions/s
(228 vs 215), p50 5.50 vs 5.27 ms, C++ compile and run 31.5 vs 29.0 exec/s; a run just before with 6 C++
executions gave 1.00x, 6.69 vs 5.60 ms and 27 vs 35 exec/s: the two policies are equal within the noise.
Under load ~20 it was 0.96x.
"""

from __future__ import annotations

import ctypes
import errno
import struct

from execrl.sandbox.zygote import linux, syscalls

POLICIES = ("allow", "deny")  # SandboxConfig.seccomp_policy

AUDIT_ARCH_X86_64 = 0xC000003E
X32_SYSCALL_BIT = 0x40000000

SECCOMP_RET_KILL_PROCESS = 0x80000000
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_ALLOW = 0x7FFF0000

# BPF opcodes.
_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_JSET_K = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_RET_K = 0x06  # BPF_RET | BPF_K
_JA = 0x05  # BPF_JMP | BPF_JA (32-bit offset; the conditional jumps have 8-bit ones)
_MAX_JUMP = 255

# Offsets in struct seccomp_data.
_OFF_NR = 0
_OFF_ARCH = 4
_OFF_ARG0_LO = 16
_OFF_ARG1_LO = 24
_OFF_ARG3_LO, _OFF_ARG3_HI = 40, 44


SYS_IOCTL = 16
SYS_SOCKET = 41
SYS_SOCKETPAIR = 53
SYS_CLONE = 56
SYS_FCNTL = 72
SYS_FLOCK = 73
SYS_SETPRIORITY = 141
SYS_SCHED_SETPARAM = 142
SYS_SCHED_SETSCHEDULER = 144
SYS_IOPRIO_SET = 251
SYS_SCHED_SETAFFINITY = 203
SYS_PRLIMIT64 = 302
SYS_SCHED_SETATTR = 314
SYS_PIDFD_OPEN = 434
SYS_CLONE3 = 435
HARNESS_PID = 1  # the harness is pid 1 of the sandbox's pid namespace
AF_UNIX = 1
TIOCSTI = 0x5412
TIOCLINUX = 0x541C
IOPRIO_WHO_PROCESS = 1
# fcntl commands: locks (F_GETLK, F_SETLK, F_SETLKW, F_OFD_GETLK, F_OFD_SETLK, F_OFD_SETLKW) and the rest.
FCNTL_LOCK_COMMANDS = (5, 6, 7, 36, 37, 38)
F_SETLEASE = 1024
F_NOTIFY = 1026

# name -> x86_64 number; each is denied with EPERM.
DENIED_SYSCALLS: dict[str, int] = {
    "ptrace": 101,
    "syslog": 103,
    "vhangup": 153,
    "modify_ldt": 154,
    "pivot_root": 155,
    "adjtimex": 159,
    "chroot": 161,
    "acct": 163,
    "settimeofday": 164,
    "mount": 165,
    "umount2": 166,
    "swapon": 167,
    "swapoff": 168,
    "reboot": 169,
    "iopl": 172,
    "ioperm": 173,
    "init_module": 175,
    "delete_module": 176,
    "quotactl": 179,
    "lookup_dcookie": 212,
    "clock_settime": 227,
    "kexec_load": 246,
    "add_key": 248,
    "request_key": 249,
    "keyctl": 250,
    "unshare": 272,
    "perf_event_open": 298,
    "name_to_handle_at": 303,
    "open_by_handle_at": 304,
    "clock_adjtime": 305,
    "setns": 308,
    "process_vm_readv": 310,
    "process_vm_writev": 311,
    "finit_module": 313,
    "kexec_file_load": 320,
    "bpf": 321,
    "userfaultfd": 323,
    "inotify_init": 253,
    "inotify_init1": 294,
    "fanotify_init": 300,
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "pidfd_getfd": 438,
    "mount_setattr": 442,
}

# The namespace bits of clone(2)'s flags (CLONE_NEWTIME is 0x80 but only reachable via clone3/unshare).
CLONE_NAMESPACE_MASK = linux.NAMESPACE_FLAGS

# A session template's filter (``build_filter(template=True)``, ``zygote/session_userns.py``): the deny list
# but for what the fork path of ``zygote/session_fork.py`` needs, each only with that path's arguments:
# ``mount`` with the flags of a fork's ``/proc`` or work directory (no bind, remount, move or
# propagation change), ``umount2`` detaching, ``unshare`` of a cgroup namespace alone, and ``clone``
# with a fork's namespaces (never a user or cgroup namespace).
TEMPLATE_CALLS = {"mount": 165, "umount2": 166, "unshare": 272}
TEMPLATE_MOUNT_FLAGS = (
    linux.MS_NOSUID | linux.MS_NODEV,
    linux.MS_NOSUID | linux.MS_NODEV | linux.MS_NOEXEC,
)
TEMPLATE_CLONE_FLAGS = (
    linux.CLONE_NEWNS | linux.CLONE_NEWPID | linux.CLONE_NEWIPC | linux.CLONE_NEWUTS | linux.CLONE_NEWNET
)


Instruction = tuple[int, int, int, int]


def _stmt(code: int, k: int) -> Instruction:
    return (code, 0, 0, k)


def _jump(code: int, k: int, jt: int, jf: int) -> Instruction:
    return (code, jt, jf, k)


def _rule(nr: int, body: list[Instruction]) -> list[Instruction]:
    """``body`` runs only for syscall ``nr`` and ends in a return (it may load arguments: nothing after it
    sees them); other syscalls skip over it with the syscall number still loaded."""
    return [_jump(_JEQ_K, nr, 0, len(body)), *body]


def _arg_switch(
    offset: int, cases: tuple[tuple[tuple[int, ...], int], ...], default: int
) -> list[Instruction]:
    """Return the action of the first case whose values hold the argument at ``offset``, else ``default``."""
    compares = [(value, case) for case, (values, _) in enumerate(cases) for value in values]
    body = [_stmt(_LD_W_ABS, offset)]
    for index, (value, case) in enumerate(compares):
        # This compare sits at 1 + index; the returns follow the compares: default, then one per case.
        body.append(_jump(_JEQ_K, value, len(compares) - index + case, 0))
    return [*body, _stmt(_RET_K, default), *(_stmt(_RET_K, action) for _, action in cases)]


def _args_equal(checks: tuple[tuple[int, int], ...], deny: int) -> list[Instruction]:
    """Allow only if every ``(offset, value)`` holds, else return ``deny`` (e.g. "pid is 0: the caller")."""
    body: list[Instruction] = []
    for index, (offset, value) in enumerate(checks):
        to_deny = 2 * (len(checks) - index) - 1
        body += [_stmt(_LD_W_ABS, offset), _jump(_JEQ_K, value, 0, to_deny)]
    return [*body, _stmt(_RET_K, SECCOMP_RET_ALLOW), _stmt(_RET_K, deny)]


def _template_rules() -> list[Instruction]:
    """``TEMPLATE_CALLS`` with the arguments a template's fork path uses; anything else -> EPERM."""
    allow, eperm = SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO | errno.EPERM
    low_flags = _arg_switch(_OFF_ARG3_LO, ((TEMPLATE_MOUNT_FLAGS, allow),), eperm)
    high_flags = [_stmt(_LD_W_ABS, _OFF_ARG3_HI), _jump(_JEQ_K, 0, 0, len(low_flags))]  # high word 0
    prog = _rule(TEMPLATE_CALLS["mount"], [*high_flags, *low_flags, _stmt(_RET_K, eperm)])
    detach, cgroup = (((linux.MNT_DETACH,), allow),), (((linux.CLONE_NEWCGROUP,), allow),)
    prog += _rule(TEMPLATE_CALLS["umount2"], _arg_switch(_OFF_ARG1_LO, detach, eperm))
    return prog + _rule(TEMPLATE_CALLS["unshare"], _arg_switch(_OFF_ARG0_LO, cgroup, eperm))


def _argument_rules(clone_mask: int = CLONE_NAMESPACE_MASK) -> list[Instruction]:
    allow, eperm = SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO | errno.EPERM
    enolck = SECCOMP_RET_ERRNO | errno.ENOLCK
    only_self = {
        SYS_PRLIMIT64: ((_OFF_ARG0_LO, 0),),
        SYS_SCHED_SETAFFINITY: ((_OFF_ARG0_LO, 0),),
        SYS_SCHED_SETSCHEDULER: ((_OFF_ARG0_LO, 0),),
        SYS_SCHED_SETPARAM: ((_OFF_ARG0_LO, 0),),
        SYS_SCHED_SETATTR: ((_OFF_ARG0_LO, 0),),
        SYS_SETPRIORITY: ((_OFF_ARG0_LO, 0), (_OFF_ARG1_LO, 0)),  # PRIO_PROCESS, who = the caller
        SYS_IOPRIO_SET: ((_OFF_ARG0_LO, IOPRIO_WHO_PROCESS), (_OFF_ARG1_LO, 0)),
    }
    unix_only = _arg_switch(_OFF_ARG0_LO, (((AF_UNIX,), allow),), eperm)
    prog = _rule(SYS_SOCKET, unix_only) + _rule(SYS_SOCKETPAIR, unix_only)
    prog += _rule(SYS_IOCTL, _arg_switch(_OFF_ARG1_LO, (((TIOCSTI, TIOCLINUX), eperm),), allow))
    clone_body = [_stmt(_LD_W_ABS, _OFF_ARG0_LO), _jump(_JSET_K, clone_mask, 0, 1)]
    prog += _rule(SYS_CLONE, [*clone_body, _stmt(_RET_K, eperm), _stmt(_RET_K, allow)])
    prog += _rule(SYS_CLONE3, [_stmt(_RET_K, SECCOMP_RET_ERRNO | errno.ENOSYS)])
    fcntl_cases = ((FCNTL_LOCK_COMMANDS, enolck), ((F_NOTIFY, F_SETLEASE), eperm))
    prog += _rule(SYS_FCNTL, _arg_switch(_OFF_ARG1_LO, fcntl_cases, allow))
    prog += _rule(SYS_PIDFD_OPEN, _arg_switch(_OFF_ARG0_LO, (((HARNESS_PID,), eperm),), allow))
    for nr, checks in only_self.items():
        prog += _rule(nr, _args_equal(checks, eperm))
    prog += _rule(SYS_FLOCK, [_stmt(_RET_K, enolck)])
    return prog


def _pack(prog: list[Instruction]) -> bytes:
    return b"".join(struct.pack("HBBI", code, jt, jf, k) for code, jt, jf, k in prog)


def build_filter(*, template: bool = False) -> bytes:
    """Assemble the deny-list filter; returns the packed ``struct sock_filter`` array. ``template``: a
    session template's variant (``TEMPLATE_CALLS``)."""
    eperm = SECCOMP_RET_ERRNO | errno.EPERM
    prog: list[Instruction] = [
        _stmt(_LD_W_ABS, _OFF_ARCH),
        _jump(_JEQ_K, AUDIT_ARCH_X86_64, 1, 0),
        _stmt(_RET_K, SECCOMP_RET_KILL_PROCESS),
        _stmt(_LD_W_ABS, _OFF_NR),
        _jump(_JGE_K, X32_SYSCALL_BIT, 0, 1),
        _stmt(_RET_K, SECCOMP_RET_KILL_PROCESS),
    ]
    if template:
        prog += _template_rules() + _argument_rules(CLONE_NAMESPACE_MASK & ~TEMPLATE_CLONE_FLAGS)
    else:
        prog += _argument_rules()
    denied = sorted(set(DENIED_SYSCALLS.values()) - (set(TEMPLATE_CALLS.values()) if template else set()))
    for index, number in enumerate(denied):
        # Jump to the shared "return EPERM" at the end when equal.
        remaining = len(denied) - index - 1
        prog.append(_jump(_JEQ_K, number, remaining + 1, 0))
    prog.append(_stmt(_RET_K, SECCOMP_RET_ALLOW))
    prog.append(_stmt(_RET_K, eperm))
    return _pack(prog)


def allow_list_actions(allowed: set[int]) -> list[tuple[int, int]]:
    """The action of every syscall number as sorted ``(first number, action)`` runs, the last one open
    ended: ``allowed`` -> allow, the deny list -> EPERM (the same errno under both policies), any other
    -> ENOSYS. Why ENOSYS and not EPERM or a kill: runtimes probe for newer calls and fall back only
    when the kernel says it lacks them (glibc's ``clone3``, ``faccessat2``; Docker's profile returned
    EPERM for ``clone3`` and broke glibc 2.34), and a kill would turn an honest program's probe into a
    runtime error. Only what no x86_64 program needs (another ABI) kills, in the deny-list filter."""
    if not allowed.isdisjoint(DENIED_SYSCALLS.values()):
        both = sorted(name for name, nr in DENIED_SYSCALLS.items() if nr in allowed)
        raise ValueError(f"syscalls both allowed and on the deny list: {', '.join(both)}")
    denied = set(DENIED_SYSCALLS.values())
    enosys, eperm = SECCOMP_RET_ERRNO | errno.ENOSYS, SECCOMP_RET_ERRNO | errno.EPERM
    runs: list[tuple[int, int]] = []
    for nr in range(max(allowed | denied) + 2):
        action = SECCOMP_RET_ALLOW if nr in allowed else eperm if nr in denied else enosys
        if not runs or runs[-1][1] != action:
            runs.append((nr, action))
    return runs


def _search_tree(runs: list[tuple[int, int]]) -> list[Instruction]:
    """A balanced binary search over ``runs`` (syscall number in the accumulator): each syscall costs
    about log2(len(runs)) compares however long the list, where a chain of compares costs one per entry
    before it. The kernel's action cache skips the filter for numbers that are always allowed, so this
    matters for the others and for the cache's own computation at install time (one emulated walk
    per syscall number)."""
    if len(runs) == 1:
        return [_stmt(_RET_K, runs[0][1])]
    middle = len(runs) // 2
    low, high = _search_tree(runs[:middle]), _search_tree(runs[middle:])
    if len(low) <= _MAX_JUMP:
        return [_jump(_JGE_K, runs[middle][0], len(low), 0), *low, *high]
    return [_jump(_JGE_K, runs[middle][0], 0, 1), _stmt(_JA, len(low)), *low, *high]


def build_allow_filter(allowed: set[int]) -> bytes:
    """Assemble an allow-list filter: syscall numbers in ``allowed`` pass, the rest get the actions of
    ``allow_list_actions``. It is stacked on the deny-list filter (``harness.main``), never used alone:
    the kernel runs both and the stricter answer wins, so the deny list's argument checks (socket
    families, namespace clone flags, ``ioctl(TIOCSTI)``, ``prlimit64`` on another process, locks) and
    its kills (another ABI) keep holding for calls this list allows."""
    prog: list[Instruction] = [
        _stmt(_LD_W_ABS, _OFF_ARCH),
        _jump(_JEQ_K, AUDIT_ARCH_X86_64, 1, 0),
        _stmt(_RET_K, SECCOMP_RET_KILL_PROCESS),
        _stmt(_LD_W_ABS, _OFF_NR),
        *_search_tree(allow_list_actions(allowed)),
    ]
    return _pack(prog)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


class PreparedFilter:
    """A filter program already in C memory (built once in the zygote), so installing it in each worker is
    a single ``prctl`` that allocates nothing."""

    __slots__ = ("_buffer", "_fprog", "address")

    def __init__(self, program: bytes) -> None:
        self._buffer = ctypes.create_string_buffer(program, len(program))
        self._fprog = _SockFprog(len(program) // 8, ctypes.addressof(self._buffer))
        self.address = ctypes.addressof(self._fprog)

    def install(self) -> None:
        """Install on the calling thread (and every child it forks). Needs NO_NEW_PRIVS first."""
        linux.prctl(linux.PR_SET_SECCOMP, linux.SECCOMP_MODE_FILTER, self.address)


class Filters:
    """What the zygote prepares once for every worker: the deny-list filter, installed while the worker
    parks, and the allow list of each language that has one (``syscalls.LANGUAGE_SYSCALLS``; empty
    under the deny policy), stacked once the job names its language (``harness.main``)."""

    __slots__ = ("by_language", "deny")

    def __init__(self, deny: PreparedFilter, by_language: dict[str, PreparedFilter]) -> None:
        self.deny = deny
        self.by_language = by_language


def language_filters() -> dict[str, PreparedFilter]:
    return {
        name: PreparedFilter(build_allow_filter(syscalls.numbers(names)))
        for name, names in syscalls.LANGUAGE_SYSCALLS.items()
    }
