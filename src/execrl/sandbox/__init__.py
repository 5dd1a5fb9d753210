"""Isolated, high-throughput code execution (no torch here).

    from execrl.sandbox import Sandbox, SandboxConfig, ExecutionRequest, CallTest
    with Sandbox(SandboxConfig(workers=2)) as sandbox:
        result = sandbox.run(ExecutionRequest(language="python", program="print(1)"))

Map, top layer first (each sub-package's docstring says more; ``lint-imports`` checks that the layers
point down, pyproject.toml, and ``tests/unit/test_import_graph.py`` that no two files import each other)::

    execrl.sandbox
    ├── cli.py        execrl sandbox run | serve | languages
    ├── service/      HTTP: /v1/execute, SandboxFusion's /run_code, /v1/sessions, /run_jupyter; a client
    ├── api.py        Sandbox: the public entry point (sync and async, batches); validates requests
    ├── sessions/     persistent interpreters, the parent's side: Session (api.py), SessionTemplate and
    │                 its forks (template.py, forks.py), opening and watching them (manager.py), one
    │                 session's pipes and cell loop (driver.py), a cell's verdict (judge.py), types.py
    ├── host/         the parent's engine: the pool of parked workers, driving one run, cgroups
    ├── langs/        the language registry (C, C++, Go, Rust, Java, JS, TS, Bash built in), Python
    │                 runtimes (python, python-data), Go's shared build cache
    ├── judge/        in the parent: records plus the kernel's view -> verdicts; assert probes
    ├── zygote/       stdlib only: the fork server, the jail, seccomp, the harness H, the candidate C;
    │                 a session's jail side: session_worker.py (its pid 1), session_kernel.py (the
    │                 interpreter), session_fork.py (templates and forks), session_userns.py
    └── types.py, errors.py, backends.py: shared by every layer (requests and results; the errors;
                      how strictly a sandbox isolates: namespace (default), unisolated)

One request, end to end (``Sandbox.run(ExecutionRequest(...))``):

1. ``api`` validates the request (language, runtime, limits, files) and picks its runtime's pool.
2. ``host.runner.build_job`` makes the job the sandbox sees: tests by position, never their names or
   expected values (assert tests become probes, ``judge.asserts``).
3. ``host.pool`` hands the job to a parked worker: a fork of the zygote (``zygote.server``) that already
   isolated itself (``zygote.jail``, ``zygote.seccomp``) inside a cgroup slot, maybe warm (``zygote.warm``).
4. In the jail, pid 1 is the harness ``H`` (``zygote.harness``): it writes the files, compiles, runs the
   tests in candidate processes ``C`` (``zygote.testgroups``, ``zygote.child``, ``zygote.spawn``) and
   reports bounded JSON records on a pipe only it holds.
5. ``host.runner`` reads the records under the wall-clock watchdog; the slot's cgroup gives memory, CPU
   and the OOM counter.
6. ``judge.verdicts`` compares what came back with the expected values the parent kept, and writes the
   ``ExecutionResult``; the worker's slot is emptied by a janitor and the pool refills in the background.

Threat model. The strict ``namespace`` backend runs untrusted programs (LLM samples) as an unprivileged,
capability-less uid in fresh pid/mount/ipc/uts/cgroup namespaces plus an empty network namespace of its
own slot, with a private tmpfs root, a read-only view of the system (``/usr``, the Python prefix), no
network, cgroup memory/pids limits, rlimits, a seccomp filter and a wall-clock watchdog outside the
sandbox; expected values never enter the sandbox and the parent judges returned values and outputs
(``harness.py``). It is meant to stop accidents and ordinary malice, and the reward hacks a policy
trained against it would learn:

* Escape and interference: fork/memory/disk/output bombs, reading host files and environment, network
  access, signalling the host, leftover processes.
* Forged results: early exit, printed results, records written by the program itself. Every byte that
  comes from the candidate (records, returned values, outputs) is untrusted input, parsed with bounds
  (depth, size, types) and judged: a malformed one is the candidate's ``runtime_error`` or
  ``wrong_answer``, never an exception in the caller. A Python plain run ends as ``python main.py`` would
  (``pyexit.py``), with nothing looked up after the program ran that it could have replaced
  (``os._exit``, builtins, ``json``, exception classes): patching ``os._exit`` forges no exit status,
  and SandboxFusion's anti-hack prelude (``os._exit = None``) breaks no correct program
  (``tests/security/test_exit_path_hazards.py``). Assert-style tests are rewritten into comparisons
  the parent judges, with expected values that never enter the sandbox, where their shape allows
  (``assert f(x) == y``, ``abs(f(x) - y) < tol``, ``assert f(x)``/``not f(x)``, ``candidate`` inside
  ``check``); the rest run where the candidate cannot reach the channel that reports them.
* Faked infrastructure faults: ``sandbox_error`` (which rewards mask out of the advantage) is only for
  faults the candidate cannot cause. Seccomp allows ``prlimit``, ``setpriority`` and CPU affinity only
  on the caller itself, so they cannot reach the in-sandbox harness (which shares the candidate's uid,
  ``jail._drop_privileges``); it is not dumpable, so ``ptrace`` and ``/proc/1/mem`` are closed; as its
  namespace's init it ignores the candidate's signals. A candidate that lowers its own CPU rlimit and is killed early is its own ``time_limit`` or
  ``runtime_error``: the parent reads the hard limit pid 1 died with (``runner._own_cpu_rlimit``).
* Host data: ``/proc`` is mounted with ``subset=pid`` (the sandbox's own processes only: no
  ``/proc/cmdline``, boot id, ``/proc/sys``), so the compiler cannot echo them either; no command line
  in the sandbox carries a host path (the zygote reads its code from stdin; its ``argv[0]`` is the
  interpreter, which the sandbox sees at the same path anyway).
* Channels between concurrent sandboxes (and the host) through the shared read-only files: file locks
  (``flock``, ``fcntl`` lock commands) are refused with ENOLCK, change notification (inotify, fanotify,
  dnotify's ``F_NOTIFY``) with EPERM, ``/proc/locks`` is not mounted; abstract Unix sockets are
  scoped by the slot's network namespace; ``socket`` and ``socketpair`` accept only ``AF_UNIX``.
* System calls, two seccomp policies (``SandboxConfig.seccomp_policy``). ``"deny"`` (the fallback,
  ``seccomp.py``) refuses a list of known hazards: another ABI (``int 0x80``, x32 numbers: kill), module
  and kexec loading, ``mount``/``pivot_root``/``unshare``/``setns`` and ``clone`` with namespace flags,
  ``ptrace``, ``process_vm_*``, ``pidfd_getfd``, ``bpf``, ``perf_event_open``, ``userfaultfd``,
  ``io_uring``, the key ring, clock and time setting, handle-based opens, ``socket`` families but
  ``AF_UNIX``, ``ioctl(TIOCSTI)``, scheduling and limits of other processes, ``pidfd_open`` of the
  harness (pid 1), locks and change notification; everything else reaches the kernel. ``"allow"`` (the default) stacks on it, once the
  job names its language, the list of calls that language's runtime needs (``syscalls.py``: traced
  from the test programs with ``scripts/trace_syscalls.py``, reviewed by hand), so every call the
  list omits fails with ENOSYS before reaching its kernel code: native AIO, System V IPC, ``splice``
  and ``vmsplice``, ``kcmp``, ``personality``, NUMA policy calls, extended attributes, ``mknod``,
  ``landlock``, ``memfd_secret`` and the rest of a kernel's ~460 calls (what kernel exploits most often
  enter through when the deny list forgot them; ``tests/security/test_allowlist_hazards.py``). All
  nine built-in languages have a list; the traces of their runtimes (JVM, V8, Go's, rustc, the linkers)
  fit one shared base, so today the lists are equal, and each runtime's calls left out on purpose are
  reviewed in ``syscalls.py`` (``clone3``, V8's ``pkey_alloc``, ``copy_file_range``: each has a
  fallback on ENOSYS). A language a user registers without a traced set runs under the deny list alone
  (the sandbox logs which).
* Compile steps are bounded by the request's ``Limits.compile_timeout_s`` in CPU and wall time, and a
  compile whose processes use no CPU for the request's ``timeout_s`` (at least 1 s: a source that
  includes one of the compiler's own descriptors blocks it) is stopped then (``stall.py``); either is
  a ``compile_error``.
* Uids across sandboxes: each pool's slots run under a block of uids chosen from its pid namespace,
  pid and pool number (``host.uids.uid_block_base``), so pools in two containers, each pid 1 of its own,
  do not share uids (RLIMIT_NPROC and signals count by uid across the kernel); ``EXECRL_SANDBOX_UIDS``
  sets the range (``deploy/k8s/README.md``).
* What a request feeds its programs never becomes a ``sandbox_error``: strings of the job (stdin,
  files, the program) are written as UTF-8 with a lone surrogate passed through as its
  ``surrogatepass`` bytes (``child.text_bytes``; the HTTP edge refuses them), and a stdin larger than
  ``max_file_mb`` makes the harness fork its programs (``spawn.stdin_fits``).
* The reward audit is blind (``execrl.rewards.blind``): a scored execution carries the reward's tests
  and the task's audit tests together, shuffled per execution from the OS's randomness, and no test
  name enters the sandbox (the parent maps records back by position). So nothing a program can observe
  from inside (names, count, order, the position of a run and the counter files of earlier runs, the
  inputs on the harness's stack or the call harness's stdin, pid 1 or a child) differs between the
  audit and the reward: they read two splits of one run. What remains: a program still sees every
  input of its execution and may recognise ones it memorised; and the splits share the execution's
  limits, so exhausting one during an audit test costs the reward tests not yet run.
* Other languages (``langs/``: C, C++, Java, JavaScript, TypeScript, Go, Rust, Bash): compilers and
  runtimes are ordinary programs in the same jail, as the candidate's uid, under the same limits (plus
  a language's floors, ``Language.limits_for``); their caches and homes live in the execution's tmpfs.
  Besides ``/usr`` the jail sees only the JDK's configuration, ``/etc/java-*-openjdk``, Debian's
  ``/etc/alternatives`` (links into ``/usr``) and Go's warm standard-library cache (``gocache.py``,
  built on the host by trusted code, shared by every sandbox), all read-only; build outputs live in
  the work directory's ``.execrl/``, where no request file may go.
  Function-call tests in Java/JavaScript/TypeScript run the candidate in one process with a harness
  written in that language (fd 3 carries its records): as in Python's group runs the candidate can
  write those records itself, but a record carries a returned value only, judged by the parent
  against expected values that never enter the sandbox, so it can claim nothing the function could
  not have returned. ``tests/security/test_language_hazards.py`` runs the hostile programs per language.
* Warm starts (``warm.py``, Bash today): a parked worker may start the runtime of the job it expects
  before the job exists, under the job's filter and rlimits, in its cgroups; the runtime blocks on a
  gate pipe until the job's files are written, and the pool hands that worker only a job of the same
  shape (a job of another shape would be a ``sandbox_error``, never a run under the wrong limits).
  ``tests/security/test_warm_hazards.py`` runs the hostile Bash program warm.

* Sessions (``sessions/``): a persistent interpreter in a worker built exactly as a run's (the same
  namespaces, tmpfs, slot uid, cgroups, rlimits, seccomp deny list plus Python's allow list); its pid 1
  is a small init that holds none of the session's pipes, reaps orphans, relays interrupts and exits
  with the interpreter's status, and the parent enforces every limit from outside (wall clock, the
  cgroup's CPU, memory and OOM counter, output, the session's CPU, lifetime and idle time). Between its
  cells a session's cgroup is frozen (``host.cgroups``: v1's freezer or v2's ``cgroup.freeze``), so a
  thread or process a cell leaves running computes only while a later cell runs, charged to that cell,
  and never competes with a sibling's cell; the session's CPU is its cgroup's whole count. What a cell
  reports about itself (stdout, the repr of its value, its exception) is that cell's own untrusted
  output, forgeable by an earlier cell of the same session and never a reward (a tool episode's answer
  is judged in a fresh sandbox); what the parent measures is not forgeable. Forks, and their rule: only
  a ``SessionTemplate`` forks, and it runs only trusted setup cells (a task's code, never a model's);
  a session that ran an untrusted cell never forks, because anything in its process (``os.fork``,
  at-fork hooks, this package's own functions) may have been replaced, and isolation between copies of
  it could not be set up by code running in it. The template is unprivileged on the host
  (``zygote/session_userns.py``): the zygote clones it into a user namespace of its own whose maps it writes
  (the pool's block of uids, each to itself; no host uid 0, so nothing inside is ever root), where it
  runs as its slot's uid holding only the capabilities its forks' jails need (``CAP_SYS_ADMIN``,
  ``SETUID``/``SETGID``, ``CHOWN``, ``FOWNER``, ``DAC_OVERRIDE``, none effective while setup cells run;
  empty bounding set, ``no_new_privs``, not dumpable) under the deny list's template variant (which
  allows ``mount`` with a fork's flags only, ``umount2`` detaching, ``unshare`` of a cgroup namespace,
  ``clone`` with a fork's namespaces but never a user namespace); the parent moves every process into
  its cgroups. A malicious setup cell (task files come from imported datasets) owns its template and so
  its forks' initial state, and can use those capabilities in namespaces of its own (tmpfs, proc,
  overlayfs and cgroup-view mounts: kernel code a user namespace reaches); it cannot read or write a
  host file outside the jail, mount a host disk, remount the system tree writable, write host cgroup
  files or ``/proc/sys``, become host uid 0, ``setns``, ``ptrace``, ``chroot``, open a socket but
  ``AF_UNIX``, or see or signal a process outside its pid namespace (the host, other templates and
  their forks, sessions, runs): ``tests/security/test_template_hazards.py`` (nine of its thirteen
  setup-cell attacks worked while the template kept host root; the pid namespace or a kernel without modules
  stopped the other four). Over HTTP templates are refused unless the server runs with ``--session-templates``
  (the kernel code they reach). Each fork is cloned by the template's own code into new pid, mount,
  ipc, uts and network namespaces and, before any untrusted byte runs, closes every inherited
  descriptor but its own four pipes (work-directory files are reopened on its copy, read-only system
  files and ``/dev/null``-like devices by path: no open file description, so no offset or status flag,
  is shared with a sibling), waits to be moved into its own slot's cgroups and
  enters a cgroup namespace there, mounts its own ``/proc`` and tmpfs with a copy of the template's
  files, replaces every shared mapping with a private copy, reseeds ``random`` and ``numpy.random``,
  and locks down like every sandbox under its own slot's uid. Siblings are then isolated as two
  sandboxes are: disjoint pid namespaces (no pid to signal, ``pidfd_open`` or ``ptrace``), mount, ipc
  and network namespaces (no shared file, System V object or abstract socket), uids and cgroups; the
  template is outside all of them (``tests/security/test_session_hazards.py``). Memory: a fork's cgroup
  bounds what it allocates after the fork; the pages it shares stay charged to the template's cgroup
  (and the forks' namespaces' kernel memory too), whose slot is held until its last fork ends.
  Limits: siblings share physical pages and the page cache copy-on-write, so timing side channels
  through them remain, as between any sandboxes on one kernel.

Limits, stated plainly: the kernel is shared, so it is not a boundary against kernel exploits (use a VM
tier for hostile multi-tenant use), and the allow list narrows the kernel code a program reaches
without removing the common calls (``read``, ``mmap``, ``futex``...) an exploit can also use; timing side channels
through shared caches and the page cache of the shared files remain; ``/proc/self`` and the sandbox's
own pids are visible (``/proc/self/mountinfo`` names the bound host directories, which the sandbox sees
anyway, and the block device and size of the host's devtmpfs behind them; ``/proc/self/cgroup`` names
the slot's cgroup, ``execrl-<host pid of the owning process>-<n>/slot<k>``); the harness's modules,
which the candidate finds in ``sys.modules``, carry the host's source directory in ``__file__``; a
program cannot lock even its own files (SQLite on a file fails) nor use ``resource.prlimit`` with its
own pid instead of 0; assert-style tests whose shape is not rewritten run
in the candidate's process and remain forgeable by code written against this harness (prefer
``CallTest``/``IOTest`` for adversarial RL); a SIGKILL from outside pid 1 after the program lowered its
own CPU limit is counted as the program's; CPU time of a busy host still affects wall-clock limits.
The ``unisolated`` backend is NOT a security boundary.

Trade-offs made for throughput (each measured; see the modules named):

* One process per execution for a single Python ``CodeTest``/``CallTest`` (HumanEval's shape;
  ``testgroups.runs_inline``): the candidate runs in the sandbox's pid 1, so the result pipe is in its
  hands. Its records are untrusted data the parent validates (order, fields, a garbage line is the
  program's runtime error); how pid 1 ended comes from the zygote that reaps it, not from the sandbox. A
  forged record gains nothing a ``CodeTest`` did not already allow, and a ``CallTest`` value still needs
  the expected value, which never enters. Several tests, stdin/stdout tests, plain runs and compiled
  languages keep the trusted harness plus a forked child, so a death in one test cannot take the
  following tests with it. As pid 1 the candidate ignores signals it sends itself with a default action
  (the kernel protects a namespace's init), e.g. ``os.kill(os.getpid(), signal.SIGTERM)``.
* Network namespaces are made once per slot, not per execution (``jail.make_network_namespaces``):
  concurrent sandboxes never share one, so abstract Unix sockets cannot connect them
  (``tests/security/test_netns_hazards.py``); consecutive executions of one slot share an empty
  namespace whose only state, socket names, dies with the last process of the previous execution,
  which the slot's janitor waits for.
* The zygote preloads ``typing``, ``math``, ``collections`` and a few other pure standard-library modules
  (``zygote.PRELOADED_MODULES``): a candidate finds them already in ``sys.modules`` (a fresh copy per
  execution, as for every other object). The ``python-data`` runtime (``langs/runtimes.py``) runs in a zygote
  of its own that also preloaded numpy and pandas from a packages directory bound read-only into its
  jail; every module-level random generator the zygote preloaded (the standard library's, numpy's
  global one) is reseeded from the OS per execution (``child.find_global_rngs``).
* ``fetch_files`` (files read back after the run, ``workfiles.py``) are read by the harness once every
  candidate process is dead, one path component at a time with ``O_NOFOLLOW``, regular files only, within
  ``Limits.max_fetch_file_bytes``/``max_fetch_bytes``: a link the candidate plants under a fetched name
  returns nothing from outside the work directory (``tests/security/test_fetch_hazards.py``).
"""

