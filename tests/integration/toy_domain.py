"""A toy verifiable domain that a tiny random model can learn in minutes, scored in the sandbox.

Why a toy: the acceptance test of the trainer ("reward rises from below 0.2 to above 0.8 on a tiny model
in under 3 minutes") needs a task whose reward a randomly initialised 2-layer model can move with a few
hundred samples. Writing correct Python is far out of reach, so the task is a property of the text itself:
the reward is the share of words that start with a capital letter from A to F (about one word in
twelve of a random tiny model's output). The score is
still computed by running a trusted checker program *in the sandbox* on the completion (stdin), through
the reward registry's two-phase interface, exactly as a code reward is.
"""

from __future__ import annotations

from pathlib import Path

from execrl.rewards import RewardConfig, Score
from execrl.sandbox import ExecutionRequest, ExecutionResult, Limits, Verdict
from execrl.sandbox.types import CodeTest
from execrl.tasks.schema import ChatMessage, MathSpec, Task, TaskMetadata

DOMAIN = "toy_caps"

CHECKER = """
import sys
TARGET = set("ABCDEF")
words = sys.stdin.read().split()
print(sum(w[:1] in TARGET for w in words) / len(words) if words else 0.0)
"""


class CapsVerifier:
    """Reward = share of whitespace-separated words that start with a capital letter A-F."""

    def prepare(self, task: Task, completion: str, config: RewardConfig) -> ExecutionRequest | Score:
        return ExecutionRequest(
            language="python", program=CHECKER, stdin=completion, limits=Limits(timeout_s=5, cpu_time_s=5)
        )

    def finish(self, task: Task, completion: str, result: ExecutionResult, config: RewardConfig) -> Score:
        if result.verdict is not Verdict.PASSED:
            return Score.invalid(f"sandbox_error: checker ended with {result.verdict}")
        value = float(result.stdout.strip())
        return Score(reward=value, valid=True, passed=value == 1.0, pass_fraction=value, reason="passed")


VERIFIER = CapsVerifier()


def _toy_task(domain: str, prefix: str, i: int, split: str, **tests: tuple[CodeTest, ...]) -> Task:
    return Task(
        id=f"{prefix}/{split}/{i}",
        domain=domain,
        prompt=(ChatMessage(role="user", content=f"Write some words. Example {i}."),),
        spec=MathSpec(answer="0"),  # unused by these verifiers; the schema needs a spec
        metadata=TaskMetadata(family="caps", split=split),  # type: ignore[arg-type]
        **tests,
    )


def toy_tasks(count: int, split: str) -> list[Task]:
    return [_toy_task(DOMAIN, "toy", i, split) for i in range(count)]


def toy_overrides(model_dir: Path, tasks_file: Path, out_dir: Path) -> list[str]:
    """Config overrides for a fast run of the toy domain on the tiny model."""
    return [
        f"model.path={model_dir}",
        f'tasks.suites={{"{tasks_file}"=1.0}}',
        f'tasks.eval_suites=["{tasks_file}"]',
        "tasks.eval_tasks_per_suite=8",
        'reward.verifiers={toy_caps="toy_domain:VERIFIER"}',
        f"run.output_dir={out_dir}",
        "run.name=toy",
        "rollout.prompts_per_step=4",
        "rollout.samples_per_prompt=8",
        "rollout.max_new_tokens=8",
        "rollout.eval_max_new_tokens=8",
        "rollout.top_k=16",
        "rollout.temperature=1.0",
        "optim.learning_rate=1e-2",
        "sandbox.workers=2",
        "telemetry.tensorboard=false",
    ]


# ---- a test-driven twin of the toy domain, for the reward-hacking proof --------------------------------
# The completion is judged by assert tests (``CodeTest``s run in the sandbox against ``TEXT``, the
# completion), so the reward reads ``Task.hidden_tests`` and the audit, which swaps in ``audit_tests``,
# goes through exactly the same verifier and sandbox path.

TESTED_DOMAIN = "toy_tested"
CAPS_SHARE = "sum(w[:1] in 'ABCDEF' for w in TEXT.split()) / max(1, len(TEXT.split()))"


class CapsTestsVerifier:
    """Reward = share of the task's tests passed; ``passed`` = all of them (the reward's pass)."""

    def prepare(self, task: Task, completion: str, config: RewardConfig) -> ExecutionRequest | Score:
        tests = task.hidden_tests if config.use_hidden_tests else task.visible_tests
        return ExecutionRequest(
            language="python",
            program=f"TEXT = {completion!r}\n",
            tests=tests,
            limits=Limits(timeout_s=5, cpu_time_s=5),
        )

    def finish(self, task: Task, completion: str, result: ExecutionResult, config: RewardConfig) -> Score:
        if result.is_sandbox_error:
            return Score.invalid(f"sandbox_error: {result.sandbox_error}")
        fraction = result.pass_fraction
        reason = "passed" if result.passed else "wrong_answer"
        return Score(reward=fraction, valid=True, passed=result.passed, pass_fraction=fraction, reason=reason)


TESTED_VERIFIER = CapsTestsVerifier()


def audited_tasks(count: int, split: str, *, sound: bool) -> list[Task]:
    """Reward tests: the share of A-F capitalised words reaches 1/8, 2/8 .. 6/8 (a constant output such as
    "A B C D" passes them all: a deliberately weak reward). Audit tests: with ``sound`` the same property
    (a sound reward, whose passes the audit confirms); otherwise a task-specific answer word that the
    reward never asks for (strict: no constant output passes it)."""
    reward = tuple(CodeTest(f"caps_{k}", f"assert {CAPS_SHARE} >= {k / 8}") for k in range(1, 7))
    tasks = []
    for i in range(count):
        audit = (
            CodeTest("audit_caps", f"assert {CAPS_SHARE} >= 0.75, 'too few A-F words'")
            if sound
            else CodeTest("audit_answer", f"assert 'Answer{i}' in TEXT.split(), 'no answer word'")
        )
        tasks.append(_toy_task(TESTED_DOMAIN, "tested", i, split, hidden_tests=reward, audit_tests=(audit,)))
    return tasks
