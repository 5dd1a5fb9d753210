"""Python runtimes (issue 13): ``python-data`` imports numpy/pandas/scipy, read-only; ``python`` cannot.

Needs the runtime installed (``scripts/setup.sh`` or ``scripts/setup.sh --python-data``): without it the
first test fails with the runtime's own message, which names that command; nothing here skips.
"""

from __future__ import annotations

import pytest

from execrl.sandbox import CallTest, ExecutionRequest, IOTest, Sandbox, Verdict
from execrl.sandbox.errors import InvalidRequestError
from execrl.sandbox.langs.runtimes import Runtime, get_runtime, resolve_runtime


def test_python_data_is_installed() -> None:
    assert get_runtime("python-data").problem() is None


def test_numpy_and_pandas_programs_pass_in_python_data(sandbox: Sandbox) -> None:
    program = (
        "import numpy as np\nimport pandas as pd\nfrom scipy import optimize\n"
        "def column_mean(rows):\n    return float(pd.DataFrame(rows, columns=['a', 'b'])['b'].mean())\n"
        "def root():\n    return round(float(optimize.brentq(lambda x: x * x - 2, 0, 2)), 6)\n"
        "if __name__ == '__main__':\n    print(int(np.arange(int(input())).sum()))\n"
    )
    tests = (
        CallTest(name="mean", entry_point="column_mean", args=([[1, 2], [3, 4]],), expected=3.0),
        CallTest(name="root", entry_point="root", expected=1.414214),
        IOTest(name="io", stdin="5\n", expected_stdout="10\n"),
    )
    result = sandbox.run(
        ExecutionRequest(language="python", program=program, tests=tests, runtime="python-data")
    )
    assert result.verdict is Verdict.PASSED, result


def test_numpy_random_differs_between_executions(sandbox: Sandbox) -> None:
    """Regression: numpy is imported once in the runtime's zygote; without a reseed after the fork every
    sandbox drew the same ``np.random.rand()``."""
    request = ExecutionRequest(
        language="python", program="import numpy as np\nprint(np.random.rand())", runtime="python-data"
    )
    draws = {sandbox.run(request).stdout for _ in range(3)}
    assert len(draws) == 3


def test_import_numpy_fails_in_the_plain_runtime(sandbox: Sandbox) -> None:
    result = sandbox.run(ExecutionRequest(language="python", program="import numpy"))
    assert result.verdict is Verdict.RUNTIME_ERROR
    assert "ModuleNotFoundError: No module named 'numpy'" in result.stderr


def test_runtime_directory_is_read_only_inside(sandbox: Sandbox) -> None:
    program = (
        "import os, numpy\nd = os.path.dirname(numpy.__file__)\n"
        "assert os.statvfs(d).f_flag & os.ST_RDONLY\n"
        "try:\n    open(os.path.join(d, '__init__.py'), 'a')\nexcept OSError as e:\n    print(e.errno)\n"
    )
    result = sandbox.run(ExecutionRequest(language="python", program=program, runtime="python-data"))
    # The mount is read-only (ST_RDONLY, asserted inside); the write fails on permissions first (EACCES)
    # or on the mount (EROFS), never succeeds.
    assert result.verdict is Verdict.PASSED and result.stdout in ("13\n", "30\n")


def test_missing_runtime_names_the_setup_command(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    monkeypatch.setenv("EXECRL_RUNTIMES_DIR", str(tmp_path))
    with pytest.raises(InvalidRequestError, match=r"not installed at .*run `scripts/setup.sh --python-data`"):
        resolve_runtime("python", "python-data")


def test_runtime_is_for_python_only_and_must_exist() -> None:
    with pytest.raises(InvalidRequestError, match="applies to Python programs only"):
        resolve_runtime("cpp", "python-data")
    with pytest.raises(
        InvalidRequestError, match="unknown runtime 'conda'; known runtimes: python, python-data"
    ):
        resolve_runtime("python", "conda")
    assert resolve_runtime("python", None) == Runtime("python")
