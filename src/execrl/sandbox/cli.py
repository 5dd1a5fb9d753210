"""``execrl sandbox run|serve``: run one program in the sandbox, or serve the sandbox over HTTP.

This module stays cheap to import; the sandbox engine is imported by the handlers. The tests file format
and exit statuses are in ``RUN_EPILOG`` (shown by ``execrl sandbox run --help``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from execrl.sandbox.errors import InvalidRequestError, SandboxError
from execrl.sandbox.types import ExecutionRequest, ExecutionResult, Limits, TestCase, Verdict, ellipsize

__all__ = ["LANGUAGE_BY_SUFFIX", "InvalidTestsFileError", "language_for", "load_tests", "register"]

RUN_EPILOG = """\
tests file (--tests FILE): a JSON array of test objects (.json, or any file starting with '['), or one
test object per line (.jsonl; blank lines and lines starting with '#' are skipped). Each object has
"type" and the fields of the matching dataclass in execrl.sandbox.types:

  {"type": "io",   "stdin": "1 2\\n", "expected_stdout": "3\\n", "compare": "whitespace"}
  {"type": "call", "entry_point": "add", "args": [1, 2], "kwargs": {}, "expected": 3}
  {"type": "code", "code": "assert add(1, 2) == 3"}

"name" is optional (default test_<index>); "compare" is exact | whitespace | float; "rel_tol" and
"abs_tol" set float tolerances. Errors name the file, the line and the field. Without --tests the
program runs once (with --stdin) and passes if it exits 0.

exit status: 0 passed, 1 the candidate failed (any verdict but passed and sandbox_error),
2 usage error, bad input or sandbox error.
"""

LANGUAGE_BY_SUFFIX: dict[str, str] = {
    ".py": "python",
    ".cpp": "cpp",
    ".cc": "cpp",
    ".cxx": "cpp",
    ".c": "c",
    ".java": "java",
    ".js": "javascript",
    ".ts": "typescript",
    ".go": "go",
    ".rs": "rust",
    ".sh": "bash",
}
EXIT_PASSED, EXIT_FAILED, EXIT_ERROR = 0, 1, 2


class InvalidTestsFileError(InvalidRequestError):
    """A tests file cannot be read; the message names the file, the line and the field."""


def language_for(program: Path, language: str | None) -> str:
    """``language`` if given, else the one implied by the program's suffix."""
    if language:
        return language
    try:
        return LANGUAGE_BY_SUFFIX[program.suffix.lower()]
    except KeyError:
        known = ", ".join(f"{s} ({lang})" for s, lang in LANGUAGE_BY_SUFFIX.items())
        raise InvalidRequestError(
            f"{program}: cannot tell the language from the suffix {program.suffix!r}; "
            f"pass --language or use one of {known}"
        ) from None


