"""Task files are streamed line by line with caps on one line and on the decompressed total (issue 14,
class 4). Regression: a 2 MB ``.jsonl.gz`` that inflates to 2 GiB drove ``execrl tasks check`` to 19 GB,
because the loader read and split the whole file; a line nested 100,000 deep raised RecursionError.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import execrl
from execrl.tasks import TaskSourceError, TaskValidationError
from execrl.tasks.storage import iter_raw_rows, load_tasks

SRC = str(Path(execrl.__file__).resolve().parents[1])  # the execrl under test, for subprocesses
MEMBER_BYTES = 1 << 20


def _bomb(path: Path, unit: bytes, members: int = 2048) -> Path:
    """``members`` concatenated gzip members of 1 MiB each: ~2 MB on disk, ``members`` MiB inflated."""
    member = gzip.compress(unit * (MEMBER_BYTES // len(unit)), compresslevel=9)
    with path.open("wb") as fh:
        for _ in range(members):
            fh.write(member)
    return path


# Runs in a fresh, small interpreter: it caps the address space, runs the CLI and prints the CLI's peak
# RSS. Measured from the test process itself, a forked child's ru_maxrss starts at the test process's own
# RSS (the pages it shares until exec), which is ~800 MB once torch is loaded in a full-suite session.
_MEASURE = """
import resource, subprocess, sys
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
done = subprocess.run([sys.executable, "-m", "execrl.cli", *sys.argv[1:]], stdout=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, done.returncode)
"""


def _run_cli_measured(*args: str) -> tuple[int, str, int]:
    """Run ``execrl`` under a 3 GiB address-space cap; returns (exit status, stderr, peak RSS in KiB)."""
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": SRC},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    peak_kib, code = (int(x) for x in done.stdout.split())
    return code, done.stderr, peak_kib


@pytest.mark.parametrize(
    ("unit", "expected"),
    [
        (b"\0", r":1: line longer than 67108864 bytes"),  # one endless line of NULs
        (b" ", r":1: line longer than 67108864 bytes"),  # one endless line of spaces
        (b"\n", r": more than 1073741824 bytes after decompression"),  # a billion blank lines
        (b"{}\n", r"stopped reading after 1000 bad rows"),  # endless bad rows
    ],
)
def test_gzip_bomb_fails_fast_with_bounded_memory(tmp_path: Path, unit: bytes, expected: str) -> None:
    bomb = _bomb(tmp_path / "bomb.jsonl.gz", unit)
    assert bomb.stat().st_size < 3 << 20
    code, err, peak_kib = _run_cli_measured("tasks", "check", str(bomb))
    assert code == 2, err[-2000:]
    assert str(bomb) in err and expected in err and "Traceback" not in err
    # 448 MiB: the CLI's import baseline grew to ~411 MiB with this round's packages (tools, serve tool calls,
    # prompt lengths); a bomb that were read whole would need > 64 MiB more on top. To do: trim the imports.
    assert peak_kib < 448 * 1024, f"peak RSS {peak_kib} KiB"


def _task_line(task_id: str) -> str:
    return json.dumps(
        {
            "id": task_id,
            "domain": "math",
            "prompt": "1+1?",
            "spec": {"type": "math", "answer": "2"},
            "metadata": {"family": "add"},
        }
    )


def test_line_cap_names_file_and_line(tmp_path: Path) -> None:
    from execrl.inputs import ReadLimits

    path = tmp_path / "t.jsonl"
    path.write_text(_task_line("a") + "\n" + _task_line("b" * 500) + "\n")
    with pytest.raises(TaskSourceError, match=rf"{path}:2: line longer than 300 bytes"):
        list(iter_raw_rows(path, limits=ReadLimits(max_line_bytes=300)))


def test_total_cap_counts_decompressed_bytes(tmp_path: Path) -> None:
    from execrl.inputs import ReadLimits

    path = tmp_path / "t.jsonl.gz"
    path.write_bytes(gzip.compress(("\n".join(_task_line(str(i)) for i in range(100)) + "\n").encode()))
    limits = ReadLimits(max_total_bytes=4000)
    with pytest.raises(TaskSourceError, match="more than 4000 bytes after decompression"):
        list(iter_raw_rows(path, limits=limits))


def test_rows_stream_and_compressed_rows_load(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl.gz"
    path.write_bytes(gzip.compress(f"{_task_line('a')}\n\n\r\n{_task_line('b')}".encode()))
    assert [t.id for t in load_tasks(path)] == ["a", "b"]
    assert [r.location for r in iter_raw_rows(path)] == [f"{path}:1", f"{path}:4"]


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b'{"id": "a"}\n\xff\xfe{}\n', r":2: not UTF-8 text \(invalid byte 0xff at column 1\)"),
        (b'{"id": "a"}\n{"x": "\x00"}\n', r":2: binary data \(a NUL byte\)"),
    ],
)
def test_non_utf8_and_binary_lines_name_the_line(tmp_path: Path, data: bytes, expected: str) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(data)
    with pytest.raises(TaskSourceError, match=expected):
        load_tasks(path)


@pytest.mark.parametrize("depth", [300, 100_000])
def test_deeply_nested_line_is_a_row_error(tmp_path: Path, depth: int) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(_task_line("a") + "\n" + "[" * depth + "]" * depth + "\n")
    with pytest.raises(TaskValidationError) as info:
        load_tasks(path)
    assert [str(e) for e in info.value.errors] == [f"{path}:2: row: JSON nested deeper than 200 levels"]


def test_directory_and_missing_paths_are_source_errors(tmp_path: Path) -> None:
    with pytest.raises(TaskSourceError, match=f"{tmp_path}: is a directory"):
        load_tasks(tmp_path)
    with pytest.raises(FileNotFoundError, match="no such task file"):
        load_tasks(tmp_path / "nope.jsonl")
    os.mkfifo(tmp_path / "fifo.jsonl")  # opening it would block until a writer came
    with pytest.raises(TaskSourceError, match="fifo.jsonl: not a regular file"):
        load_tasks(tmp_path / "fifo.jsonl")


def test_json_array_file_is_capped_and_depth_checked(tmp_path: Path) -> None:
    from execrl.inputs import ReadLimits

    path = tmp_path / "rows.json"
    path.write_text("[" + ",".join(_task_line(str(i)) for i in range(3)) + "]")
    assert [t.id for t in load_tasks(path)] == ["0", "1", "2"]
    with pytest.raises(TaskSourceError, match=f"{path}: larger than 100 bytes"):
        list(iter_raw_rows(path, limits=ReadLimits(max_document_bytes=100)))
    path.write_text("[" * 5000 + "]" * 5000)
    with pytest.raises(TaskValidationError, match="JSON nested deeper than 200 levels"):
        load_tasks(path)


def test_json_text_inside_a_row_is_depth_checked_too(tmp_path: Path) -> None:
    """LiveCodeBench and APPS keep test cases as JSON text inside a string: the row parses, the string
    raised RecursionError when decoded."""
    from execrl.tasks import import_livecodebench

    fixtures = Path(__file__).resolve().parents[2] / "fixtures" / "tasks"
    rows = [json.loads(line) for line in (fixtures / "livecodebench.jsonl").read_text().splitlines()]
    rows[0]["private_test_cases"] = "[" * 100_000 + "]" * 100_000
    case = {"input": "[" * 5000 + "]" * 5000, "output": "1", "testtype": "functional"}
    rows[1]["public_test_cases"] = json.dumps([case])
    path = tmp_path / "lcb.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    with pytest.raises(TaskValidationError) as info:
        import_livecodebench(path)
    assert [(e.location, e.field) for e in info.value.errors] == [
        (f"{path}:1", "private_test_cases"),
        (f"{path}:2", "public_test_cases[0]"),
    ]
    assert all("nested deeper than 200 levels" in e.message for e in info.value.errors)
