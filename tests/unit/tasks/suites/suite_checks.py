"""In-process checkers for the built-in suites, independent of the sandbox and of the reward verifiers.

They re-implement just enough of each verifier (call tests, token comparison, repository test runs, exact
math answers, JSON schema plus expected values) to prove that every reference answer passes and every
wrong answer fails. The generator's own helpers are deliberately not reused, so a bug there cannot hide.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import io
import json
import re
import subprocess
import sys
import tempfile
from fractions import Fraction
from pathlib import Path
from typing import Any

import jsonschema

from execrl.sandbox.types import CallTest, CodeTest, IOTest
from execrl.tasks.schema import CodeSpec, MathSpec, StructuredSpec, Task
from execrl.tasks.suites import BUILTIN_SUITES

FENCE_RE = re.compile(r"```(\w+)?\n(.*?)```", re.DOTALL)


def fenced_code(answer: str) -> str:
    match = FENCE_RE.search(answer)
    assert match, f"no fenced block in {answer[:80]!r}"
    return match.group(2)


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return abs(a - b) <= 1e-9 + 1e-6 * abs(b)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    return bool(a == b and type(a) is type(b))


def function_results(task: Task, answer: str) -> list[bool]:
    """One bool per hidden test: the answer's function called in a fresh namespace."""
    namespace: dict[str, Any] = {"__name__": "candidate"}
    exec(compile(fenced_code(answer), task.id, "exec"), namespace)
    results = []
    for test in task.hidden_tests:
        assert isinstance(test, CallTest)
        try:
            got = json.loads(json.dumps(namespace[test.entry_point](*copy.deepcopy(test.args))))
        except (ArithmeticError, LookupError, TypeError, ValueError, AttributeError, RecursionError):
            results.append(False)
            continue
        results.append(_close(got, test.expected))
    return results


def _same_tokens(got: str, test: IOTest) -> bool:
    a, b = got.split(), test.expected_stdout.split()
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if x == y:
            continue
        if test.compare != "float":
            return False
        try:
            if abs(float(x) - float(y)) > test.abs_tol + test.rel_tol * abs(float(y)):
                return False
        except ValueError:
            return False
    return True


def stdio_python_results(task: Task, answer: str) -> list[bool]:
    """One bool per hidden test: the program run in process with the test's stdin."""
    code = compile(fenced_code(answer), task.id, "exec")
    results = []
    for test in task.hidden_tests:
        assert isinstance(test, IOTest)
        out = io.StringIO()
        saved = sys.stdin
        sys.stdin = io.StringIO(test.stdin)
        try:
            with contextlib.redirect_stdout(out):
                exec(code, {"__name__": "__main__"})
            results.append(_same_tokens(out.getvalue(), test))
        except (ArithmeticError, LookupError, TypeError, ValueError, AttributeError, EOFError):
            results.append(False)
        finally:
            sys.stdin = saved
    return results


def stdio_cpp_results(task: Task, answer: str, workdir: Path) -> list[bool]:
    source = workdir / "main.cpp"
    source.write_text(fenced_code(answer))
    binary = workdir / "main"
    subprocess.run(["g++", "-O0", "-std=c++17", "-o", str(binary), str(source)], check=True, timeout=120)
    results = []
    for test in task.hidden_tests:
        assert isinstance(test, IOTest)
        run = subprocess.run([str(binary)], input=test.stdin, capture_output=True, text=True, timeout=10)
        results.append(run.returncode == 0 and _same_tokens(run.stdout, test))
    return results


