"""Pure pieces of ``execrl bench sandbox --languages`` with hand-computed values, and its plain side."""

from __future__ import annotations

import argparse
import os
import tempfile

import pytest

from execrl.bench._language_programs import HELLO, PROBLEM
from execrl.bench._languages import (
    benched_languages,
    chosen_languages,
    isolated_once,
    language_summary,
    overall,
    plain_job,
    plain_once,
    plain_workdir_root,
    program_summary,
)
from execrl.bench.sandbox import add_arguments
from execrl.sandbox import Sandbox, SandboxConfig
from execrl.sandbox.errors import InvalidRequestError
from execrl.sandbox.langs import gocache
from execrl.sandbox.langs.registry import list_languages


def test_program_summary_medians_ratio_and_rate():
    # isolated: median 0.030 s, 3 runs in 0.090 s; plain: median 0.020 s, 3 runs in 0.075 s
    row = program_summary([0.030, 0.020, 0.040], [0.020, 0.035, 0.020])
    assert row["p50_ms"] == pytest.approx(30.0)
    assert row["unisolated_p50_ms"] == pytest.approx(20.0)
    assert row["ratio_vs_unisolated"] == pytest.approx(1.5)  # 30 / 20
    assert row["exec_per_s"] == pytest.approx(3 / 0.090)
    assert row["unisolated_exec_per_s"] == pytest.approx(40.0)  # 3 / 0.075
    assert row["best_ms"] == pytest.approx(20.0) and row["unisolated_best_ms"] == pytest.approx(20.0)
    assert row["ratio_of_best"] == pytest.approx(1.0)  # 0.020 / 0.020
    assert row["runs"] == 3


def test_program_summary_needs_timings_on_both_sides():
    with pytest.raises(ValueError, match="at least one"):
        program_summary([0.1], [])


def test_language_summary_takes_the_problem_headline_and_the_worst_ratio():
    hello = program_summary([0.078], [0.026])  # 3.0x
    problem = program_summary([0.060], [0.050])  # 1.2x
    row = language_summary({"hello": hello, "problem": problem})
    assert row["p50_ms"] == pytest.approx(60.0) and row["exec_per_s"] == pytest.approx(1 / 0.060)
    assert row["ratio_vs_unisolated"] == pytest.approx(3.0)
    assert row["within_goal"] is False
    ok = language_summary({"hello": problem, "problem": problem})
    assert ok["within_goal"] is True


def test_overall_names_the_languages_over_the_goal():
    fast = {"within_goal": True}
    slow = {"within_goal": False}
    assert overall({"c": fast, "bash": slow, "go": slow}) == {
        "goal_ratio": 1.5, "all_within_goal": False, "over_goal": ["bash", "go"],
    }  # fmt: skip
    assert overall({"c": fast})["all_within_goal"] is True
    assert overall({})["all_within_goal"] is False  # nothing measured is not a pass


def test_every_language_has_both_programs():
    """Every language with stdin/stdout tests but the ``-asserts`` variants (issue 28 added those, and
    the test-runner modes, which run plain only)."""
    assert sorted(HELLO) == sorted(PROBLEM) == benched_languages()
    assert {"python", "c", "cpp", "go", "java", "javascript", "typescript", "rust", "bash"} <= set(HELLO)
    assert set(list_languages()) - set(HELLO) == {
        "go_test", "junit", "pytest", "javascript-asserts", "typescript-asserts", "typescript-transpile-asserts",
    }  # fmt: skip


def test_plain_job_is_the_sandbox_job_without_isolation():
    argvs, files, env = plain_job("c", HELLO["c"])
    assert argvs[0][1:] == ["-O2", "-std=gnu17", "-pipe", "-o", ".execrl/main", "main.c", "-lm"]
    assert argvs[1] == ["./.execrl/main"]
    assert files == {"main.c": HELLO["c"]}
    with gocache.cold_cache():
        argvs, _, env = plain_job("go", HELLO["go"])
    assert env["GOCACHE"] == "./.execrl/go-build"  # made absolute under the work directory by plain_once
    argvs, _, _ = plain_job("python", HELLO["python"])
    assert argvs == [["/usr/bin/python3", "main.py"]]


def test_plain_once_runs_the_program_checks_its_output_and_cleans_up():
    root = plain_workdir_root() or tempfile.gettempdir()
    before = {p for p in os.listdir(root) if p.startswith("execrl-bench-plain-")}
    assert plain_once(plain_job("bash", PROBLEM["bash"]), "5\n") > 0
    with pytest.raises(RuntimeError, match="expected 'bye"):
        plain_once(plain_job("bash", HELLO["bash"]), "bye\n")
    assert {p for p in os.listdir(root) if p.startswith("execrl-bench-plain-")} == before


def test_languages_only_validates_names():
    assert chosen_languages("bash, python") == ["bash", "python"]
    with pytest.raises(InvalidRequestError, match="unknown language 'cobol'"):
        chosen_languages("bash,cobol")


def test_cli_takes_languages_and_rounds():
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--languages", "--languages-only", "c,go", "--rounds", "2"])
    assert (args.languages, args.languages_only, args.rounds) == (True, "c,go", 2)


def test_isolated_once_leaves_the_sandbox_settled():
    """``wait_settled`` returns once the next worker is parked; the bench relies on it between turns."""
    with Sandbox(SandboxConfig(workers=1)) as sandbox:
        assert isolated_once(sandbox, "bash", HELLO["bash"], "hello\n") > 0
        assert sandbox.wait_settled(0.0) is True  # already at rest: no waiting needed
        with pytest.raises(RuntimeError, match="did not pass"):
            isolated_once(sandbox, "bash", HELLO["bash"], "bye\n")
