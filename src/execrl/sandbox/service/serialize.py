"""JSON <-> sandbox dataclasses, shared by the HTTP service, the CLI and any client.

The JSON form of an ``ExecutionRequest`` is the dataclass with each test tagged by ``"type"``:

    {"language": "python", "program": "def add(a, b):\\n    return a + b\\n",
     "tests": [{"type": "call", "name": "t1", "entry_point": "add", "args": [1, 2], "expected": 3},
               {"type": "io", "stdin": "1 2\\n", "expected_stdout": "3\\n", "compare": "whitespace"},
               {"type": "code", "code": "assert add(2, 2) == 4"}],
     "stdin": "", "files": {"data.txt": "..."}, "files_base64": {"image.png": "iVBORw0..."},
     "program_path": null, "limits": {"timeout_s": 5, "memory_mb": 256}, "stop_on_first_failure": false,
     "fetch_files": ["out.csv"], "runtime": null}

Every key except ``language`` and ``program`` may be omitted (the dataclass default applies); a test's
``name`` defaults to ``test_<index>``. The test models here are the only schema of a test case: task files
(``execrl.tasks.serialize``) parse their tests with ``build_case`` too. Parsing is strict: wrong types (``"5"`` for a number), unknown keys
(typos such as ``timeout`` for ``timeout_s``) and strings that are not valid Unicode (lone surrogates from
``"\\ud800"`` escapes) are rejected with a ``RequestFieldError`` naming the field, e.g.
``tests[2].expected_stdout: Field required``; an empty program or a limit out of range is reported the
same way (field ``program``/``limits``), and so are tolerances that are negative or not finite and
file paths the work directory cannot hold (NUL, '.', '..', absolute, over NAME_MAX, clashing; field
``files``/``program_path``). Unique test names are the dataclass's own check (``InvalidRequestError``).

Results serialise with the verdict as its string value plus the derived ``passed`` and ``pass_fraction``
(ignored when read back); fetched ``files`` are base64 strings. Strings that cannot be encoded as UTF-8 are written with U+FFFD replacements so
that a candidate printing invalid bytes can never break the JSON encoder.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from execrl.sandbox.errors import InvalidRequestError
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
    fetch_path_problems,
    work_path_problems,
    workdir_space_problems,
)

__all__ = [
    "CASE_MODELS",
    "FieldProblem",
    "RequestFieldError",
    "build_case",
    "decode_base64_files",
    "find_unencodable",
    "problems_from_validation_error",
    "request_from_dict",
    "request_to_dict",
    "result_from_dict",
    "result_to_dict",
    "case_from_dict",
    "case_to_dict",
]

_LIMITS = Limits()
_CALL = CallTest(name="_", entry_point="_")
_IO = IOTest(name="_", stdin="", expected_stdout="")
_DERIVED_RESULT_KEYS = frozenset({"passed", "pass_fraction", "tests_passed"})


@dataclasses.dataclass(frozen=True)
class FieldProblem:
    """One invalid field: ``field`` is a dotted path such as ``tests[2].expected_stdout``."""

    field: str
    message: str
    kind: str = "value_error"


class RequestFieldError(InvalidRequestError):
    """A JSON request does not match the schema; ``problems`` names every offending field."""

    def __init__(self, problems: Sequence[FieldProblem]) -> None:
        self.problems = tuple(problems)
        super().__init__("; ".join(f"{p.field}: {p.message}" for p in self.problems))


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


# A negative tolerance made math.isclose raise while judging (HTTP 500); NaN accepted nothing.
_Tolerance = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class _CodeTestModel(_Strict):
    type: Literal["code"]
    name: str | None = None
    code: str


class _CallTestModel(_Strict):
    type: Literal["call"]
    name: str | None = None
    entry_point: str
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    expected: Any = None
    rel_tol: _Tolerance = _CALL.rel_tol
    abs_tol: _Tolerance = _CALL.abs_tol


class _IOTestModel(_Strict):
    type: Literal["io"]
    name: str | None = None
    stdin: str = ""
    expected_stdout: str
    compare: Literal["exact", "whitespace", "float"] = _IO.compare
    rel_tol: _Tolerance = _IO.rel_tol
    abs_tol: _Tolerance = _IO.abs_tol


_TestModel = Annotated[_CodeTestModel | _CallTestModel | _IOTestModel, Field(discriminator="type")]


_TEST_ADAPTER: TypeAdapter[_CodeTestModel | _CallTestModel | _IOTestModel] = TypeAdapter(_TestModel)
CASE_MODELS: dict[str, type[BaseModel]] = {"code": _CodeTestModel, "call": _CallTestModel, "io": _IOTestModel}
_TEST_TAGS = frozenset(CASE_MODELS)


class LimitsModel(_Strict):
    timeout_s: float = _LIMITS.timeout_s
    cpu_time_s: float = _LIMITS.cpu_time_s
    memory_mb: int = _LIMITS.memory_mb
    max_processes: int = _LIMITS.max_processes
    max_output_bytes: int = _LIMITS.max_output_bytes
    max_file_mb: int = _LIMITS.max_file_mb
    max_open_files: int = _LIMITS.max_open_files
    workdir_mb: int = _LIMITS.workdir_mb
    workdir_inodes: int = _LIMITS.workdir_inodes
    compile_timeout_s: float | None = _LIMITS.compile_timeout_s
    max_fetch_file_bytes: int = _LIMITS.max_fetch_file_bytes
    max_fetch_bytes: int = _LIMITS.max_fetch_bytes


class ExecutionRequestModel(_Strict):
    language: str
    program: str
    tests: list[_TestModel] = []
    stdin: str = ""
    files: dict[str, str] = {}
    files_base64: dict[str, str] = {}
    program_path: str | None = None
    limits: LimitsModel = LimitsModel()
    stop_on_first_failure: bool = False
    fetch_files: list[str] = []
    runtime: str | None = None


def decode_base64_files(encoded: Mapping[str, str | None], field: str) -> dict[str, bytes]:
    """``{path: bytes}`` from ``{path: base64}``; ``None`` values are skipped (SandboxFusion's ``files``
    allows them). Raises ``RequestFieldError`` naming ``<field>.<path>``."""
    out: dict[str, bytes] = {}
    for path, text in encoded.items():
        if text is None:
            continue
        try:
            out[path] = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise RequestFieldError([FieldProblem(f"{field}.{path}", f"must be base64 ({exc})")]) from None
    return out


def _files(model: ExecutionRequestModel, field: str) -> dict[str, str | bytes]:
    binary = decode_base64_files(model.files_base64, f"{field}files_base64")
    both = sorted(set(binary) & set(model.files))
    if both:
        raise RequestFieldError([FieldProblem(f"{field}files_base64", f"{both[0]!r} is also in files")])
    return {**model.files, **binary}


def _format_loc(loc: Sequence[int | str], prefix: str = "") -> str:
    out = prefix
    for position, part in enumerate(loc):
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in _TEST_TAGS and position >= 2 and loc[position - 2] == "tests":
            continue  # pydantic names the union member that failed; the index already says which test
        else:
            out += f".{part}" if out else str(part)
    return out or "body"


def problems_from_validation_error(
    exc: ValidationError, prefix: str = "", *, tagged_union: bool = False
) -> list[FieldProblem]:
    """Turn pydantic's error list into ``FieldProblem``s with ``a.b[2].c`` paths under ``prefix``.

    ``tagged_union``: the model validated was a bare test union, whose member tag leads every path.
    """
    problems = []
    for err in exc.errors(include_url=False):
        loc = (
            err["loc"][1:]
            if tagged_union and err["loc"][:1] in (("code",), ("call",), ("io",))
            else err["loc"]
        )
        message = err["msg"].removeprefix("Value error, ")  # pydantic's prefix for our own validators
        problems.append(FieldProblem(field=_format_loc(loc, prefix), message=message, kind=err["type"]))
    return problems


def find_unencodable(value: Any, path: str = "") -> str | None:
    """The path of the first string in a decoded JSON value that is not valid Unicode (lone surrogates).

    ``"body"`` stands for the value itself; ``None`` means everything encodes.
    """
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return path or "body"
        return None
    items: list[tuple[str, Any]] = []
    if isinstance(value, Mapping):
        for key, item in value.items():
            child = f"{path}.{key}" if path else str(key)
            items += [(f"{child} (key)", key), (child, item)]
    elif isinstance(value, list | tuple):
        items = [(f"{path}[{index}]", item) for index, item in enumerate(value)]
    for child_path, item in items:
        found = find_unencodable(item, child_path)
        if found:
            return found
    return None


def _check_unicode(data: Any, prefix: str) -> None:
    bad = find_unencodable(data, prefix)
    if bad is not None:
        raise RequestFieldError([FieldProblem(bad, "string is not valid Unicode (lone surrogate)")])


def _test_from_model(model: _CodeTestModel | _CallTestModel | _IOTestModel, index: int) -> TestCase:
    fields = model.model_dump(exclude={"type"})
    fields["name"] = model.name if model.name is not None else f"test_{index}"
    if isinstance(model, _CodeTestModel):
        return CodeTest(**fields)
    if isinstance(model, _CallTestModel):
        fields["args"] = tuple(model.args)
        return CallTest(**fields)
    return IOTest(**fields)


def build_case(data: Any, *, index: int = 0) -> TestCase:
    """The one parser of a test's JSON object, for requests and task files alike.

    Raises pydantic's ``ValidationError``; its error locations start with the member tag (``"io"``).
    ``execrl.tasks`` words those errors for task files, ``case_from_dict`` for requests. Unicode is not
    checked here (callers report lone surrogates under their own paths).
    """
    return _test_from_model(_TEST_ADAPTER.validate_python(data), index)


def case_from_dict(data: Any, *, index: int = 0, prefix: str = "") -> TestCase:
    """One test from its JSON object (``"type"``: ``io`` | ``call`` | ``code``); errors name the field."""
    _check_unicode(data, prefix)
    try:
        return build_case(data, index=index)
    except ValidationError as exc:
        raise RequestFieldError(problems_from_validation_error(exc, prefix, tagged_union=True)) from None


def request_from_dict(data: Any, *, prefix: str = "") -> ExecutionRequest:
    """Validate a decoded JSON object and build the ``ExecutionRequest``.

    Raises ``RequestFieldError`` for schema problems and ``InvalidRequestError`` for values the dataclasses
    reject (for example ``limits.timeout_s`` out of range or an empty program).
    """
    _check_unicode(data, prefix)
    try:
        model = ExecutionRequestModel.model_validate(data)
    except ValidationError as exc:
        raise RequestFieldError(problems_from_validation_error(exc, prefix)) from None
    field = f"{prefix}." if prefix else ""
    if not model.program.strip():
        raise RequestFieldError([FieldProblem(f"{field}program", "is empty; pass the source code to run")])
    try:
        limits = Limits(**model.limits.model_dump())
    except InvalidRequestError as exc:  # the message names the exact limit and its range
        raise RequestFieldError([FieldProblem(f"{field}limits", str(exc))]) from None
    files = _files(model, field)
    paths = (
        work_path_problems(list(files), model.program_path)
        or workdir_space_problems(files, model.program, limits)
        or fetch_path_problems(model.fetch_files)
    )
    if paths:
        raise RequestFieldError([FieldProblem(f"{field}{name}", problem) for name, problem in paths])
    return ExecutionRequest(
        language=model.language,
        program=model.program,
        tests=tuple(_test_from_model(t, i) for i, t in enumerate(model.tests)),
        stdin=model.stdin,
        files=files,
        program_path=model.program_path,
        limits=limits,
        stop_on_first_failure=model.stop_on_first_failure,
        fetch_files=tuple(model.fetch_files),
        runtime=model.runtime,
    )


def case_to_dict(test: TestCase) -> dict[str, Any]:
    """The JSON object of one test, tagged with its ``"type"``."""
    kind = {CodeTest: "code", CallTest: "call", IOTest: "io"}[type(test)]
    out: dict[str, Any] = {"type": kind, **dataclasses.asdict(test)}
    if isinstance(test, CallTest):
        out["args"] = list(test.args)
        out["kwargs"] = dict(test.kwargs)
    return out


def request_to_dict(request: ExecutionRequest) -> dict[str, Any]:
    """The JSON object of a request; ``request_from_dict(request_to_dict(r)) == r`` for JSON-valued tests."""
    return {
        "language": request.language,
        "program": request.program,
        "tests": [case_to_dict(t) for t in request.tests],
        "stdin": request.stdin,
        "files": {path: text for path, text in request.files.items() if isinstance(text, str)},
        "files_base64": {
            path: base64.b64encode(data).decode()
            for path, data in request.files.items()
            if isinstance(data, bytes)
        },
        "program_path": request.program_path,
        "limits": dataclasses.asdict(request.limits),
        "stop_on_first_failure": request.stop_on_first_failure,
        "fetch_files": list(request.fetch_files),
        "runtime": request.runtime,
    }


def _clean_str(text: str) -> str:
    """Bytes smuggled in as surrogate escapes become U+FFFD; other lone surrogates become '?'."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        pass
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")


