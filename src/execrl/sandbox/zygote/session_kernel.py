"""The interpreter of a session (jail side): cells run one after another in one persistent namespace.

Runs in the session's interpreter process ``K`` (and, for setup cells, in a template, ``session_fork.py``).
Everything here runs in the same process as the cells, so after the first cell nothing it reports is
trusted: a cell can replace these functions, ``sys.stdout`` or ``os.write``. That only lets a session
lie about its own cells (its stdout, the repr of its last expression, its exception), which the caller
already treats as untrusted text; what the parent reports as the cell's verdict comes from outside the
process (time and CPU from the parent's watchdog and the slot's cgroup, memory from the cgroup's OOM
counter, crashes from the exit status of the session's pid 1), and every record is parsed with bounds
(``sessions/driver.py``).

Protocol (JSON lines): the parent writes ``{"op": "cell", "i": n, "code": ..., "max_repr": ...}`` or
``{"op": "fetch", "paths": [...], "max_file_bytes": ..., "max_bytes": ...}`` to the job pipe; the
interpreter answers ``{"kind": "ready"}`` once, then per cell ``{"kind": "cell", "i": n, "status":
"ok", "value": repr-or-null}`` or ``{"kind": "cell", "i": n, "status": "error", "type", "message",
"tb": [lines]}``, and per fetch one ``{"kind": "file", ...}`` record per path (``workfiles.fetch_all``)
then ``{"kind": "fetched"}``. A cell's stdout and stderr go straight to the session's stdout and stderr
pipes (fd 1 and 2), flushed before its record.

Interrupts: the parent interrupts a cell that hit a limit with SIGINT (relayed by the session's pid 1,
``session_worker.py``); the handler raises ``KeyboardInterrupt`` only while a cell's own code runs, so an
interrupt that lands between cells or while a record is written is dropped instead of breaking the
protocol.

Standard library only (the zygote imports this module; see ``child.py``).
"""

from __future__ import annotations

import _ast
import builtins
import contextlib
import json
import linecache
import os
import signal
import sys
import time
import traceback

from execrl.sandbox.zygote import child, jail, workfiles

# Annotations only: importing ``typing`` would add ~2 MB to the zygote, and to every fork of it.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, NoReturn

CELL_FILE = "<cell {}>"  # the file name of cell ``i`` in tracebacks (and in ``linecache``)
TRACEBACK_LINES = 40  # at most this many lines of a cell's traceback are reported
LINE_CHARS = 2000  # and each line cut at this many characters
MESSAGE_CHARS = 4000
_state = {"in_cell": False, "interrupted": False}


class Lines:
    """JSON lines from a pipe, read in chunks; ``head`` is what an earlier reader already took."""

    def __init__(self, fd: int, head: bytes = b"") -> None:
        self.fd = fd
        self.buffer = bytearray(head)

    def pending(self) -> bool:
        """A whole line is already buffered (a poll on the descriptor would not say so)."""
        return b"\n" in self.buffer

    def next(self) -> bytes | None:
        """The next line without its newline, or ``None`` at end of file."""
        while b"\n" not in self.buffer:
            data = os.read(self.fd, 1 << 20)
            if not data:
                return None
            self.buffer.extend(data)
        line, _, rest = bytes(self.buffer).partition(b"\n")
        self.buffer = bytearray(rest)
        return line


def new_namespace() -> dict[str, Any]:
    """The globals every cell of a session shares, as a script's ``__main__`` has them."""
    return {"__name__": "__main__", "__builtins__": builtins, "__doc__": None}


def send(fd: int, record: dict[str, Any]) -> None:
    child.write_all(fd, (json.dumps(record) + "\n").encode("utf-8", "backslashreplace"))


def _on_sigint(signum: int, frame: object) -> None:
    """Interrupt the cell that runs; an interrupt between cells (a late one) is dropped."""
    _state["interrupted"] = True
    if _state["in_cell"]:
        raise KeyboardInterrupt