from execrl.sandbox.api import Sandbox, SandboxConfig, default_sandbox
from execrl.sandbox.backends import list_backends, register_backend
from execrl.sandbox.errors import InvalidRequestError, SandboxError, SandboxFailure, UnsupportedHostError
from execrl.sandbox.langs.registry import Language, list_languages, register_language
from execrl.sandbox.langs.runtimes import Runtime, list_runtimes, register_runtime
from execrl.sandbox.sessions.api import Session
from execrl.sandbox.sessions.template import SessionTemplate
from execrl.sandbox.sessions.types import (
    CellResult,
    SessionClosedError,
    SessionError,
    SessionForkError,
    SessionLimits,
)
from execrl.sandbox.types import (
    CallTest,
    CodeTest,
    ExecutionRequest,
    ExecutionResult,
    IOTest,
    Limits,
    TestCase,
    TestResult,
    Verdict,
)

__all__ = [
    "CallTest",
    "CellResult",
    "CodeTest",
    "ExecutionRequest",
    "ExecutionResult",
    "IOTest",
    "InvalidRequestError",
    "Language",
    "Limits",
    "Runtime",
    "Sandbox",
    "SandboxConfig",
    "SandboxError",
    "SandboxFailure",
    "Session",
    "SessionClosedError",
    "SessionError",
    "SessionForkError",
    "SessionLimits",
    "SessionTemplate",
    "TestCase",
    "TestResult",
    "UnsupportedHostError",
    "Verdict",
    "default_sandbox",
    "list_backends",
    "list_languages",
    "list_runtimes",
    "register_backend",
    "register_language",
    "register_runtime",
]