REPO_HARNESS = """
import json, os, sys
jobs = json.load(open(sys.argv[1]))
root = os.getcwd()
out = []
for job in jobs:
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # a fresh child per answer, so no imported project module leaks into the next answer
        os.close(read_fd)
        os.chdir(os.path.join(root, job["dir"]))
        sys.path.insert(0, os.getcwd())
        ns = {"__name__": "__candidate__"}
        results = []
        try:
            exec(compile(open(job["program_path"]).read(), job["program_path"], "exec"), ns)
            loaded = True
        except BaseException:
            loaded = False
        for code in job["tests"]:
            try:
                if not loaded:
                    raise RuntimeError("program failed to load")
                exec(compile(code, "<test>", "exec"), ns)
                results.append(True)
            except BaseException:
                results.append(False)
        os.write(write_fd, json.dumps(results).encode())
        os._exit(0)
    os.close(write_fd)
    data = b""
    while chunk := os.read(read_fd, 65536):
        data += chunk
    os.close(read_fd)
    os.waitpid(pid, 0)
    out.append(json.loads(data))
print(json.dumps(out))
"""


def repository_runs(batch: list[tuple[Task, list[tuple[str, bool]]]]) -> list[list[list[bool]]]:
    """For each task, for each (answer, visible) job, one bool per visible or hidden test.

    Each answer's project is written to its own temporary directory and everything runs in one
    ``python -I`` process that forks a fresh child per answer (so modules imported for one answer never
    leak into the next, at the cost of a single interpreter start).
    """
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        specs = []
        for t_index, (task, jobs) in enumerate(batch):
            spec = task.spec
            assert isinstance(spec, CodeSpec) and spec.program_path
            for j_index, (answer, visible) in enumerate(jobs):
                job_dir = f"t{t_index}_j{j_index}"
                for path, text in {**spec.files, spec.program_path: fenced_code(answer)}.items():
                    (root / job_dir / path).parent.mkdir(parents=True, exist_ok=True)
                    (root / job_dir / path).write_text(text)
                tests = task.visible_tests if visible else task.hidden_tests
                codes = [t.code for t in tests if isinstance(t, CodeTest)]
                specs.append({"dir": job_dir, "program_path": spec.program_path, "tests": codes})
        (root / "_jobs.json").write_text(json.dumps(specs))
        (root / "_harness.py").write_text(REPO_HARNESS)
        run = subprocess.run(
            [sys.executable, "-I", "_harness.py", "_jobs.json"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert run.returncode == 0, run.stderr
        flat = iter(json.loads(run.stdout))
        return [[list(next(flat)) for _ in jobs] for _, jobs in batch]


def repository_results(task: Task, answer: str, *, visible: bool = False) -> list[bool]:
    return repository_runs([(task, [(answer, visible)])])[0][0]


ANSWER_RE = re.compile(r"The answer is\s*\$?(-?[\d,]*\.?\d+(?:/\d+)?)")


def math_value(text: str) -> Fraction:
    match = ANSWER_RE.search(text)
    assert match, f"no 'The answer is' in {text!r}"
    return Fraction(match.group(1).replace(",", ""))


def math_passes(task: Task, answer: str) -> bool:
    assert isinstance(task.spec, MathSpec)
    return math_value(answer) == Fraction(task.spec.answer.replace(",", ""))


def _lookup(data: Any, path: str) -> Any:
    for part in path.split("."):
        data = data[int(part)] if isinstance(data, list) else data[part]
    return data


def structured_passes(task: Task, answer: str) -> bool:
    assert isinstance(task.spec, StructuredSpec)
    text = fenced_code(answer) if "```" in answer else answer
    data = json.loads(text)
    if not jsonschema.Draft202012Validator(dict(task.spec.json_schema)).is_valid(data):
        return False
    try:
        return all(_lookup(data, k) == v for k, v in task.spec.expected_values.items())
    except (KeyError, IndexError, TypeError, ValueError):
        return False


@functools.cache
def suite_tasks(name: str, split: str, seed: int = 0) -> tuple[Task, ...]:
    """Each suite split is built once per test session (the function suite takes about a second)."""
    return tuple(BUILTIN_SUITES[name](split, seed))


def all_tasks(seed: int = 0) -> list[Task]:
    return [
        t for name in BUILTIN_SUITES for split in ("train", "test") for t in suite_tasks(name, split, seed)
    ]
