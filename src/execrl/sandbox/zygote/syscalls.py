"""The system calls each language's runtime may make in the sandbox: the seccomp allow lists.

Derived by tracing every language's test programs (``scripts/trace_syscalls.py`` over the security and
sandbox suites and ``execrl tasks check`` of the built-in suites) from the moment the job arrives
(``harness.main`` stacks the list then), then reviewed by hand: calls the traces showed are kept where
the runtime needs them; calls a runtime makes only on paths the traces did not take (threads, timers,
polling, sockets between its own processes, copying files) are added by category with a comment. What
is left out fails with ENOSYS (``seccomp.allow_list_actions`` says why not EPERM or a kill).

Every list includes ``HARNESS``: the trusted harness runs under the same filter after the job arrives
(writing the job's files as the candidate's uid, forking, supervising, killing), and so does a Python
candidate, which is a fork of it.

Adding a language: register it (``langs/registry.py``), run its test programs under
``scripts/trace_syscalls.py``, review the ``missing`` list it prints and add an entry here. Until then
the language runs under the deny list alone (``SandboxConfig.seccomp_policy`` says so).

Numbers are the x86_64 ones (``arch/x86/entry/syscalls/syscall_64.tbl``: stable ABI); the filter kills
any other architecture.
"""

from __future__ import annotations

# Not ``typing``: the zygote imports this module, and every module it imports makes each fork slower.


def _names(text: str) -> frozenset[str]:
    """Names separated by white space; lines starting with ``#`` are comments (why a call is there)."""
    lines = (line.split("#", 1)[0] for line in text.splitlines())
    return frozenset(name for line in lines for name in line.split())


# The calls every runtime here makes, by category. Legacy forms (``open``, ``stat``, ``pipe``, ``fork``...)
# run the same kernel code as their ``*at``/numbered successors, so allowing them adds no surface.
_FILES = _names(
    """
    read write readv writev pread64 pwrite64 preadv pwritev preadv2 pwritev2
    open openat creat close close_range lseek dup dup2 dup3 fcntl ioctl
    stat fstat lstat newfstatat statx statfs fstatfs access faccessat
    faccessat2 readlink readlinkat getdents getdents64 getcwd chdir fchdir
    mkdir mkdirat rmdir unlink unlinkat rename renameat renameat2 link
    linkat symlink symlinkat chmod fchmod fchmodat chown fchown lchown
    fchownat umask truncate ftruncate fallocate fsync fdatasync utimensat
    utime utimes fadvise64
    # shutil.copyfile copies with sendfile; shutil.copy2 reads extended attributes (an ENOSYS there
    # raises instead of being skipped). Setting them stays out.
    sendfile getxattr lgetxattr fgetxattr listxattr llistxattr flistxattr
    # The deny list's argument rules answer these (ENOLCK): they must pass here, or ENOSYS would win.
    flock
    # The harness passes stdin through a memfd (child.prelude).
    memfd_create
    """
)
_MEMORY = _names("brk mmap munmap mprotect mremap madvise msync mincore")
_PROCESSES = _names(
    """
    clone fork vfork execve exit exit_group wait4 waitid kill tgkill
    tkill getpid getppid gettid getuid geteuid getgid getegid getresuid
    getresgid getgroups setsid getsid setpgid getpgid getpgrp set_tid_address
    set_robust_list rseq arch_prctl prctl futex sched_yield sched_getaffinity
    sched_getparam sched_getscheduler sched_get_priority_max sched_get_priority_min
    getpriority getrlimit setrlimit getrusage times sysinfo uname getrandom
    getcpu
    # The candidate's process sets its uid for good (child.prelude). It has no capabilities, so these
    # only move between its own ids; a program (or su, sudo) that tries another id must get EPERM from
    # the kernel, which it handles, not ENOSYS.
    setresuid setuid setgid setreuid setregid setresgid setfsuid setfsgid setgroups capget
    # Checked by the deny list's argument rules (only the caller itself, pid 0): os.nice, affinity,
    # resource.setrlimit (glibc's setrlimit is prlimit64).
    setpriority sched_setaffinity prlimit64
    # The harness supervises each child through a pidfd (harness.supervise).
    pidfd_open
    """
)
_SIGNALS_AND_TIME = _names(
    """
    rt_sigaction rt_sigprocmask rt_sigreturn rt_sigsuspend rt_sigtimedwait
    rt_sigpending sigaltstack pause alarm setitimer getitimer timer_create
    timer_settime timer_gettime timer_getoverrun timer_delete clock_gettime
    clock_getres clock_nanosleep nanosleep gettimeofday time
    # The kernel restarts a sleep interrupted by a handled signal through this call.
    restart_syscall
    """
)
_IO_WAITING = _names(
    """
    pipe pipe2 select pselect6 poll ppoll epoll_create epoll_create1
    epoll_ctl epoll_wait epoll_pwait epoll_pwait2 eventfd2
    """
)
# AF_UNIX only (the deny list refuses other families): multiprocessing, asyncio's self-pipe.
_SOCKETS = _names(
    """
    socket socketpair bind listen accept accept4 connect getsockname
    getpeername sendto recvfrom sendmsg recvmsg shutdown setsockopt getsockopt
    """
)
HARNESS = frozenset(_FILES | _MEMORY | _PROCESSES | _SIGNALS_AND_TIME | _IO_WAITING | _SOCKETS)

