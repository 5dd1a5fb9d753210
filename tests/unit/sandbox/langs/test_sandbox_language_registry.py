"""The language registry's contract: a missing toolchain is a clear refusal naming its Debian package,
limit floors, argument templates, the CLI listing, and a user's own registration."""

from __future__ import annotations

import json
import re

import pytest

from execrl import cli
from execrl.sandbox import (
    ExecutionRequest,
    InvalidRequestError,
    IOTest,
    Limits,
    Sandbox,
    SandboxConfig,
    Verdict,
)
from execrl.sandbox.langs import gocache
from execrl.sandbox.langs import registry as languages
from execrl.sandbox.langs.registry import Language, get_language


def _without(path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Pretend this host lacks ``path`` (``_host_path`` is how every availability check looks)."""
    real = languages._host_path
    monkeypatch.setattr(languages, "_host_path", lambda p: None if p == path else real(p))


def test_missing_toolchain_is_an_invalid_request_naming_the_package(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    _without("/usr/bin/go", monkeypatch)
    request = ExecutionRequest(language="go", program="package main\nfunc main() {}\n")
    with pytest.raises(InvalidRequestError, match=r"'go' is unavailable.*/usr/bin/go not found.*golang-go"):
        sandbox.run(request)
    assert "go" not in languages.available_languages()
    rows = {row["name"]: row for row in languages.describe_languages()}
    assert rows["go"]["available"] is False and rows["go"]["missing"] == ["/usr/bin/go"]


def test_a_missing_helper_tool_counts_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """rustc links with gcc: without gcc, rust is unavailable (a compile would fail for a host reason)."""
    _without("/usr/bin/gcc", monkeypatch)
    assert get_language("rust").missing() == ["/usr/bin/gcc"]
    with pytest.raises(InvalidRequestError, match="install the Debian package rustc"):
        get_language("rust").check_available()


def test_cli_lists_languages_and_fails_when_one_is_missing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["sandbox", "languages", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    java = next(row for row in rows if row["name"] == "java")
    assert java["package"] == "default-jdk-headless" and java["test_kinds"] == ["call", "io"]
    _without("/usr/bin/javac", monkeypatch)
    assert cli.main(["sandbox", "languages"]) == 1
    assert "install default-jdk-headless (/usr/bin/javac)" in capsys.readouterr().out


def test_limit_floors_raise_only_what_is_below_them() -> None:
    java = get_language("java")
    raised = java.limits_for(Limits(memory_mb=64, max_processes=8))
    assert (raised.memory_mb, raised.max_processes) == (128, 64)
    generous = Limits(memory_mb=2048, max_processes=200)
    assert java.limits_for(generous) is generous
    assert get_language("c").limits_for(Limits(max_processes=4)).max_processes == 4


def test_argument_templates_and_host_resolution() -> None:
    spec = get_language("java").job_spec("Main.java", Limits(memory_mb=300))
    assert "-Xmx300m" in spec["run"] and spec["run"][-1] == "Main"
    assert spec["run"][0].startswith("/usr/lib/jvm/")  # /usr/bin/java -> /etc/alternatives is resolved
    typescript = get_language("typescript").job_spec("src/app.ts", Limits(), with_call=True)
    assert typescript["run"] == ["/usr/bin/node", "src/app.js"]
    assert typescript["call"][-1] == "src/app.js"
    with gocache.cold_cache():  # the per-execution cache (the warm one is an absolute, read-only path)
        assert get_language("go").job_spec("main.go", Limits())["env"]["GOCACHE"].startswith("./")  # work dir


def test_a_user_registration_runs(sandbox: Sandbox) -> None:
    """The registration a user copies for their own language (here POSIX sh)."""
    sh = Language(
        "sh", "binary", "main.sh", frozenset({"io"}), run_argv=("/bin/sh", "{source}"), package="dash"
    )
    languages.register_language(sh)
    request = ExecutionRequest(
        language="sh", program="read a b\necho $((a * b))\n", tests=(IOTest("t", "6 7", "42"),)
    )
    try:
        assert sandbox.run(request).verdict is Verdict.PASSED
    finally:
        languages._LANGUAGES.remove("sh")


def test_go_build_cache_lives_in_the_execution_work_directory(sandbox: Sandbox) -> None:
    """Regression: GOCACHE was the absolute ``/tmp/.cache``, which under the unisolated backend (no private
    ``/tmp``) is the host's and outlives the execution; a per-execution cache is resolved in each work
    directory (``.execrl/`` since issue 28, when the warm read-only cache, ``gocache.py``, is not used)."""
    program = 'package main\nimport ("fmt"; "os")\nfunc main() { fmt.Println(os.Getenv("GOCACHE")) }\n'
    request = ExecutionRequest(language="go", program=program)
    with gocache.cold_cache():
        assert sandbox.run(request).stdout == "/tmp/.execrl/go-build\n"
        with Sandbox(SandboxConfig(backend="unisolated", workers=1)) as unisolated:
            result = unisolated.run(request)
    assert result.verdict is Verdict.PASSED, result
    assert re.fullmatch(r".*/execrl-unisolated-[^/]+/\.execrl/go-build\n", result.stdout), result.stdout
