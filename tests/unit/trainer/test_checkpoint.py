"""Checkpoints: exact round trip (weights, optimizer, scheduler, RNG, data position), atomicity, retention."""

from __future__ import annotations

import copy
import json
import random

import numpy as np
import pytest
import torch

from execrl.trainer.checkpoint import (
    checkpoint_path,
    latest_checkpoint,
    list_checkpoints,
    load_checkpoint,
    save_checkpoint,
)
from execrl.trainer.config import TrainerConfig
from execrl.trainer.logprobs import ValueHead
from execrl.trainer.step import build_optimizer, build_scheduler, policy_update


def _trained(tiny_lm, batch):
    config = TrainerConfig(learning_rate=1e-2, lr_schedule="linear", warmup_steps=1, total_steps=10)
    optimizer = build_optimizer(tiny_lm, config)
    scheduler = build_scheduler(optimizer, config)
    policy_update(tiny_lm, optimizer, scheduler, batch, config)
    return config, optimizer, scheduler


def _draws():
    return random.random(), float(np.random.rand()), torch.rand(3)


def test_round_trip_restores_everything_exactly(tmp_path, tiny_lm, batch):
    config, optimizer, scheduler = _trained(tiny_lm, batch)
    head = ValueHead(16).double()
    data_state = {"step": 1, "sampler": {"epoch": 0, "order": torch.arange(5), "seen": [1, 2]}}
    path = save_checkpoint(
        tmp_path, step=1, model=tiny_lm, optimizer=optimizer, scheduler=scheduler,
        data_state=data_state, metrics={"reward/mean": 0.25}, extra_modules={"value_head": head},
    )  # fmt: skip
    expected_draws = _draws()
    saved = {k: v.clone() for k, v in tiny_lm.state_dict().items()}
    saved_head = head.linear.weight.detach().clone()

    fresh = type(tiny_lm)(tiny_lm.config).double()
    fresh_head = ValueHead(16).double()
    fresh_optimizer = build_optimizer(fresh, config)
    fresh_scheduler = build_scheduler(fresh_optimizer, config)
    _draws()  # move every RNG away from the saved state
    state = load_checkpoint(
        path, fresh, fresh_optimizer, fresh_scheduler, extra_modules={"value_head": fresh_head}
    )

    assert saved and all(torch.equal(fresh.state_dict()[k], v) for k, v in saved.items())
    assert torch.equal(fresh_head.linear.weight, saved_head)
    assert optimizer.state  # the optimizer stepped: there are moments to compare
    for a, b in zip(optimizer.state.values(), fresh_optimizer.state.values(), strict=True):
        assert all(torch.equal(a[key], b[key]) for key in ("exp_avg", "exp_avg_sq", "step"))
    assert fresh_scheduler.state_dict() == scheduler.state_dict()
    assert fresh_optimizer.param_groups[0]["lr"] == optimizer.param_groups[0]["lr"]
    got_draws = _draws()
    assert got_draws[:2] == expected_draws[:2] and torch.equal(got_draws[2], expected_draws[2])
    assert state.step == 1 and state.metrics == {"reward/mean": 0.25}
    assert torch.equal(state.data_state["sampler"]["order"], torch.arange(5))
    assert state.data_state["sampler"]["seen"] == [1, 2]
    assert json.loads((path / "meta.json").read_text())["step"] == 1


def test_layout_retention_and_replacement(tmp_path, tiny_lm):
    for step in range(1, 6):
        save_checkpoint(tmp_path, step=step, model=tiny_lm, keep_last=2, metrics={"step": step})
    assert [p.name for p in list_checkpoints(tmp_path)] == ["step_000004", "step_000005"]
    assert latest_checkpoint(tmp_path) == tmp_path / "checkpoints" / "step_000005"
    save_checkpoint(tmp_path, step=5, model=tiny_lm, keep_last=2, metrics={"step": 50})
    assert load_checkpoint(checkpoint_path(tmp_path, 5), tiny_lm).metrics == {"step": 50.0}
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["step_000004", "step_000005"]
    assert latest_checkpoint(tmp_path / "nowhere") is None


