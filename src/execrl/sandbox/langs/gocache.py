"""Go's warm, read-only build cache of the standard library, shared by every sandbox (issue 28).

Why: the jail builds with ``CGO_ENABLED=0`` (no C compiler is started), and Debian's pre-compiled
standard library was built with cgo, so ``net``, ``os/user`` and every package importing them
(``net/http``, ``crypto/tls``...) were stale and recompiled from source in each execution's empty
``GOCACHE``: building a program importing ``net/http`` (testify's ``assert`` does) took 6.2 s in the
sandbox and a HumanEval-X ``go test`` with testify 11 s, against 0.6 s and 0.5 s warm (README).

What: ``go build std``, plus Debian's testify when it is installed (``golang-github-stretchr-testify-dev``,
what HumanEval-X's Go tests import), and one ``go test`` of a file importing the common packages
(``WARM_IMPORTS``: ``go test`` vets every dependency: a cold one of HumanEval-X's shape took 11 s in the
sandbox, 0.5 s warm), compiled once on the host into ``$EXECRL_RUNTIMES_DIR/go-cache/<go version>-<key>``
with exactly the environment the jail's ``go`` runs with (``jail.ENV`` and the Go language's variables:
``CGO_ENABLED``, ``GO111MODULE``, ``GOFLAGS``...; ``key`` hashes them, so another setting is another
directory). The jail binds ``go-cache`` read-only (``bind_dirs``), and a Go job points ``GOCACHE`` at the
built directory (``job_env``). Go reads a read-only cache and skips its writes silently (measured: a build
against it succeeds and leaves it unchanged), so each execution still compiles its own packages, and nothing
one sandbox does reaches another.

When: ``scripts/setup.sh --system`` builds it (``gocache.main``); otherwise the first
Go job on a host builds it before it starts (once, under a lock file; about 15-60 s on 2 cores) and
waits for it. A host where it cannot be built (not root, a read-only ``/opt``) falls back to a
per-execution cache in the work directory, as before, and logs why once.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import logging
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

from execrl.sandbox.langs.runtimes import DEFAULT_RUNTIMES_DIR, RUNTIMES_DIR_ENV

log = logging.getLogger("execrl.sandbox")

GO = "/usr/bin/go"
GOPATH = "/usr/share/gocode"  # Debian's Go libraries (testify), read-only under /usr
TESTIFY = f"{GOPATH}/src/github.com/stretchr/testify"
MARKER = ".execrl-complete"
BUILD_TIMEOUT_S = 1800.0
# Everything of the jail's Go environment but the cache itself (``langs/native.py`` adds GOCACHE).
BASE_ENV = (
    ("GOPATH", GOPATH),
    ("GO111MODULE", "off"),
    ("GOPROXY", "off"),
    ("CGO_ENABLED", "0"),
)
FALLBACK_CACHE = "./.execrl/go-build"  # per execution, in the work directory (``child.in_workdir``)


def cache_root() -> str:
    """The directory the jail binds read-only (it holds one cache per Go version and environment)."""
    return f"{os.environ.get(RUNTIMES_DIR_ENV, DEFAULT_RUNTIMES_DIR)}/go-cache"


@functools.lru_cache(maxsize=1)
def bind_dirs() -> tuple[str, ...]:
    """What ``jail.build_template_root`` binds for Go: ``cache_root``, created if missing so that a cache
    built after the zygote started is visible through the bind; empty when it cannot be created."""
    if not os.path.exists(GO):
        return ()
    root = cache_root()
    if os.path.realpath(root).startswith("/tmp/"):  # the jail's root is assembled on a tmpfs at /tmp
        log.warning("no warm Go cache: %s is under /tmp, which the jail's own /tmp hides", root)
        return ()
    try:
        os.makedirs(root, mode=0o755, exist_ok=True)
    except OSError as exc:
        log.warning("no warm Go cache: cannot create %s (%s)", root, exc)
        return ()
    return (root,)


def _jail_env() -> dict[str, str]:
    from execrl.sandbox.zygote.jail import ENV

    return {**ENV, **dict(BASE_ENV)}


@functools.lru_cache(maxsize=1)
def cache_dir() -> str | None:
    """This host's cache directory for the jail's Go environment and ``go version`` (None: no Go)."""
    try:
        version = subprocess.run([GO, "version"], capture_output=True, text=True, timeout=60, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    key_text = json.dumps([version.stdout.strip(), sorted(_jail_env().items()), os.path.exists(TESTIFY)])
    key = hashlib.sha256(key_text.encode()).hexdigest()[:12]
    name = version.stdout.split()[2] if len(version.stdout.split()) > 2 else "go"
    return f"{cache_root()}/{name}-{key}"


def is_built(path: str) -> bool:
    return os.path.isfile(f"{path}/{MARKER}")


def build(path: str) -> None:
    """Compile the standard library (and testify when installed) into ``path``, atomically: into a
    temporary directory next to it, renamed once complete. Raises ``OSError``/``SubprocessError``."""
    parent = os.path.dirname(path)
    os.makedirs(parent, mode=0o755, exist_ok=True)
    with open(f"{parent}/.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be building it right now
        if is_built(path):
            return
        partial = tempfile.mkdtemp(prefix=".partial-", dir=parent)
        try:
            _compile_into(partial)
            Path(partial, MARKER).write_text("go build std; go test warm_test.go\n")
            for root, dirs, files in os.walk(partial):
                for name in dirs + files:
                    os.chmod(os.path.join(root, name), 0o755 if name in dirs else 0o644)
            os.chmod(partial, 0o755)
            shutil.rmtree(path, ignore_errors=True)
            os.rename(partial, path)
        finally:
            shutil.rmtree(partial, ignore_errors=True)


# Imported by the sample test whose ``go test`` warms the cache with the vet facts ``go test`` computes
# for every dependency (``go vet std`` would cover all of them: 4.7 min and 390 MB, measured).
WARM_IMPORTS = (
    "bufio", "bytes", "container/heap", "container/list", "crypto/md5", "crypto/sha256", "encoding/json",
    "errors", "fmt", "math", "math/big", "math/rand", "net/http", "os", "reflect", "regexp", "sort",
    "strconv", "strings", "sync", "time", "unicode",
)  # fmt: skip
TESTIFY_IMPORTS = ("github.com/stretchr/testify/assert", "github.com/stretchr/testify/require")


def sample_test() -> str:
    """A ``go test`` file importing ``WARM_IMPORTS`` (and testify when installed)."""
    imports = [*WARM_IMPORTS, "testing", *(TESTIFY_IMPORTS if os.path.isdir(TESTIFY) else ())]
    lines = "".join(f'\t_ "{name}"\n' for name in imports if name != "testing")
    return f'package main\n\nimport (\n{lines}\t"testing"\n)\n\nfunc TestWarm(t *testing.T) {{}}\n'


def _compile_into(cache: str) -> None:
    """``go build std`` (testify too), then one ``go test`` of ``sample_test``, as the jail runs them."""
    with tempfile.TemporaryDirectory(prefix="execrl-gocache-") as home:
        env = {**_jail_env(), "GOCACHE": cache, "HOME": home, "TMPDIR": home}
        Path(home, "warm_test.go").write_text(sample_test())
        targets = ["std"] + (["github.com/stretchr/testify/..."] if os.path.isdir(TESTIFY) else [])
        for argv in ([GO, "build", *targets], [GO, "test", "warm_test.go"]):
            subprocess.run(argv, env=env, cwd=home, check=True, capture_output=True, timeout=BUILD_TIMEOUT_S)


_failed: list[str] = []  # why building failed in this process (then every job falls back)
_cold: list[bool] = []  # set by ``cold_cache``


@contextlib.contextmanager
def cold_cache() -> Iterator[None]:
    """For benchmarks: Go jobs built inside it use the per-execution cache (the behaviour before this
    module), so before and after are measured in one run."""
    _cold.append(True)
    try:
        yield
    finally:
        _cold.pop()


def job_env() -> dict[str, str]:
    """``GOCACHE`` for a Go job: the warm cache, built first if missing; the per-execution fallback when
    it cannot be (the reason is logged once per process)."""
    path = cache_dir()
    if path is None or _failed or _cold or not bind_dirs():
        return {"GOCACHE": FALLBACK_CACHE}
    if not is_built(path):
        try:
            log.info("building the warm Go cache %s (once per host)", path)
            build(path)
        except (OSError, subprocess.SubprocessError) as exc:
            _failed.append(str(exc))
            log.warning("no warm Go cache (%s); each Go job compiles the standard library it uses", exc)
            return {"GOCACHE": FALLBACK_CACHE}
    return {"GOCACHE": path}


def main() -> int:
    """Build this host's cache if missing (``scripts/setup.sh --system``); the process's exit status."""
    path = cache_dir()
    if path is None:
        print(f"execrl gocache: {GO} not found; nothing to build")
        return 0
    if not bind_dirs():
        print(f"execrl gocache: cannot create {cache_root()}")
        return 1
    build(path)
    print(f"execrl gocache: {path} ready")
    return 0
