"""How ``python main.py`` ends, replayed in a candidate process with references taken before it ran.

A Python plain run (and each stdin/stdout test) runs the program in ``C``, a fork of the harness
interpreter (``child.run_main``), not in a fresh ``python`` process. The exit status is the verdict (and
SandboxFusion's ``return_code``), so what ``C`` does after the program's last line must end exactly as
CPython's own exit path would, and must not look anything up that the program could have replaced.
An earlier harness ended with ``os._exit(code)``, read from the ``os`` module after the program ran:
``import os; e = os._exit; os._exit = lambda c: e(0); assert 1 == 2`` then exited 0 (plain Python
exits 1), and SandboxFusion's anti-hack prelude ``os._exit = None`` made every program fail.

Everything below is bound when this module is imported, in the zygote, before any candidate byte
exists: ``os._exit``, ``os.kill``, the builtins it calls, the exception classes it tests by type
(never ``isinstance``, which a ``__class__`` property can answer), ``int.__index__`` (an ``int``
subclass's own value, as ``PyLong_AsLong`` reads it, not its ``__and__``), the default exception
display and ``atexit``'s runner. What it reads at exit time is only what CPython reads then, so a
program sees its own choices honoured: ``sys.stdout``/``sys.stderr``/``sys.excepthook`` as it left
them, its ``atexit`` callbacks, its non-daemon threads. The steps, after CPython 3.11's
``Py_RunMain``/``Py_FinalizeEx``:

1. ``SystemExit``: ``code`` None -> 0, an ``int`` (subclasses by value) -> its low 8 bits (255 past
   a C long), anything else printed to ``sys.stderr`` (or fd 2 when that is None) -> 1.
2. Any other uncaught exception: ``sys.excepthook(type, value, tb)`` with the harness's own frames cut
   from ``tb`` -> 1 (a missing or failing hook falls back to the default display, as CPython does;
   a hook that raises ``SystemExit`` exits with its status).
3. Non-daemon threads joined (``threading._shutdown``), ``atexit`` callbacks run.
4. ``sys.stdout`` and ``sys.stderr`` flushed unless None or closed; a failed flush makes the status
   120.
5. An uncaught ``KeyboardInterrupt`` ends by SIGINT (status -2), as ``exit_sigint`` does.

Limit, stated plainly: the candidate shares this process, so code written against this harness can
still reach these bindings (through ``sys.modules``, frames, ``gc`` or ``ctypes``) and choose its exit
status, exactly as a plain Python program can with ``atexit.register(os._exit, 0)``: the exit status
is as trustworthy as plain Python's, not more (use ``CallTest``/``IOTest`` for adversarial RL).
Module destructors at interpreter teardown (``__del__`` of module globals) are not run.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys

# Annotations only: importing ``typing`` would add ~2 MB to the zygote, and to every fork of it.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import TracebackType
    from typing import NoReturn

EXIT_FLUSH_FAILED = 120  # CPython's status when flushing sys.stdout/sys.stderr at exit fails
EXIT_SIGINT_FALLBACK = 130  # exit_sigint's status when the signal did not end the process

# Bound before any program runs (see the module docstring); never looked up again.
_exit = os._exit
_kill = os.kill
_getpid = os.getpid
_write = os.write
_signal = signal.signal
_SIGINT, _SIG_DFL = signal.SIGINT, signal.SIG_DFL
_type, _issubclass, _getattr, _str, _repr = type, issubclass, getattr, str, repr
_int, _int_index = int, int.__index__
_BaseException, _SystemExit, _KeyboardInterrupt = BaseException, SystemExit, KeyboardInterrupt
_set_traceback = BaseException.__traceback__.__set__  # type: ignore[union-attr]
_default_display = sys.__excepthook__
_run_atexit = atexit._run_exitfuncs
_modules = sys.modules
_C_LONG = 1 << 63


def exit_now(status: int) -> NoReturn:
    """``os._exit`` as it was when the harness was imported."""
    _exit(status)


def _is(exc: object, cls: type) -> bool:
    """``except cls`` semantics: by the object's real type, never its ``__class__`` attribute."""
    return _issubclass(_type(exc), cls)


def is_system_exit(exc: BaseException) -> bool:
    return _is(exc, _SystemExit)


def finish(error: BaseException | None, harness_file: str) -> int:
    """The status ``python main.py`` ends with after its program ran to the end (``error`` None) or
    raised ``error``; runs the exit steps of the module docstring on the way. Never raises.

    ``harness_file``: frames of that file are cut from the traceback the hook is shown."""
    if error is None:
        status = 0
    elif _is(error, _SystemExit):
        status = system_exit_status(error)
    else:
        status = _report_uncaught(error, harness_file)
    _finalize_interpreter()
    if not _flush_std_streams():
        status = EXIT_FLUSH_FAILED
    if error is not None and _is(error, _KeyboardInterrupt):
        status = _die_by_sigint()
    return status