# What the traces showed (2026-12-01, Python 3.11, g++ 12, glibc 2.36; ``scripts/trace_syscalls.py``
# over ``pytest tests/security tests/unit/sandbox`` and ``execrl tasks check stdio``, all 116 reference
# and wrong answers). Python's include the hostile programs' attempts at denied calls (``ptrace``,
# ``mount``...), which stay denied, and the calls they make to show that only this list refuses them
# (``REFUSED_ON_PURPOSE``). Both are well inside HARNESS: the rest of it is what a program in
# either language may call on paths these programs did not take (a C++ program can call anything in
# libc; a Python one anything in ``os``), so today both languages get the same list. (Those two traces
# were parsed before ``trace_syscalls`` read strace's padded pids: processes whose pids had fewer digits
# than the test runner's were missed. A partial retrace with the fixed script, over test_sandbox_api and
# test_syscall_hazards, found nothing missing but the denied calls and ``clone3``.)
# The other seven: the same script over ``pytest tests/unit/sandbox/langs
# tests/security/test_language_hazards.py`` (2026-12-01; gcc 12, OpenJDK 17.0.15, Node 20.20, tsc on
# it, Go 1.19.8, rustc 1.95, bash 5.2: compilers, linkers, runtimes and the hostile programs of each).
TRACED: dict[str, frozenset[str]] = {
    "python": _names(
        """
        access arch_prctl bind bpf brk capset chdir clock_gettime clock_nanosleep clone clone3 close
        close_range connect dup dup2 execve exit exit_group fanotify_init fcntl flock fstat futex getcwd
        getdents64 geteuid getpeername getpid getppid getrandom getresuid getsockname gettid getuid
        inotify_init1 io_setup io_uring_enter io_uring_register io_uring_setup ioctl kcmp keyctl kill listen
        lseek madvise memfd_create mkdir mmap mount mprotect mremap msgget munmap newfstatat openat
        personality pidfd_open pidfd_send_signal pipe2 pivot_root poll prctl pread64 prlimit64
        process_vm_readv pselect6 ptrace pwrite64 read readlink recvmsg rseq rt_sigaction rt_sigprocmask
        sched_getaffinity sched_setaffinity sendto set_robust_list set_tid_address setgroups sethostname
        setns setpriority setresgid setresuid setsid setuid socket socketpair statfs symlink uname unshare
        userfaultfd vfork vmsplice wait4 write
        """
    ),
    "cpp": _names(
        """
        access arch_prctl brk chdir chmod clone close close_range dup2 epoll_create1 execve exit_group
        faccessat2 fcntl futex getcwd getdents64 getrandom getresuid getrusage getsockname getsockopt gettid
        getuid ioctl kill lseek memfd_create mkdir mmap mount mprotect mremap munmap newfstatat openat pause
        pidfd_open pipe2 pivot_root poll prctl pread64 prlimit64 pselect6 read readlink recvfrom rmdir rseq
        rt_sigaction rt_sigprocmask sendmsg sendto set_robust_list set_tid_address setns setresuid setsid
        symlink sysinfo umask umount2 uname unlink unshare vfork wait4 waitid write
        """
    ),
    "c": _names(
        """
        access arch_prctl brk chmod clone close close_range dup2 execve exit_group faccessat2 fcntl
        futex getcwd getpid getrandom getrusage gettid ioctl kill lseek memfd_create mmap mprotect
        mremap munmap newfstatat openat pause pidfd_open pipe2 pread64 prlimit64 pselect6 read
        readlink rseq rt_sigaction rt_sigprocmask set_robust_list set_tid_address setsid socket
        sysinfo tgkill umask unlink vfork wait4 write
        """
    ),
    "java": _names(
        """
        access arch_prctl brk clock_getres clock_nanosleep clone clone3 close close_range connect
        dup dup2 execve exit exit_group faccessat2 fcntl futex getcwd getdents64 getpid getrandom
        gettid getuid ioctl kill lseek madvise memfd_create mmap mprotect mremap munmap newfstatat
        openat pidfd_open pipe2 prctl pread64 prlimit64 pselect6 read readlink rseq rt_sigaction
        rt_sigprocmask rt_sigreturn sched_getaffinity sched_yield set_robust_list set_tid_address
        setsid socket socketpair statx sysinfo uname wait4 write
        """
    ),
    "javascript": _names(
        """
        access arch_prctl brk capget clock_nanosleep clone clone3 close close_range dup2
        epoll_create1 epoll_ctl epoll_pwait eventfd2 execve exit exit_group fcntl fstat futex getcwd
        getegid geteuid getgid getpid getrandom getrusage gettid getuid ioctl kill lseek madvise
        memfd_create mmap mprotect mremap munmap newfstatat openat pidfd_open pipe2 pkey_alloc
        pread64 prlimit64 pselect6 read readlink rseq rt_sigaction rt_sigprocmask sched_getaffinity
        set_robust_list set_tid_address setsid socket socketpair statx sysinfo uname wait4 write
        """
    ),
    "go": _names(
        """
        access arch_prctl brk chdir clock_nanosleep clone clone3 close close_range dup2 dup3
        epoll_create1 epoll_ctl epoll_pwait execve exit_group fallocate fchmodat fcntl flock fstat
        ftruncate futex getcwd getdents64 getpid getrandom getrlimit gettid kill lseek madvise
        memfd_create mkdirat mmap mprotect mremap munmap nanosleep newfstatat openat pidfd_open
        pipe2 pread64 prlimit64 pselect6 pwrite64 read readlinkat renameat rseq rt_sigaction
        rt_sigprocmask rt_sigreturn sched_getaffinity sched_yield set_robust_list set_tid_address
        setsid sigaltstack socket tgkill unlinkat utimensat wait4 waitid write
        """
    ),
    "rust": _names(
        """
        access arch_prctl brk chmod clock_nanosleep clone clone3 close close_range dup dup2 execve
        exit exit_group faccessat2 fcntl futex getcwd getdents64 getpid getrandom getrusage gettid
        ioctl kill lseek madvise memfd_create mkdir mmap mprotect mremap munmap newfstatat openat
        pidfd_open pipe2 poll prctl pread64 prlimit64 pselect6 read readlink rseq rt_sigaction
        rt_sigprocmask rt_sigreturn sched_getaffinity sched_yield set_robust_list set_tid_address
        setsid sigaltstack socket statx sysinfo tgkill umask unlink unlinkat vfork wait4 write
        """
    ),
    "bash": _names(
        """
        access arch_prctl brk clone close close_range connect dup2 execve exit_group fcntl futex
        getcwd getegid geteuid getgid getpgrp getpid getppid getrandom gettid getuid ioctl kill
        lseek memfd_create mmap mprotect mremap munmap newfstatat openat pidfd_open pipe2 pread64
        prlimit64 pselect6 read rseq rt_sigaction rt_sigprocmask rt_sigreturn set_robust_list
        set_tid_address setsid socket sysinfo uname wait4 write
        """
    ),
}
# tsc runs on node, then node runs its output: the same calls (traced separately, identical).
TRACED["typescript"] = TRACED["javascript"]
# Languages derived from a traced one run its runtime (not traced separately; the integration tests run
# each under the allow list): pytest in Python, go test as Go's toolchain, JUnit in the JVM, the
# TypeScript transpiler and the console.assert preload in node.
TRACED.update(
    {"pytest": TRACED["python"], "go_test": TRACED["go"], "junit": TRACED["java"]}
    | {name: TRACED["javascript"] for name in ("javascript-asserts", "typescript-asserts")}
    | {name: TRACED["javascript"] for name in ("typescript-transpile", "typescript-transpile-asserts")}
)

