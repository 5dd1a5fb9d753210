"""Sessions and SandboxFusion's ``/run_jupyter`` over HTTP, on a real ``execrl sandbox serve``.

Covers the endpoints' lifecycle, their caps and bad inputs (each answered 4xx with a JSON error naming
the field), ``/run_jupyter`` as SandboxFusion's own runner tests drive it, and that stopping the server
kills every session it opened (no process, no cgroup left).
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from service_server import EXECRL, running_server
from service_server import post as _post

OPTIONS = ("--session-templates", "--session-max-sessions", "4", "--session-max-forks", "2")
OPTIONS += ("--session-max-lifetime-s", "120", "--session-max-memory-mb", "512")


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with running_server(*OPTIONS) as url:
        yield url


def _call(method: str, url: str, body: Any = None, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    for key, value in (headers or {}).items():
        request.add_header(key, value)
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _open(server: str, **body: Any) -> str:
    status, answer = _post(f"{server}/v1/sessions", body)
    assert status == 200, answer
    return str(answer["session_id"])


def _cell(server: str, session_id: str, code: str, **extra: Any) -> dict[str, Any]:
    status, answer = _post(f"{server}/v1/sessions/{session_id}/cells", {"code": code, **extra})
    assert status == 200, answer
    return dict(answer)


def _delete(server: str, *session_ids: str) -> None:
    for session_id in session_ids:
        _call("DELETE", f"{server}/v1/sessions/{session_id}")


def _field(answer: Any) -> str:
    return str(answer["detail"][0]["field"])


def test_session_lifecycle(server: str) -> None:
    files = {"a.txt": base64.b64encode(b"41").decode()}
    session = _open(server, files_base64=files, limits={"cell_timeout_s": 5})
    assert _cell(server, session, "n = int(open('a.txt').read())")["verdict"] == "passed"
    answer = _cell(server, session, "n + 1")
    assert (answer["value"], answer["session_alive"]) == ("42", True)
    error = _cell(server, session, "1 / 0")
    assert (error["verdict"], error["error_type"]) == ("runtime_error", "ZeroDivisionError")
    assert _cell(server, session, "import time; time.sleep(5)", timeout_s=0.2)["limit"] == "cell_timeout_s"
    status, stats = _call("GET", f"{server}/v1/sessions/{session}")
    assert status == 200 and stats["cells"] == 4 and stats["alive"]
    _cell(server, session, "open('out.bin', 'wb').write(b'\\x00\\x01')")
    status, fetched = _post(f"{server}/v1/sessions/{session}/files", {"paths": ["out.bin", "nope"]})
    assert fetched["files"] == {"out.bin": "AAE="} and set(fetched["errors"]) == {"nope"}
    assert _call("DELETE", f"{server}/v1/sessions/{session}") == (
        200,
        {"session_id": session, "closed": True},
    )
    status, gone = _post(f"{server}/v1/sessions/{session}/cells", {"code": "1"})
    assert status == 404 and _field(gone) == "session_id"


def test_template_forks_over_http(server: str) -> None:
    status, answer = _post(f"{server}/v1/sessions", {"template": True, "setup": ["base = [1, 2, 3]"]})
    assert status == 200 and answer["kind"] == "template" and answer["setup"][0]["verdict"] == "passed"
    template = answer["session_id"]
    status, forked = _post(f"{server}/v1/sessions/{template}/fork", {"n": 2})
    assert status == 200, forked
    forks = [item["session_id"] for item in forked["sessions"]]
    _cell(server, forks[0], "base.append(4)")
    assert [_cell(server, f, "len(base)")["value"] for f in forks] == ["4", "3"]
    status, capped = _post(f"{server}/v1/sessions/{template}/fork", {"n": 3})
    assert status == 422 and _field(capped) == "n"
    plain = _open(server)
    status, refused = _post(f"{server}/v1/sessions/{plain}/fork", {"n": 1})
    assert status == 409 and "SessionTemplate" in refused["error"]
    _delete(server, plain, *forks, template)


def test_caps_answer_with_the_field(server: str) -> None:
    for limits, field in (
        ({"lifetime_s": 1000}, "limits.lifetime_s"),
        ({"memory_mb": 4096}, "limits.memory_mb"),
        ({"max_output_bytes": 8 << 20}, "limits.max_output_bytes"),
    ):
        status, answer = _post(f"{server}/v1/sessions", {"limits": limits})
        assert (status, _field(answer)) == (422, field), answer
    opened = [_open(server) for _ in range(4)]
    try:
        status, answer = _post(f"{server}/v1/sessions", {})
        assert status == 429 and _field(answer) == "sessions" and "--session-max-sessions" in answer["error"]
    finally:
        _delete(server, *opened)
    _delete(server, _open(server))  # room again


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"limits": {"bogus": 1}}, "limits.bogus"),
        ({"limits": {"memory_mb": "512"}}, "limits.memory_mb"),
        ({"limits": {"cell_timeout_s": 0}}, "limits"),
        ({"files": {"/etc/passwd": "x"}}, "body"),
        ({"files_base64": {"a": "!!"}}, "files_base64.a"),
        ({"setup": ["x = 1"]}, "setup"),
        ({"runtime": 3}, "runtime"),
    ],
)
def test_bad_open_requests_are_422(server: str, body: dict[str, Any], field: str) -> None:
    status, answer = _post(f"{server}/v1/sessions", body)
    assert status == 422 and _field(answer) == field, answer


def test_bad_cells_and_headers(server: str) -> None:
    session = _open(server)
    try:
        for body, field in (
            ({"code": 1}, "code"),
            ({}, "code"),
            ({"code": "1", "timeout_s": -1}, "timeout_s"),
        ):
            status, answer = _post(f"{server}/v1/sessions/{session}/cells", body)
            assert status == 422 and _field(answer) == field, answer
        url = f"{server}/v1/sessions/{session}/cells"
        assert _call("POST", url, {"code": "1"}, {"Origin": "https://evil.example"})[0] == 403
        plain = urllib.request.Request(url, data=b'{"code": "1"}', headers={"Content-Type": "text/plain"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(plain, timeout=30)
        assert refused.value.code == 415
        refused.value.close()
    finally:
        _delete(server, session)


def test_templates_are_refused_unless_enabled() -> None:
    with running_server() as url:
        status, answer = _post(f"{url}/v1/sessions", {"template": True})
        assert status == 403 and _field(answer) == "template" and "--session-templates" in answer["error"]


# -- SandboxFusion's /run_jupyter (its own runner tests, sandbox/tests/runners/test_jupyter.py) ---------


def _jupyter(server: str, **body: Any) -> dict[str, Any]:
    status, answer = _post(f"{server}/run_jupyter", body)
    assert status == 200, answer
    assert set(answer) == {"status", "message", "driver", "cells", "executor_pod_name", "files"}
    return dict(answer)


def test_jupyter_print_and_multi_cell(server: str) -> None:
    assert _jupyter(server, cells=["print(123)"])["cells"][0]["stdout"] == "123\n"
    answer = _jupyter(server, cells=['a = "hello"', "a", "print(a)"])
    assert answer["status"] == "Success" and answer["driver"]["status"] == "Finished"
    assert answer["cells"][0]["stdout"] == "" and answer["cells"][1]["display"][0]["text/plain"] == "'hello'"
    assert answer["cells"][2]["stdout"] == "hello\n"


def test_jupyter_a_raising_cell_does_not_stop_the_rest(server: str) -> None:
    cells = [
        'a = "hello"',
        'import sys\nsys.stderr.write("This is an error message\\n")',
        "assert False",
        "print(a)",
    ]
    answer = _jupyter(server, cells=cells)
    assert answer["status"] == "Success"
    assert answer["cells"][1]["stderr"] == "This is an error message\n"
    assert answer["cells"][2]["error"][0]["ename"] == "AssertionError"
    assert answer["cells"][3]["stdout"] == "hello\n"


def test_jupyter_timeouts_files_and_fetch(server: str) -> None:
    interrupted = _jupyter(server, cells=["import time\ntime.sleep(10)", "'next'"], cell_timeout=0.3)
    assert (
        interrupted["status"] == "Success" and interrupted["cells"][1]["display"][0]["text/plain"] == "'next'"
    )
    assert interrupted["cells"][0]["error"][-1]["ename"] == "time_limit"
    total = _jupyter(server, cells=["x = 1", "import time\ntime.sleep(10)"], total_timeout=0.5)
    assert total["status"] == "Failed" and total["driver"]["status"] == "TimeLimitExceeded"
    files = {"in.txt": base64.b64encode(b"data").decode()}
    fetched = _jupyter(server, cells=["open('out.txt', 'w').write(open('in.txt').read().upper())"],
                       files=files, fetch_files=["out.txt"])  # fmt: skip
    assert base64.b64decode(fetched["files"]["out.txt"]) == b"DATA"


def test_jupyter_bad_input_is_422(server: str) -> None:
    for body, field in (
        ({"cells": ["1"], "kernel": "python2"}, "kernel"),
        ({"cells": "1"}, "cells"),
        ({"cells": ["1"], "total_timeout": 0}, "total_timeout"),
        ({"cells": ["1"], "memory_limit_MB": 100000}, "memory_limit_MB"),
    ):
        status, answer = _post(f"{server}/run_jupyter", body)
        assert status == 422 and _field(answer) == field, answer


# -- stopping the server -----------------------------------------------------------------------------


def _own_memory_cgroup() -> Path:
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, names, path = line.split(":", 2)
        if "memory" in names.split(","):
            return Path("/sys/fs/cgroup/memory") / path.lstrip("/")
    pytest.fail("no memory cgroup")


def test_stopping_the_server_kills_every_session() -> None:
    command = [EXECRL, "sandbox", "serve", "--port", "0", "--workers", "1", "--session-templates"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdout is not None
    url = process.stdout.readline().split("listening on ", 1)[1].strip()
    try:
        session = _open(url)
        _cell(url, session, "import subprocess\nsubprocess.Popen(['sleep', '60'])")
        template = _open(url, template=True, setup=["x = 1"])
        assert _post(f"{url}/v1/sessions/{template}/fork", {"n": 2})[0] == 200
        slots = list(_own_memory_cgroup().glob(f"execrl-{process.pid}-*/slot*"))
        pids = {int(p) for slot in slots for p in (slot / "cgroup.procs").read_text().split()}
        assert len(pids) >= 6  # two per session: its init and interpreter (and sleep, and the template)
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=60)
    assert process.returncode == 0
    time.sleep(0.2)
    assert not [pid for pid in pids if os.path.exists(f"/proc/{pid}")]
    assert not list(_own_memory_cgroup().glob(f"execrl-{process.pid}-*"))
