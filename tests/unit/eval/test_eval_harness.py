"""The eval harness on a tiny model: greedy output independent of batch size, rescoring agreement, pass@k."""

from __future__ import annotations

import pytest

from execrl.eval.harness import EvalConfig, evaluate
from execrl.rollout.engine import create_engine
from execrl.rollout.models import default_tokenizer, tiny_model
from execrl.tasks.schema import MathSpec, Task, TaskMetadata


def _tasks() -> list[Task]:
    prompts = [
        "What is 2+2?",
        "Name a colour, then a number between one and ten, please.",
        "Hi",
        "Count to 3",
    ]
    return [
        Task(id=f"m/{i}", domain="math", prompt=p, spec=MathSpec(answer=str(i)), metadata=TaskMetadata("toy"))
        for i, p in enumerate(prompts)
    ]


@pytest.fixture(scope="module")
def engine():  # type: ignore[no-untyped-def]
    return create_engine("hf", model=tiny_model(seed=0, init_std=0.5), tokenizer=default_tokenizer())


def test_greedy_results_do_not_depend_on_batch_size(engine) -> None:  # type: ignore[no-untyped-def]
    """Regression guard for lm-eval's batch-size dependence: left padding must not change greedy output."""
    one = evaluate(
        engine,
        _tasks(),
        suite="toy",
        model_name="tiny",
        config=EvalConfig(max_new_tokens=12, prompts_per_batch=1),
    )
    four = evaluate(
        engine,
        _tasks(),
        suite="toy",
        model_name="tiny",
        config=EvalConfig(max_new_tokens=12, prompts_per_batch=4),
    )
    assert [t.completions for t in one.tasks] == [t.completions for t in four.tasks]
    assert one.diagnostics["rescoring_agreement"] == 1.0
    assert set(one.pass_at_k) == {"pass@1"}  # only k <= samples per task is reported
    assert one.diagnostics["truncation_rate"] + one.diagnostics["samples"] > 0


def test_sampling_reports_pass_at_k_and_consistency(engine) -> None:  # type: ignore[no-untyped-def]
    result = evaluate(
        engine,
        _tasks(),
        suite="toy",
        model_name="tiny",
        config=EvalConfig(samples_per_task=5, temperature=1.0, max_new_tokens=6, ks=(1, 5, 10)),
    )
    assert set(result.pass_at_k) == {"pass@1", "pass@5"}
    assert result.tasks and all(len(t.completions) == 5 for t in result.tasks)
    assert 0.0 <= result.diagnostics["sample_consistency"] <= 1.0
    data = result.to_dict()
    assert data["n_tasks"] == 4 and len(data["tasks"][0]["rewards"]) == 5


def test_greedy_with_several_samples_is_rejected() -> None:
    with pytest.raises(ValueError, match="identical samples"):
        EvalConfig(samples_per_task=4, temperature=0.0)