# Traced calls left out of every list on purpose, each refused with ENOSYS: glibc probes ``clone3``
# (C, C++, Rust, the JVM, Node; Go's toolchain through gcc) and falls back to ``clone`` (the deny list
# answers ``clone3`` too: its flags sit behind a pointer); V8 (JavaScript, TypeScript) probes memory
# protection keys with ``pkey_alloc`` and runs without them when it fails, as on any CPU without PKU
# (the traces saw EINVAL); the rest are hostile programs' attempts (``tests/security``: regaining
# capabilities, renaming the host, signalling the harness by pidfd, and test_allowlist_hazards's rare
# calls), refused with ENOSYS where the kernel would have refused some of them anyway.
REFUSED_ON_PURPOSE = _names(
    "clone3 pkey_alloc capset sethostname pidfd_send_signal io_setup kcmp msgget personality vmsplice"
)

# Per language, on top of HARNESS: every runtime's traced calls fall inside it (TRACED), so none adds
# a call. Reviewed by hand, the calls these runtimes make on paths the traces did not take, left out:
# - ``copy_file_range`` and ``splice``: Go's ``io.Copy``, Rust's ``fs::copy``/``io::copy``, libuv's
#   ``uv_fs_copyfile``/``uv_fs_sendfile`` try them first and fall back to ``read``/``write`` or
#   ``sendfile`` on ENOSYS (older kernels lack them).
# - ``io_uring_setup`` (libuv >= 1.45 for file I/O): on the deny list already; libuv falls back to its
#   thread pool when it fails, whichever error.
# - ``membarrier`` (HotSpot only with -XX:+UseSystemMemoryBarrier, JDK 20+, off by default), ``shmget``
#   (HotSpot large pages through System V, off by default), ``pkey_mprotect``/``pkey_free`` (V8, only
#   after ``pkey_alloc`` succeeded).
# - ``pidfd_send_signal`` (Go >= 1.23 checks pidfd support once, this call among others, and uses
#   plain ``kill`` and ``wait4`` when the check fails).
# A runtime whose next version needs one of them gets its own set here, with the reason.
PYTHON: frozenset[str] = frozenset()
CPP: frozenset[str] = frozenset()
C: frozenset[str] = frozenset()
JAVA: frozenset[str] = frozenset()
JAVASCRIPT: frozenset[str] = frozenset()  # and TypeScript: tsc and its output run on node
GO: frozenset[str] = frozenset()
RUST: frozenset[str] = frozenset()
BASH: frozenset[str] = frozenset()