def _read_text(path: Path, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidRequestError(
            f"{path}: {what} is not UTF-8 (invalid byte at offset {exc.start})"
        ) from None
    except OSError as exc:
        raise InvalidRequestError(f"{path}: cannot read {what}: {exc.strerror}") from None


_TOO_DEEP = "JSON nested too deeply to read (a test is a flat object)"


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    return pos


def _json_array_items(text: str, path: Path) -> Iterator[tuple[int, Any]]:
    """(line, value) of each element of a top-level JSON array, so errors can name the line."""
    decoder = json.JSONDecoder()
    pos = _skip_space(text, _skip_space(text, 0) + 1)  # past "["
    if text[pos : pos + 1] == "]":
        return
    while True:
        line = text.count("\n", 0, pos) + 1
        try:
            value, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise InvalidTestsFileError(
                f"{path}:{exc.lineno}: not JSON: {exc.msg} (column {exc.colno})"
            ) from None
        except RecursionError:  # nested past the decoder's stack
            raise InvalidTestsFileError(f"{path}:{line}: {_TOO_DEEP}") from None
        yield line, value
        pos = _skip_space(text, pos)
        if text[pos : pos + 1] == ",":
            pos = _skip_space(text, pos + 1)
            continue
        if text[pos : pos + 1] == "]" and not text[_skip_space(text, pos + 1) :]:
            return
        at = text.count("\n", 0, pos) + 1
        raise InvalidTestsFileError(
            f"{path}:{at}: expected ',' or a final ']' after the test starting at line {line}"
        )


def _jsonl_items(text: str, path: Path) -> Iterator[tuple[int, Any]]:
    decoder = json.JSONDecoder()
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip() and not line.lstrip().startswith("#"):
            try:
                yield number, decoder.decode(line)
            except json.JSONDecodeError as exc:
                raise InvalidTestsFileError(
                    f"{path}:{number}: not JSON: {exc.msg} (column {exc.colno})"
                ) from None
            except RecursionError:  # nested past the decoder's stack
                raise InvalidTestsFileError(f"{path}:{number}: {_TOO_DEEP}") from None


def load_tests(path: Path) -> tuple[TestCase, ...]:
    """Tests from a JSON array or JSONL file; ``InvalidTestsFileError`` names file, line and field."""
    text = _read_text(path, "tests file")
    is_array = path.suffix.lower() == ".json" or text.lstrip().startswith("[")
    if is_array and not text.lstrip().startswith("["):
        raise InvalidTestsFileError(f"{path}:1: a .json tests file must be a JSON array of test objects")
    from execrl.sandbox.service.serialize import (  # pydantic: only when needed
        RequestFieldError,
        case_from_dict,
    )

    tests: list[TestCase] = []
    for line, item in _json_array_items(text, path) if is_array else _jsonl_items(text, path):
        try:
            tests.append(case_from_dict(item, index=len(tests)))
        except RequestFieldError as exc:
            problems = "; ".join(f"field {p.field!r}: {p.message}" for p in exc.problems)
            hint = 'each test is an object with "type": "io" | "call" | "code"'
            raise InvalidTestsFileError(f"{path}:{line}: test {len(tests)}: {problems} ({hint})") from None
        except InvalidRequestError as exc:
            raise InvalidTestsFileError(f"{path}:{line}: test {len(tests)}: {exc}") from None
        except RecursionError:  # a decoded value nested too deep for validation to walk
            raise InvalidTestsFileError(f"{path}:{line}: test {len(tests)}: {_TOO_DEEP}") from None
    return tuple(tests)


def _build_request(args: argparse.Namespace) -> ExecutionRequest:
    program_path = Path(args.program)
    limits_kwargs: dict[str, Any] = {}
    if args.timeout_s is not None:
        limits_kwargs.update(timeout_s=args.timeout_s, cpu_time_s=args.timeout_s)
    if args.memory_mb is not None:
        limits_kwargs["memory_mb"] = args.memory_mb
    if args.compile_timeout_s is not None:
        limits_kwargs["compile_timeout_s"] = args.compile_timeout_s
    return ExecutionRequest(
        language=language_for(program_path, args.language),
        program=_read_text(program_path, "program"),
        tests=load_tests(Path(args.tests)) if args.tests else (),
        stdin=_read_text(Path(args.stdin), "stdin file") if args.stdin else "",
        limits=Limits(**limits_kwargs),
        runtime=args.runtime,
    )


def _short(text: str | None, width: int = 60) -> str:
    text = (text or "").strip().replace("\n", "\\n")
    return ellipsize(text, width)


def _test_detail(test: Any) -> str:
    if test.verdict is Verdict.WRONG_ANSWER:
        shown = f"expected {_short(test.expected, 30)!r} got {_short(test.got, 30)!r}"
        return (f"input {_short(test.input, 20)!r} " if test.input else "") + shown
    if test.error_type or test.error_message:
        return _short(f"{test.error_type or ''}: {test.error_message or ''}".strip(": "))
    return ""


def format_result(result: ExecutionResult, title: str) -> str:
    """The human verdict table printed by ``execrl sandbox run``."""
    summary = result.verdict.value
    if result.tests:
        summary += f" ({result.tests_passed}/{len(result.tests)} tests passed)"
    lines = [
        f"program  {title}",
        f"verdict  {summary}",
        f"time     wall {result.wall_time_s * 1e3:.1f} ms, cpu {result.cpu_time_s * 1e3:.1f} ms, "
        f"peak memory {result.peak_memory_mb:.1f} MB",
    ]
    if result.signal is not None or result.exit_code is not None:
        ended = f"signal {result.signal}" if result.signal is not None else f"code {result.exit_code}"
        lines.append(f"exit     {ended}" + (f" ({result.limit_kind} limit)" if result.limit_kind else ""))
    if result.sandbox_error:
        lines.append(f"sandbox  {result.sandbox_error}")
    if result.tests:
        width = max(4, *(len(t.name) for t in result.tests))
        lines.append(f"\n  {'test':<{width}}  {'verdict':<14} {'time':>9}  detail")
        for t in result.tests:
            time_ms = f"{t.wall_time_s * 1e3:.1f} ms"
            lines.append(
                f"  {t.name:<{width}}  {t.verdict.value:<14} {time_ms:>9}  {_test_detail(t)}".rstrip()
            )
    for label, text in (
        ("compile", result.compile_output),
        ("stdout", result.stdout),
        ("stderr", result.stderr),
    ):
        if text and (label != "stdout" or not result.tests):
            lines.append(f"\n--- {label} ---\n{text.rstrip()}")
    return "\n".join(lines)


def _run_handler(args: argparse.Namespace) -> int:
    from execrl.sandbox import Sandbox, SandboxConfig

    try:
        request = _build_request(args)
        with Sandbox(SandboxConfig(workers=1)) as sandbox:
            result = sandbox.run(request)
    except SandboxError as exc:  # bad input, a host the sandbox cannot run on, or a broken sandbox
        print(f"execrl sandbox run: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    if args.json:
        from execrl.sandbox.service.serialize import result_to_dict

        print(json.dumps(result_to_dict(result), indent=2))
    else:
        print(format_result(result, f"{args.program} ({request.language})"))
    if result.passed:
        return EXIT_PASSED
    return EXIT_ERROR if result.is_sandbox_error else EXIT_FAILED


def _serve_handler(args: argparse.Namespace) -> int:
    from execrl.sandbox.service.server import ServiceConfig, serve

    try:
        config = ServiceConfig(
            default_memory_mb=args.default_memory_mb,
            max_body_mb=args.max_body_mb,
            max_batch_requests=args.max_batch_requests,
            max_output_bytes=args.max_output_bytes,
            max_tests=args.max_tests,
            max_result_mb=args.max_result_mb,
            allowed_origins=tuple(args.allow_origin),
            run_code_python_runtime=None
            if args.run_code_python_runtime == "python"
            else args.run_code_python_runtime,
            run_code_typescript=args.run_code_typescript,
            run_code_console_assert=args.run_code_console_assert,
        )
        serve(
            host=args.host,
            port=args.port,
            workers=args.workers,
            config=config,
            sessions=_sessions_config(args),
        )
    except SandboxError as exc:
        print(f"execrl sandbox serve: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    return 0


def _sessions_config(args: argparse.Namespace) -> Any:
    from execrl.sandbox.service.sessions import SessionServiceConfig

    return SessionServiceConfig(
        max_sessions=args.session_max_sessions,
        max_lifetime_s=args.session_max_lifetime_s,
        max_memory_mb=args.session_max_memory_mb,
        max_forks_per_call=args.session_max_forks,
        allow_templates=args.session_templates,
    )


def _add_session_options(serve: argparse.ArgumentParser) -> None:
    """The caps of ``/v1/sessions`` and ``/run_jupyter`` (``sandbox/service/sessions.py``)."""
    serve.add_argument(
        "--session-max-sessions", type=int, default=32, help="sessions open at once (429 above)"
    )
    serve.add_argument(
        "--session-max-lifetime-s", type=float, default=3600.0, help="cap on a session's limits.lifetime_s"
    )
    serve.add_argument(
        "--session-max-memory-mb", type=int, default=2048, help="cap on a session's limits.memory_mb"
    )
    serve.add_argument("--session-max-forks", type=int, default=16, help="cap on forks per fork call")
    serve.add_argument(
        "--session-templates",
        action="store_true",
        help="serve session templates (forkable; their setup cells hold the capabilities a fork's jail "
        "needs, inside the template's own user namespace: only for clients whose setup code you trust)",
    )


def _add_run(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    run = sub.add_parser(
        "run",
        help="run one program (optionally against tests) in the sandbox",
        description="Run PROGRAM in the sandbox and print its verdict. Exit 0 passed, 1 failed, 2 error.",
        epilog=RUN_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument("program", help="source file (.py .c .cpp .java .js .ts .go .rs .sh)")
    run.add_argument("--language", help="a language of `execrl sandbox languages` (default: from the suffix)")
    run.add_argument("--tests", metavar="FILE", help="JSON array or JSONL file of tests (see below)")
    run.add_argument("--stdin", metavar="FILE", help="file fed to the program's stdin (plain run)")
    run.add_argument("--timeout-s", type=float, help="wall-clock and CPU-time limit in seconds (default 10)")
    run.add_argument("--memory-mb", type=int, help="memory limit in MiB (default 512)")
    run.add_argument(
        "--compile-timeout-s",
        type=float,
        help="CPU and wall-clock limit of the compile step in seconds (default: the language's, "
        "`execrl sandbox languages`); a compiler that uses no CPU for --timeout-s is stopped sooner",
    )
    run.add_argument(
        "--runtime",
        help="Python runtime: python (default, standard library) or python-data (numpy, pandas, ...)",
    )
    run.add_argument("--json", action="store_true", help="print the result object as JSON")
    run.set_defaults(func=_run_handler)


def _add_caps(serve: argparse.ArgumentParser) -> None:
    """The per-request caps of ``execrl sandbox serve`` (each answered 422/413 naming the field)."""
    serve.add_argument("--max-tests", type=int, default=1024, help="cap on tests per execution (422 above)")
    serve.add_argument(
        "--run-code-python-runtime",
        default="auto",
        help="runtime of /run_code's python: auto (default: python-data when installed, as SandboxFusion's "
        "Python has numpy), python (the standard library) or python-data (required)",
    )
    serve.add_argument(
        "--run-code-typescript",
        choices=("transpile", "check"),
        default="transpile",
        help="/run_code's typescript: transpile (default, types ignored as SandboxFusion's tsx) or check",
    )
    serve.add_argument(
        "--run-code-console-assert",
        choices=("log", "fail"),
        default="log",
        help="a failed console.assert in /run_code's JavaScript/TypeScript: log (default, as SandboxFusion) "
        "or fail (exit status 1)",
    )
    serve.add_argument(
        "--max-batch-requests", type=int, default=1024, help="cap on requests per batch (422 above)"
    )
    serve.add_argument(
        "--max-result-mb",
        type=int,
        default=256,
        help="cap on the output one request (or batch) may make the server hold, worst case (422 above)",
    )
    serve.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="browser origin (https://host[:port]) allowed to call the API; repeatable. POSTs with any "
        "other Origin header answer 403 (default: none)",
    )


def _add_serve(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = sub.add_parser(
        "serve",
        help="serve the sandbox over HTTP (execrl API + SandboxFusion /run_code)",
        description="HTTP service: POST /v1/execute, /v1/execute_batch, /run_code and /run_jupyter "
        "(SandboxFusion), /v1/sessions (sessions), GET /v1/ping.",
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8080, help="port (default 8080; 0 picks a free one)")
    serve.add_argument("--workers", type=int, default=None, help="sandbox workers (default: the sandbox's)")
    serve.add_argument(
        "--default-memory-mb", type=int, default=1024, help="memory limit for /run_code's memory_limit_MB=-1"
    )
    serve.add_argument(
        "--max-body-mb", type=int, default=64, help="largest request body accepted (413 above)"
    )
    serve.add_argument(
        "--max-output-bytes",
        type=int,
        default=4 << 20,
        help="cap on limits.max_output_bytes, per stream (422 above)",
    )
    _add_caps(serve)
    _add_session_options(serve)
    serve.set_defaults(func=_serve_handler)


def _languages_handler(args: argparse.Namespace) -> int:
    from execrl.sandbox.langs.registry import describe_languages

    rows = describe_languages()
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{'language':<11} {'available':<10} {'tests':<15} {'compile s':>9}  package / missing")
    for row in rows:
        state = "yes" if row["available"] else "NO"
        note = (
            row["package"] if row["available"] else f"install {row['package']} ({', '.join(row['missing'])})"
        )
        compile_s = f"{row['compile_timeout_s']:.0f}" if row["compile_timeout_s"] else "-"
        print(f"{row['name']:<11} {state:<10} {','.join(row['test_kinds']):<15} {compile_s:>9}  {note}")
    return 0 if all(row["available"] for row in rows) else EXIT_FAILED


def _add_languages(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    languages = sub.add_parser(
        "languages",
        help="list the sandbox's languages and whether this host has their toolchains",
        description="List the registered languages, their test kinds, default compile limit and the Debian "
        "package of their toolchain. Exit 0 if every toolchain is present, 1 if one is missing.",
    )
    languages.add_argument("--json", action="store_true", help="print a JSON array")
    languages.set_defaults(func=_languages_handler)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``execrl sandbox run|serve|languages``."""
    sandbox = subparsers.add_parser("sandbox", help="run programs in the isolated sandbox, or serve it")
    sub = sandbox.add_subparsers(dest="sandbox_command", metavar="COMMAND", required=True)
    _add_run(sub)
    _add_serve(sub)
    _add_languages(sub)
