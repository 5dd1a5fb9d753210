"""The pure parts of warm starts (``sandbox/zygote/warm.py``): which jobs have a shape, the hint line on the job
pipe, and how the parent shares parked workers between shapes."""

from __future__ import annotations

import collections
import os

import pytest

from execrl.sandbox import CallTest, ExecutionRequest, IOTest, Limits
from execrl.sandbox.host.runner import job_fields
from execrl.sandbox.langs.registry import get_language
from execrl.sandbox.zygote.warm import NO_HINT, WarmChooser, encode_hint, hint, read_hint


def _job(language: str = "bash", program: str = "echo hi\n", **kwargs: object) -> dict[str, object]:
    tests = kwargs.pop("tests", (IOTest("t", "", "hi\n"),))
    request = ExecutionRequest(language=language, program=program, tests=tests, **kwargs)  # type: ignore[arg-type]
    return job_fields(request, get_language(language))


def test_a_bash_job_has_a_shape_that_ignores_the_program_and_tests() -> None:
    shape = hint(_job())
    assert shape is not None
    assert shape["capture"] is True and shape["language"]["name"] == "bash"
    assert shape["limits"] == {
        "cpu_time_s": 10.0,
        "max_file_mb": 16,
        "max_open_files": 64,
        "max_processes": 32,
    }
    other = _job(program="echo other\n", tests=(IOTest("a", "1", "1"), IOTest("b", "2", "2")))
    assert hint(other) == shape
    assert hint(_job(tests=()))["capture"] is False  # type: ignore[index]  # a plain run: stdout to the parent
    assert hint(_job(limits=Limits(cpu_time_s=3.0))) != shape


@pytest.mark.parametrize(
    "job",
    [
        pytest.param(lambda: _job("python", "print(1)"), id="python-runs-in-a-fork"),
        pytest.param(lambda: _job("c", "int main(){}"), id="compiled"),
        pytest.param(lambda: _job(limits=Limits(max_open_files=8)), id="too-few-descriptors"),
        pytest.param(
            lambda: _job(files={"big.txt": "x" * 300_000}, limits=Limits(max_file_mb=1)), id="big-file"
        ),
        pytest.param(
            lambda: _job(tests=(IOTest("t", "x" * 300_000, ""),), limits=Limits(max_file_mb=1)),
            id="big-stdin",
        ),
    ],
)
def test_jobs_that_cannot_start_warm(job: object) -> None:
    assert hint(job()) is None  # type: ignore[operator]


def test_a_call_test_has_no_shape() -> None:
    job = _job("python", "def f(x): return x", tests=(CallTest("c", "f", (1,), expected=1),))
    assert hint(job) is None


def test_the_hint_line_is_read_off_the_front_of_the_job_pipe() -> None:
    read_fd, write_fd = os.pipe()
    try:
        os.write(write_fd, encode_hint({"a": 1}) + b'{"job": 1}')
        assert read_hint(read_fd) == ({"a": 1}, b'{"job": 1}')
        os.write(write_fd, NO_HINT)
        assert read_hint(read_fd) == (None, b"")
        os.write(write_fd, b'{"job": 1}\n')
        with pytest.raises(ValueError, match="does not start with a warm-start hint"):
            read_hint(read_fd)
        os.write(write_fd, b"warm nul")
        os.close(write_fd)
        write_fd = -1
        with pytest.raises(ValueError, match="closed before"):
            read_hint(read_fd)
    finally:
        os.close(read_fd)
        if write_fd >= 0:
            os.close(write_fd)


def test_the_chooser_gives_each_shape_its_share_of_the_parked_workers() -> None:
    bash, other = _job(), _job(limits=Limits(cpu_time_s=3.0))
    python = _job("python", "print(1)")
    chooser = WarmChooser(workers=2)
    assert chooser.choice(collections.Counter()) == NO_HINT  # no history
    line = chooser.observe(bash)
    assert line == encode_hint(hint(bash))
    assert chooser.observe(python) == NO_HINT
    # bash: 1 of 2 recent requests -> 1 of 2 parked workers
    assert chooser.quota(line) == 1
    assert chooser.choice(collections.Counter()) == line
    assert chooser.choice(collections.Counter({line: 1})) == NO_HINT
    for _ in range(6):
        chooser.observe(bash)
    assert chooser.quota(line) == 2 and chooser.choice(collections.Counter({line: 1})) == line
    other_line = chooser.observe(other)
    assert chooser.quota(other_line) == 0  # 1 of 8: no parked worker of its own
    for _ in range(8):  # the window is 8 requests: bash has left it
        chooser.observe(python)
    assert chooser.quota(line) == 0
    assert chooser.choice(collections.Counter()) == NO_HINT