LANGUAGE_SYSCALLS: dict[str, frozenset[str]] = {
    "python": HARNESS | PYTHON,
    "cpp": HARNESS | CPP,
    "c": HARNESS | C,
    "java": HARNESS | JAVA,
    "javascript": HARNESS | JAVASCRIPT,
    "typescript": HARNESS | JAVASCRIPT,
    "go": HARNESS | GO,
    "rust": HARNESS | RUST,
    "bash": HARNESS | BASH,
    # SandboxFusion's test-runner modes and the Node variants run the same runtimes as the languages
    # they derive from (pytest in Python, ``go test`` as Go's toolchain, JUnit in the JVM, ``node``).
    "pytest": HARNESS | PYTHON,
    "go_test": HARNESS | GO,
    "junit": HARNESS | JAVA,
    "javascript-asserts": HARNESS | JAVASCRIPT,
    "typescript-asserts": HARNESS | JAVASCRIPT,
    "typescript-transpile": HARNESS | JAVASCRIPT,
    "typescript-transpile-asserts": HARNESS | JAVASCRIPT,
}


def _numbers(text: str) -> dict[str, int]:
    words = text.split()
    return {name: int(number) for name, number in zip(words[::2], words[1::2], strict=True)}


# name -> x86_64 number, for every name above (``numbers`` rejects the rest).
NUMBERS: dict[str, int] = _numbers(
    """
    read 0 write 1 open 2 close 3 stat 4 fstat 5 lstat 6 poll 7 lseek 8 mmap 9 mprotect 10 munmap 11
    brk 12 rt_sigaction 13 rt_sigprocmask 14 rt_sigreturn 15 ioctl 16 pread64 17 pwrite64 18 readv 19
    writev 20 access 21 pipe 22 select 23 sched_yield 24 mremap 25 msync 26 mincore 27 madvise 28 dup 32
    dup2 33 pause 34 nanosleep 35 getitimer 36 alarm 37 setitimer 38 getpid 39 sendfile 40 socket 41
    connect 42 accept 43 sendto 44 recvfrom 45 sendmsg 46 recvmsg 47 shutdown 48 bind 49 listen 50
    getsockname 51 getpeername 52 socketpair 53 setsockopt 54 getsockopt 55 clone 56 fork 57 vfork 58
    execve 59 exit 60 wait4 61 kill 62 uname 63 fcntl 72 flock 73 fsync 74 fdatasync 75 truncate 76
    ftruncate 77 getdents 78 getcwd 79 chdir 80 fchdir 81 rename 82 mkdir 83 rmdir 84 creat 85 link 86
    unlink 87 symlink 88 readlink 89 chmod 90 fchmod 91 chown 92 fchown 93 lchown 94 umask 95
    gettimeofday 96 getrlimit 97 getrusage 98 sysinfo 99 times 100 getuid 102 getgid 104 setuid 105
    setgid 106 geteuid 107 getegid 108 setpgid 109 getppid 110 getpgrp 111 setsid 112 setreuid 113
    setregid 114 getgroups 115 setgroups 116 setresuid 117 getresuid 118 setresgid 119 getresgid 120
    getpgid 121 setfsuid 122 setfsgid 123 getsid 124 capget 125 rt_sigpending 127 rt_sigtimedwait 128
    rt_sigsuspend 130 sigaltstack 131 utime 132 statfs 137 fstatfs 138 getpriority 140 setpriority 141
    sched_getparam 143 sched_getscheduler 145 sched_get_priority_max 146 sched_get_priority_min 147
    prctl 157 arch_prctl 158 setrlimit 160 gettid 186 getxattr 191 lgetxattr 192 fgetxattr 193
    listxattr 194 llistxattr 195 flistxattr 196 tkill 200 time 201 futex 202 sched_setaffinity 203
    sched_getaffinity 204 epoll_create 213 getdents64 217 set_tid_address 218 restart_syscall 219
    fadvise64 221 timer_create 222 timer_settime 223 timer_gettime 224 timer_getoverrun 225
    timer_delete 226 clock_gettime 228 clock_getres 229 clock_nanosleep 230 exit_group 231
    epoll_wait 232 epoll_ctl 233 tgkill 234 utimes 235 waitid 247 openat 257 mkdirat 258 fchownat 260
    newfstatat 262 unlinkat 263 renameat 264 linkat 265 symlinkat 266 readlinkat 267 fchmodat 268
    faccessat 269 pselect6 270 ppoll 271 set_robust_list 273 utimensat 280 epoll_pwait 281 fallocate 285
    accept4 288 eventfd2 290 epoll_create1 291 dup3 292 pipe2 293 preadv 295 pwritev 296 prlimit64 302
    getcpu 309 renameat2 316 getrandom 318 memfd_create 319 preadv2 327 pwritev2 328 statx 332 rseq 334
    pidfd_open 434 close_range 436 faccessat2 439 epoll_pwait2 441
    """
)


def numbers(names: frozenset[str]) -> set[int]:
    """The x86_64 numbers of ``names``; an unknown name raises ``KeyError`` naming it."""
    unknown = sorted(names - NUMBERS.keys())
    if unknown:
        raise KeyError(f"no x86_64 number for {', '.join(unknown)}: add it to syscalls.NUMBERS")
    return {NUMBERS[name] for name in names}
