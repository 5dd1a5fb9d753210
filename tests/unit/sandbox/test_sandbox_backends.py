"""Registries (backends, languages) and the unisolated backend."""

from __future__ import annotations

import glob
from pathlib import Path

import pytest

from execrl.sandbox import (
    CallTest,
    ExecutionRequest,
    Language,
    Limits,
    Sandbox,
    SandboxConfig,
    Verdict,
    default_sandbox,
    list_backends,
    list_languages,
    register_language,
)
from execrl.sandbox import api as sandbox_api
from execrl.sandbox.backends import get_backend
from execrl.sandbox.host.cgroups import CgroupPool, _own_path


def test_registries_list_and_reject_duplicates() -> None:
    assert list_backends() == ["namespace", "unisolated"]
    assert list_languages() == [
        "bash",
        "c",
        "cpp",
        "go",
        "go_test",  # SandboxFusion's test-runner modes and the Node variants (issue 28)
        "java",
        "javascript",
        "javascript-asserts",
        "junit",
        "pytest",
        "python",
        "rust",
        "typescript",
        "typescript-asserts",
        "typescript-transpile",
        "typescript-transpile-asserts",
    ]
    with pytest.raises(ValueError, match="already registered"):
        register_language(Language("python", "python", "x.py", frozenset({"code"})))
    assert "NOT a security boundary" in get_backend("unisolated").description


def test_unisolated_backend_runs_and_cleans_its_temp_dir() -> None:
    before = set(glob.glob("/tmp/execrl-unisolated-*"))
    with Sandbox(SandboxConfig(backend="unisolated", workers=1)) as sandbox:
        request = ExecutionRequest(
            language="python",
            program="import os\nprint(os.getcwd().startswith('/tmp/execrl-unisolated-'))\ndef f():\n    return 2\n",
        )
        result = sandbox.run(request)
        assert result.verdict is Verdict.PASSED and result.stdout == "True\n"
        tested = sandbox.run(
            ExecutionRequest(
                language="python", program="def f():\n    return 2\n", tests=(CallTest("t", "f", expected=2),)
            )
        )
        assert tested.verdict is Verdict.PASSED
    assert set(glob.glob("/tmp/execrl-unisolated-*")) == before


def test_default_sandbox_is_shared_and_lazily_started() -> None:
    first = default_sandbox()
    try:
        assert default_sandbox() is first
        assert first.run(ExecutionRequest(language="python", program="print(2)")).stdout == "2\n"
    finally:
        first.close()
    assert sandbox_api._default is first and first._closed


def test_config_limits_replace_the_library_default() -> None:
    limits = Limits(timeout_s=0.3, workdir_mb=8)
    with Sandbox(SandboxConfig(workers=1, limits=limits)) as sandbox:
        result = sandbox.run(ExecutionRequest(language="python", program="import time\ntime.sleep(5)"))
        assert result.verdict is Verdict.TIME_LIMIT and result.limit_kind == "wall"
        df = sandbox.run(
            ExecutionRequest(
                language="python",
                program="import os\nprint(os.statvfs('/tmp').f_blocks * os.statvfs('/tmp').f_frsize)",
            )
        )
        assert df.stdout == f"{8 << 20}\n"


def test_cgroups_left_by_a_dead_process_are_removed() -> None:
    """Regression guard: a parent killed without close() must not leak cgroups forever."""
    root = Path("/sys/fs/cgroup")
    stale = root / "pids" / _own_path("pids") / "execrl-999999999-1"
    (stale / "slot0").mkdir(parents=True)
    pool = CgroupPool(root, 1)
    try:
        assert not stale.exists()
    finally:
        pool.close()