def test_half_written_checkpoint_is_ignored_and_cleaned(tmp_path, tiny_lm):
    """A writer killed mid-save leaves only a .tmp- directory; it must never be picked for resume."""
    save_checkpoint(tmp_path, step=3, model=tiny_lm)
    partial = tmp_path / "checkpoints" / "step_000004.tmp-x1y2"
    partial.mkdir()
    (partial / "model.safetensors").write_bytes(b"truncated")
    assert latest_checkpoint(tmp_path) == checkpoint_path(tmp_path, 3)
    save_checkpoint(tmp_path, step=4, model=tiny_lm)
    assert not partial.exists() and latest_checkpoint(tmp_path) == checkpoint_path(tmp_path, 4)


def test_bad_inputs_raise_clear_errors(tmp_path, tiny_lm):
    with pytest.raises(TypeError, match=r"data_state\['gen'\] is a Generator"):
        save_checkpoint(tmp_path, step=1, model=tiny_lm, data_state={"gen": torch.Generator()})
    with pytest.raises(ValueError, match="keep_last must be >= 1"):
        save_checkpoint(tmp_path, step=1, model=tiny_lm, keep_last=0)
    path = save_checkpoint(tmp_path, step=1, model=tiny_lm)
    optimizer = build_optimizer(tiny_lm, TrainerConfig())
    with pytest.raises(FileNotFoundError, match="has no optimizer.pt"):
        load_checkpoint(path, tiny_lm, optimizer)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_checkpoint(tmp_path / "missing", tiny_lm)
    assert not list((tmp_path / "checkpoints").glob("*.tmp-*"))


def test_tied_embeddings_round_trip_and_stay_tied(tmp_path, tiny_lm):
    """SmolLM2 ties lm_head to the embedding; safetensors must store it once and restore the tie."""
    config = copy.deepcopy(tiny_lm.config)
    config.tie_word_embeddings = True
    torch.manual_seed(0)
    tied = type(tiny_lm)(config)
    torch.manual_seed(1)
    other = type(tiny_lm)(config)
    load_checkpoint(save_checkpoint(tmp_path, step=1, model=tied), other)
    assert other.lm_head.weight is other.model.embed_tokens.weight
    assert torch.equal(other.lm_head.weight, tied.lm_head.weight)


def test_a_checkpoint_that_cannot_resume_this_run_is_a_checkpoint_error(tmp_path, tiny_lm, batch):
    """Regression (issue 35, class 12): a missing ``rng.pt``, a damaged ``trainer_state.pt``, RNG states or
    weights of another model raised FileNotFoundError, UnpicklingError, KeyError or RuntimeError in the
    middle of a resume. ``check_resumable`` refuses first, naming the file; what only loading shows is a
    ``CheckpointError`` from ``load_checkpoint``."""
    from execrl.trainer.checkpoint import check_resumable
    from execrl.trainer.errors import CheckpointError

    config, optimizer, scheduler = _trained(tiny_lm, batch)
    path = save_checkpoint(
        tmp_path, step=0, model=tiny_lm, optimizer=optimizer, scheduler=scheduler, data_state={"next_step": 1}
    )
    check_resumable(path, tiny_lm, data_keys=("next_step",))  # the run's own checkpoint passes
    with pytest.raises(CheckpointError, match="lacks \\['epoch'\\]"):
        check_resumable(path, tiny_lm, data_keys=("epoch",))
    with pytest.raises(CheckpointError, match="value_head.safetensors: missing"):
        check_resumable(path, tiny_lm, extra_modules={"value_head": ValueHead(16)})
    other = copy.deepcopy(tiny_lm)
    other.lm_head = torch.nn.Linear(16, 7, bias=False)
    with pytest.raises(CheckpointError, match="model.safetensors: not this model's weights"):
        check_resumable(path, other)

    torch.save({"python": 1}, path / "rng.pt")  # loads, but is no RNG state
    with pytest.raises(CheckpointError, match="rng.pt: does not fit this run"):
        load_checkpoint(path, tiny_lm, optimizer, scheduler)
    (path / "trainer_state.pt").write_bytes(b"garbage")
    with pytest.raises(CheckpointError, match="trainer_state.pt: damaged"):
        check_resumable(path, tiny_lm)
    torch.save([1, 2], path / "trainer_state.pt")
    with pytest.raises(CheckpointError, match="trainer_state.pt: not a trainer state"):
        check_resumable(path, tiny_lm)
    (path / "rng.pt").unlink()
    with pytest.raises(CheckpointError, match="rng.pt: missing"):
        check_resumable(path, tiny_lm)
