"""execrl as a drop-in for SandboxFusion on real suites (issue 28; issue 23 item 4).

Each test guards one gap a user switching from SandboxFusion hit (HumanEval-X, MBXP, SandboxFusion's
own runner tests), named in its docstring; the ``/run_code`` ones go through the same parsing and
response code as the HTTP endpoint (``fusion.parse_run_code``, ``fusion.run_code_response``).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from execrl.sandbox import ExecutionRequest, Sandbox, SandboxConfig
from execrl.sandbox.fusion import parse_run_code, run_code_response
from execrl.sandbox.languages import JAIL_VISIBLE


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with Sandbox(SandboxConfig(workers=2)) as sb:
        yield sb


def run_code(sandbox: Sandbox, body: dict[str, Any]) -> dict[str, Any]:
    """``POST /run_code`` without the HTTP layer."""
    request = parse_run_code(body, default_memory_mb=1024)
    return run_code_response(sandbox.run(request), request.language)


# -- item 1: Debian's alternatives links -------------------------------------------------------------
POSIX_TOOLS = {  # command line -> expected stdout, over data.txt = "b 2\na 1\nc 3\n"
    "awk '{s+=$2} END {print s}' data.txt": "6",
    "echo 5 | nawk '{print $1*2}'": "10",
    "sed 's/l/L/g' <<< hello": "heLLo",
    "grep -c . data.txt": "3",
    "sort data.txt | head -n1": "a 1",
    "cut -d' ' -f2 data.txt | tr '\\n' ,": "2,1,3,",
    "wc -l < data.txt": "3",
    "tail -n1 data.txt": "c 3",
    "echo 1 2 3 | xargs -n1 echo | wc -l": "3",
    "find . -name 'data.*'": "./data.txt",
    "seq 3 | paste -sd+": "1+2+3",
    "expr 6 \\* 7": "42",
    "which awk": "/usr/bin/awk",
    "uniq <<< $'a\\na\\nb' | wc -l": "2",
    "echo abc | rev": "cba",
    "printf x | base64": "eA==",
    "date -u -d @0 +%Y": "1970",
}
if shutil.which("bc"):
    POSIX_TOOLS["echo '2^10' | bc"] = "1024"


def test_posix_tools_run_from_bash(sandbox: Sandbox) -> None:
    """``/usr/bin/awk`` (and ``nawk``, ``which``...) are links through ``/etc/alternatives``, which the
    jail did not bind: Bash programs got "awk: command not found"."""
    lines = ["printf 'b 2\\na 1\\nc 3\\n' > data.txt"]
    lines += [f'echo "$({command})"' for command in POSIX_TOOLS]
    result = sandbox.run(ExecutionRequest(language="bash", program="\n".join(lines) + "\n"))
    assert result.passed, result.stderr
    assert result.stdout.splitlines() == list(POSIX_TOOLS.values())


def test_alternatives_only_point_into_what_the_jail_shows() -> None:
    """Binding ``/etc/alternatives`` shows links, not files: each resolves under ``/usr`` (or the
    top-level links to it), so the bind reveals nothing of the host the jail did not already show."""
    if not os.path.isdir("/etc/alternatives"):
        pytest.skip("no /etc/alternatives on this host")
    for name in os.listdir("/etc/alternatives"):
        path = os.path.join("/etc/alternatives", name)
        if os.path.islink(path):
            assert os.path.realpath(path).startswith(JAIL_VISIBLE), path
