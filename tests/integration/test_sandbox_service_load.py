"""A bounded load test of ``execrl sandbox serve``: many clients, mixed valid, oversized and malformed requests.

Guards issue 14, class 1 (and the edges of classes 2, 8, 9 under load): the server must answer every valid
request with its verdict and every bad one with a 4xx JSON error, and its memory must come back: the RSS
after the run stays within ``RSS_BOUND_MB`` of the RSS before it (measured after a warm-up round of every
kind, so imports and caches are already paid). Loopback only; every loop is bounded (``ROUNDS`` per
client) and each request has a timeout, so the test ends by itself in well under a minute.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

EXECRL = str(Path(sys.executable).with_name("execrl"))
CLIENTS = 16
ROUNDS = 5  # each client sends every case this many times
RSS_BOUND_MB = 48
OUTPUT_CAP = 1 << 18  # --max-output-bytes: 256 KiB per stream

PY = "python"
BIG = f"import sys\nsys.stdout.write('x' * {OUTPUT_CAP})\nsys.stdout.write('y' * {4 * OUTPUT_CAP})\n"
ADD = "def add(a, b):\n    return a + b\n"
CALL = {"type": "call", "entry_point": "add", "args": [1, 2]}

# (name, path, body bytes, headers, expected status, expected verdict or error field)
JSON_HEADERS = {"Content-Type": "application/json"}


def _json(value: Any) -> bytes:
    return json.dumps(value).encode()


def _execute(**fields: Any) -> bytes:
    return _json({"language": PY, "program": "print(1)", **fields})


VALID = [
    ("passed", "/v1/execute", _execute(program=ADD, tests=[{**CALL, "expected": 3}]), 200, "passed"),
    ("wrong", "/v1/execute", _execute(program=ADD, tests=[{**CALL, "expected": 4}]), 200, "wrong_answer"),
    ("big_output", "/v1/execute", _execute(program=BIG, limits={"max_output_bytes": OUTPUT_CAP}), 200, "output_limit"),
    ("run_code", "/run_code", _json({"code": "print(2)", "language": PY}), 200, "Success"),
    ("run_code_big", "/run_code", _json({"code": BIG, "language": PY}), 200, "Failed"),
    ("batch", "/v1/execute_batch", _json({"requests": [{"language": PY, "program": f"print({i})"} for i in range(3)]}), 200, "passed"),
]  # fmt: skip
BAD = [
    ("output_cap", "/v1/execute", _execute(limits={"max_output_bytes": 1 << 30}), 422, "limits.max_output_bytes"),
    ("tests_cap", "/v1/execute", _execute(tests=[{"type": "code", "code": "pass"}] * 40), 422, "tests"),
    ("batch_cap", "/v1/execute_batch", _json({"requests": [{"language": PY, "program": "1"}] * 40}), 422, "requests"),
    ("body_cap", "/run_code", b"x" * (2 << 20), 413, "/run_code"),
    ("not_json", "/v1/execute", b"{nope", 422, "body"),
    ("deep", "/v1/execute", b"[" * 5000 + b"]" * 5000, 422, "body"),
    ("tolerance", "/v1/execute", _execute(tests=[{**CALL, "expected": 3, "rel_tol": -1.0}]), 422, "tests[0].rel_tol"),
    ("nul_file", "/v1/execute", _execute(files={"a\x00": "x"}), 422, "files"),
    ("language", "/run_code", _json({"code": "x", "language": "cobol"}), 422, "language"),
]  # fmt: skip
HEADER_BAD = [
    ("text_plain", "/run_code", {"Content-Type": "text/plain"}, 415, "Content-Type"),
    ("origin", "/v1/execute", {**JSON_HEADERS, "Origin": "https://evil.example"}, 403, "Origin"),
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    options = ["--max-output-bytes", str(OUTPUT_CAP), "--max-tests", "32", "--max-batch-requests", "16"]
    command = [EXECRL, "sandbox", "serve", "--host", "127.0.0.1", "--port", "0", "--workers", "2", *options]
    command += ["--max-body-mb", "1", "--max-result-mb", "16"]
    log = (tmp_path_factory.mktemp("serve") / "stderr.log").open("w")  # a pipe nobody reads could fill
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, text=True)
    assert process.stdout is not None
    line = process.stdout.readline()
    if "listening on" not in line:
        process.kill()
        pytest.fail(f"server did not start: {line!r}")
    yield line.split("listening on ", 1)[1].strip(), process.pid
    process.send_signal(signal.SIGTERM)
    process.communicate(timeout=30)
    log.close()
    assert process.returncode == 0


def _send(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, Any]:
    request = urllib.request.Request(url, data=body, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _outcome(status: int, body: Any) -> str:
    """What a response says: the verdict (or SandboxFusion status) for a 200, the error's field else."""
    if status != 200:
        field: str = body["detail"][0]["field"]
        assert body["error"].startswith(f"{field}: ")
        return field
    if "results" in body:
        verdicts = {r["verdict"] for r in body["results"]}
        return verdicts.pop() if len(verdicts) == 1 else f"mixed {sorted(verdicts)}"
    return str(body.get("verdict") or body.get("status"))


def _cases() -> list[tuple[str, str, bytes, dict[str, str], int, str]]:
    cases = [(name, path, body, JSON_HEADERS, status, want) for name, path, body, status, want in VALID + BAD]
    raw = _json({"code": "print(1)", "language": PY})
    return cases + [
        (name, path, raw, headers, status, want) for name, path, headers, status, want in HEADER_BAD
    ]


def _client(url: str, rounds: int) -> list[tuple[str, int, str, int, str]]:
    """Send every case ``rounds`` times; (case, expected status, expected outcome, got status, got outcome)."""
    seen = []
    for _ in range(rounds):
        for name, path, body, headers, status, want in _cases():
            got_status, got_body = _send(url + path, body, headers)
            seen.append((name, status, want, got_status, _outcome(got_status, got_body)))
    return seen


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


def test_mixed_load_every_answer_right_and_memory_comes_back(server: tuple[str, int]) -> None:
    url, pid = server
    warm = _client(url, 2)
    assert all((s, w) == (gs, gw) for _, s, w, gs, gw in warm), [r for r in warm if r[1:3] != r[3:5]]
    before = _rss_mb(pid)
    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=CLIENTS) as pool:
        runs = list(pool.map(_client, [url] * CLIENTS, [ROUNDS] * CLIENTS))
    elapsed = time.monotonic() - start
    wrong = [r for run in runs for r in run if r[1:3] != r[3:5]]
    assert not wrong, wrong[:5]
    answered = sum(len(run) for run in runs)
    assert answered == CLIENTS * ROUNDS * len(_cases())
    after = _rss_mb(pid)
    print(f"{answered} requests in {elapsed:.1f} s; server RSS {before:.1f} MB -> {after:.1f} MB")
    assert after - before <= RSS_BOUND_MB, f"RSS grew from {before:.1f} MB to {after:.1f} MB"
    assert elapsed < 50
