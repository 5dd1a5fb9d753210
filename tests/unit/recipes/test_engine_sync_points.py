"""Where an engine with weights of its own (``rollout.engine=vllm``) gets the trained weights outside the
executor's publish (issue 37 on the spine): the trained evaluation syncs the final version into it unless
it already holds it (the one-step-off loop's engine holds the behaviour copy's, one step late; under Ray
the driver's engine is never published to). The executor's side (no sync on publish in the one-step-off
loop) is ``tests/unit/distributed/test_executor_units.py``."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from execrl.recipes.loop import trained_engine


class _Engine:
    """An engine of its own: records the versions synced into it, as ``VLLMEngine.version`` does."""

    def __init__(self, version: int) -> None:
        self.version = version
        self.synced: list[int] = []

    def sync_weights(self, model: Any, version: int) -> Any:
        self.synced.append(version)
        self.version = version
        return SimpleNamespace(metrics=dict)


def test_the_trained_evaluation_syncs_the_final_weights_into_a_stale_engine() -> None:
    """Guards the one-step-off + vLLM run evaluating the behaviour copy's weights (version T-1) as the
    trained model: before the fix ``trained_engine`` returned the engine as it was."""
    stale = _Engine(version=2)
    run = SimpleNamespace(engine=stale, model=object(), config=None)
    assert trained_engine(run, version=3) is stale  # type: ignore[arg-type]
    assert stale.synced == [3]
    current = _Engine(version=3)  # the serial loop synced version T on its last publish: nothing to redo
    assert trained_engine(SimpleNamespace(engine=current, model=object(), config=None), version=3) is current  # type: ignore[arg-type]
    assert current.synced == []