def _reap_killed_children(wait_s: float = 0.5) -> None:
    """After an interrupt the session's pid 1 has killed every process but this one: reap those that
    were this process's own children (their zombies would count against the process limit).

    Waits (at most ``wait_s``) for the killed ones that have not exited yet: a SIGKILLed process still has
    to be scheduled to exit, and on a loaded machine returning at the first ``WNOHANG`` miss left live
    children and then zombies holding the cgroup's pids, so the next cell's ``subprocess.run`` failed with
    ``BlockingIOError`` (``test_one_forks_bombs_leave_its_sibling_working``, seen in full-suite runs). The
    bound stays well inside the parent's 1 s for an interrupted cell to stop (a 2 s bound got sessions killed
    under load: ``test_fork_bomb_is_contained_and_the_session_survives``)."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            if time.monotonic() >= deadline:
                return
            time.sleep(0.001)


def install_interrupt_handler() -> None:
    signal.signal(signal.SIGINT, _on_sigint)


def _compile(code: str, filename: str) -> tuple[Any, Any]:
    """The cell as a statement block and, when it ends with an expression, that expression on its own
    (evaluated for its repr, as Jupyter's ``execute_result``)."""
    tree: Any = compile(code, filename, "exec", _ast.PyCF_ONLY_AST, dont_inherit=True)
    last = None
    if tree.body and isinstance(tree.body[-1], _ast.Expr):  # ``_ast``: the ``ast`` module costs the zygote
        last = _ast.Expression(tree.body.pop().value)
    body = compile(tree, filename, "exec", dont_inherit=True)
    expr = compile(last, filename, "eval", dont_inherit=True) if last is not None else None
    return body, expr


def cell_traceback(exc: BaseException) -> list[str]:
    """The traceback lines of the cells' own frames: no frame of this harness and no library frame
    (whose file names are paths of the host's interpreter), each elided run counted on one line."""
    lines = ["Traceback (most recent call last):"]
    elided = 0
    for frame in traceback.extract_tb(exc.__traceback__):
        if not frame.filename.startswith("<cell "):
            elided += 1
            continue
        if elided and len(lines) > 1:
            lines.append(f"  [{elided} frame(s) outside the cells]")
        elided = 0
        lines.append(f'  File "{frame.filename}", line {frame.lineno}, in {frame.name}')
        if frame.line:
            lines.append(f"    {frame.line.strip()}")
    if elided and len(lines) > 1:
        lines.append(f"  [{elided} frame(s) outside the cells]")
    if len(lines) == 1:
        lines = []
    try:
        tail = traceback.format_exception_only(type(exc), exc)
    except Exception:  # noqa: BLE001 - a candidate exception's __str__ may raise anything
        tail = [f"{type(exc).__name__}: <str() failed>"]
    lines += "".join(tail).rstrip("\n").split("\n")
    if len(lines) > TRACEBACK_LINES:
        lines = lines[:2] + ["  [...]"] + lines[-(TRACEBACK_LINES - 3) :]
    return [line[:LINE_CHARS] for line in lines]


def _error(exc: BaseException) -> dict[str, Any]:
    try:
        message = str(exc)[:MESSAGE_CHARS]
    except Exception as inner:  # noqa: BLE001 - a candidate exception's __str__ may raise anything
        message = f"<str() failed: {type(inner).__name__}>"
    return {
        "status": "error",
        "type": type(exc).__name__[:200],
        "message": message,
        "tb": cell_traceback(exc),
    }


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        with contextlib.suppress(Exception):  # a cell may have replaced the stream with anything
            stream.flush()  # type: ignore[union-attr]


def _execute(namespace: dict[str, Any], code: str, filename: str) -> tuple[Any, BaseException | None]:
    """Run the cell's code; the interrupt handler raises only inside this window."""
    try:
        body, expr = _compile(code, filename)
    except BaseException as exc:  # noqa: BLE001 - SyntaxError and friends are the cell's result
        return None, exc
    install_interrupt_handler()  # a cell may have replaced it; set it again for every cell
    try:
        _state["in_cell"] = True
        exec(body, namespace)
        value = eval(expr, namespace) if expr is not None else None
        _state["in_cell"] = False
        return value, None
    except BaseException as exc:  # noqa: BLE001 - the cell's failure is data
        _state["in_cell"] = False
        return None, exc


def run_cell(namespace: dict[str, Any], code: str, index: int, max_repr: int) -> dict[str, Any]:
    """One cell: its record (``status`` ok with the repr of the last expression, or error)."""
    filename = CELL_FILE.format(index)
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    _state["interrupted"] = False
    try:
        value, exc = _execute(namespace, code, filename)
    except KeyboardInterrupt as late:  # the interrupt landed right after the cell's code ended
        _state["in_cell"] = False
        value, exc = None, late
    _flush()
    if _state["interrupted"]:
        _reap_killed_children()
    if exc is not None:
        return _error(exc)
    if value is None:
        return {"status": "ok", "value": None}
    namespace["_"] = value
    try:
        text = repr(value)
    except Exception as repr_exc:  # noqa: BLE001 - a value's __repr__ is the cell's code
        return _error(repr_exc)
    return {"status": "ok", "value": text[:max_repr]}


def _fetch(message: dict[str, Any], res_fd: int) -> None:
    """Read files back from the work directory (``workfiles``: no link followed, regular files only)."""
    here = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.chdir(jail.WORKDIR)
        job = {
            "fetch_files": message["paths"],
            "limits": {
                "max_fetch_file_bytes": message["max_file_bytes"],
                "max_fetch_bytes": message["max_bytes"],
            },
        }
        workfiles.fetch_all(job, lambda record: send(res_fd, record))
    finally:
        os.fchdir(here)
        os.close(here)
    send(res_fd, {"kind": "fetched"})


def serve(reader: Lines, res_fd: int, namespace: dict[str, Any]) -> NoReturn:
    """The interpreter's loop: answer ``ready``, then each message of the parent, until the job pipe
    closes (the parent ended the session)."""
    install_interrupt_handler()
    send(res_fd, {"kind": "ready"})
    while True:
        line = reader.next()
        if line is None:
            os._exit(0)
        message = json.loads(line)
        if message["op"] == "cell":
            record = run_cell(namespace, message["code"], int(message["i"]), int(message["max_repr"]))
            send(res_fd, {"kind": "cell", "i": message["i"], **record})
        elif message["op"] == "fetch":
            _fetch(message, res_fd)
