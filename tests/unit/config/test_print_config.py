"""``execrl train --print-config``, the run directory's ``config.toml`` and the configs the docs ship."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import execrl
from execrl.config import load_config, to_toml, validate_config

SRC = str(Path(execrl.__file__).resolve().parents[1])
DOCS_CONFIGS = sorted((Path(__file__).parents[3] / "docs" / "configs").glob("*.toml"))


def test_print_config_shows_every_key_under_its_description_and_reads_back() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "execrl.cli", "train", "--print-config", "rollout.top_k=16"],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    at = lines.index("top_k = 16")
    assert lines[at - 1] == "# 0 disables top-k"
    assert "# inject_nan_loss_at_step = (unset)" in lines  # unset optional keys are shown, commented out
    assert "# training mixture: registered suite or task JSONL path/URL -> weight (> 0)" in lines
    assert validate_config(tomllib.loads(proc.stdout)) == load_config(None, ["rollout.top_k=16"])


def test_config_toml_round_trips_through_tomli_w() -> None:
    config = load_config(
        None, ['sandbox.urls=["http://127.0.0.1:9"]', 'reward.verifiers={"a.b"="m:f"}', "run.seed=-3"]
    )
    text = to_toml(config)
    assert "#" not in text  # the run directory's copy carries no comments
    assert validate_config(tomllib.loads(text)) == config


@pytest.mark.parametrize("path", DOCS_CONFIGS, ids=[p.name for p in DOCS_CONFIGS])
def test_the_configs_in_docs_still_load(path: Path) -> None:
    if "stages" in tomllib.loads(path.read_text()):  # a staged run's config: every stage validated too
        from execrl.config import load_typed
        from execrl.config.stages import StagedConfig, check_stages

        check_stages(load_typed(StagedConfig, path), source=str(path))
        return
    config = load_config(path)
    assert validate_config(tomllib.loads(to_toml(config))) == config


def test_docs_ship_configs() -> None:
    assert DOCS_CONFIGS, "docs/configs holds no TOML file to check"


def test_config_code_never_imports_torch() -> None:
    code = (
        "import sys; from execrl.config import load_config, to_toml; from execrl.components import setup; "
        "c = load_config(None, ['algorithm.advantage_estimator=gae']); to_toml(c, descriptions=True); "
        "setup.trainer_config(c); setup.reward_config(c); assert 'torch' not in sys.modules, 'torch'"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"})  # fmt: skip
    assert proc.returncode == 0, proc.stderr