def _clean(value: Any) -> Any:
    """``_clean_str`` applied to every string of a JSON-like value."""
    if isinstance(value, str):
        return _clean_str(value)
    if isinstance(value, dict):
        return {key: _clean(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(item) for item in value]
    return value


def result_to_dict(result: ExecutionResult) -> dict[str, Any]:
    """The JSON object of a result: dataclass fields, verdicts as strings, plus ``passed``/``pass_fraction``."""
    out: dict[str, Any] = dataclasses.asdict(result)
    out["files"] = {path: base64.b64encode(data).decode() for path, data in result.files.items()}
    out["verdict"] = result.verdict.value
    out["tests"] = [{**dataclasses.asdict(t), "verdict": t.verdict.value} for t in result.tests]
    out["passed"] = result.passed
    out["pass_fraction"] = result.pass_fraction
    cleaned: dict[str, Any] = _clean(out)
    return cleaned


def result_from_dict(data: Mapping[str, Any]) -> ExecutionResult:
    """Inverse of ``result_to_dict`` (derived keys are ignored; unknown keys raise ``TypeError``)."""
    fields = {k: v for k, v in data.items() if k not in _DERIVED_RESULT_KEYS}
    tests = tuple(TestResult(**{**t, "verdict": Verdict(t["verdict"])}) for t in fields.pop("tests", ()))
    files = {path: base64.b64decode(text) for path, text in fields.pop("files", {}).items()}
    return ExecutionResult(
        **{**fields, "verdict": Verdict(fields["verdict"]), "tests": tests, "files": files}
    )
