"""``SftConfig`` (``execrl sft``): TOML round trip with descriptions, refused knobs SFT would ignore, and the
evaluation's ``TrainConfig`` made of its own sections."""

from __future__ import annotations

import tomllib

import pytest

from execrl.config import ConfigError, SftConfig, load_typed, to_toml


def test_print_config_round_trips_with_descriptions() -> None:
    config = load_typed(SftConfig, None, ['data.train_files=["a.jsonl"]', "optim.tokens_per_row=512"])
    text = to_toml(config, descriptions=True)
    assert "# capacity of one packed row" in text and "# optimizer steps; unset:" in text
    assert SftConfig.model_validate(tomllib.loads(text)) == config


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("rollout.samples_per_prompt=4", "rollout.samples_per_prompt: not used by execrl sft"),
        ('tasks.suites={"functions"=1.0}', "tasks.suites (SFT trains on data.train_files)"),
        ("optim.ppo_epochs=2", "unknown key"),
        ("data.heldout_share=0.2", None),
    ],
)
def test_knobs_sft_does_not_use_are_refused(override: str, message: str | None) -> None:
    args = ['data.heldout_files=["h.jsonl"]', override]  # the default heldout_share yields to the files
    if message is None:
        with pytest.raises(ConfigError, match="both name held-out rows"):
            load_typed(SftConfig, None, args)
        return
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_typed(SftConfig, None, args)


def test_the_evaluation_reads_the_same_sections() -> None:
    config = load_typed(SftConfig, None, ["tools.enabled=true", "tools.call_format=python_block",
                                           'tasks.eval_suites=["tools"]', "eval.samples_per_task=2"])  # fmt: skip
    view = config.eval_view()
    assert view.tools is config.tools and view.eval is config.eval and view.tasks is config.tasks
    assert view.run.seed == config.run.seed and view.model is config.model
    plain = load_typed(SftConfig, None, ["tools.call_format=python_block"]).eval_view()
    assert not plain.tools.enabled and plain.tools.call_format == "hermes"  # evaluation without tools