def system_exit_status(exc: BaseException) -> int:
    """CPython's ``_Py_HandleSystemExit``: the status of an uncaught ``SystemExit``."""
    try:
        code = _getattr(exc, "code")
    except _BaseException:  # noqa: BLE001 - CPython then prints the exception itself
        code = exc
    if code is None:
        return 0
    if _issubclass(_type(code), _int):
        value = _int_index(code)
        return value & 0xFF if -_C_LONG <= value < _C_LONG else 0xFF
    _print_to_stderr(code)
    return 1


def _print_to_stderr(value: object) -> None:
    """``value`` and a newline on ``sys.stderr`` as the program left it, or on fd 2 if that is None."""
    try:
        text = _str(value)
        stream = sys.stderr
        if stream is None:
            _write(2, (text + "\n").encode("utf-8", "backslashreplace"))
        else:
            stream.write(text)
            stream.write("\n")
    except _BaseException:  # noqa: BLE001 - a program's stream or __str__ may raise anything
        pass


def _candidate_tb(exc: BaseException, harness_file: str) -> TracebackType | None:
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == harness_file:
        tb = tb.tb_next
    return tb


def _report_uncaught(exc: BaseException, harness_file: str) -> int:
    """``sys.excepthook`` on an uncaught exception (CPython's ``_PyErr_PrintEx``); the status, 1 unless
    the hook itself raised ``SystemExit``."""
    tb = _candidate_tb(exc, harness_file)
    try:  # noqa: SIM105 - not contextlib.suppress, whose methods the program could patch
        _set_traceback(exc, tb)  # the display reads the exception's own traceback
    except _BaseException:  # noqa: BLE001
        pass
    hook = _getattr(sys, "excepthook", None)
    try:
        if hook is None:
            _print_to_stderr("sys.excepthook is missing")
            _default_display(_type(exc), exc, tb)
        else:
            hook(_type(exc), exc, tb)
    except _BaseException as hook_error:  # noqa: BLE001 - the program's hook failed
        if _is(hook_error, _SystemExit):
            return system_exit_status(hook_error)
        _print_to_stderr("Error in sys.excepthook:")
        _display(hook_error)
        _print_to_stderr("\nOriginal exception was:")
        _display(exc)
    return 1


def _display(exc: BaseException) -> None:
    try:  # noqa: SIM105 - as above
        _default_display(_type(exc), exc, exc.__traceback__)
    except _BaseException:  # noqa: BLE001 - e.g. sys.stderr replaced by something that raises
        pass


def _finalize_interpreter() -> None:
    """``Py_FinalizeEx``'s first steps: join non-daemon threads (``threading._shutdown``, looked up in
    the loaded modules as CPython does), then the ``atexit`` callbacks (which report their own errors)."""
    threading = _modules.get("threading")
    if threading is not None:
        try:
            threading._shutdown()
        except _BaseException as exc:  # noqa: BLE001 - CPython reports it and goes on
            _unraisable(exc, "in threading._shutdown")
    try:
        _run_atexit()
    except _BaseException as exc:  # noqa: BLE001
        _unraisable(exc, "in atexit callbacks")


def _flush_std_streams() -> bool:
    """CPython's ``flush_std_files``: flush ``sys.stdout`` then ``sys.stderr`` unless None or closed;
    False when a flush raised (the status then becomes 120)."""
    ok = True
    for name in ("stdout", "stderr"):
        stream = _getattr(sys, name, None)
        if stream is None:
            continue
        try:
            if _getattr(stream, "closed", False):
                continue
        except _BaseException:  # noqa: BLE001 - CPython counts an unreadable ``closed`` as open
            pass
        try:
            stream.flush()
        except _BaseException as exc:  # noqa: BLE001
            ok = False
            if name == "stdout":
                _unraisable(exc, f"in: {_safe_repr(stream)}")
    return ok


def _safe_repr(value: object) -> str:
    try:
        return _repr(value)
    except _BaseException:  # noqa: BLE001
        return "<object>"


def _unraisable(exc: BaseException, where: str) -> None:
    """CPython's "Exception ignored ..." report, on ``sys.stderr``; never raises."""
    _print_to_stderr(f"Exception ignored {where}")
    _display(exc)


def _die_by_sigint() -> int:
    """CPython's ``exit_sigint``: end by SIGINT with its default action; 130 if that did not end us."""
    try:
        _signal(_SIGINT, _SIG_DFL)
        _kill(_getpid(), _SIGINT)
    except _BaseException:  # noqa: BLE001
        pass
    return EXIT_SIGINT_FALLBACK
