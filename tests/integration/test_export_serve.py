"""``execrl export`` and ``execrl eval --model`` on a real run: a short ``execrl train`` of the tiny model
writes a checkpoint; the export loads in plain transformers with the checkpoint's logits."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from toy_domain import toy_overrides

from execrl.config import load_config
from execrl.recipes.grpo import train

HERE = Path(__file__).parent


@pytest.fixture(scope="module")
def trained_run(tiny_model_dir: Path, toy_tasks_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("runs")
    overrides = [
        *toy_overrides(tiny_model_dir, toy_tasks_file, out),
        "run.total_steps=2",
        "eval.enabled=false",
    ]
    return train(load_config(None, overrides), progress=False).run_dir


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env_path = f"{HERE}:{Path(__file__).parents[2] / 'src'}"
    return subprocess.run(
        [sys.executable, "-m", "execrl.cli", *args],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin"},
        timeout=300,
    )


@pytest.mark.slow
def test_export_loads_in_plain_transformers_with_equal_logits(
    trained_run: Path, tiny_model_dir: Path, tmp_path: Path
) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from execrl.serve import load_any_model

    out = tmp_path / "exported"
    done = _cli("export", str(trained_run), str(out))
    assert done.returncode == 0, done.stderr
    for name in ("config.json", "model.safetensors", "generation_config.json", "tokenizer_config.json"):
        assert (out / name).is_file(), name
    plain = AutoModelForCausalLM.from_pretrained(out).eval()
    tokenizer = AutoTokenizer.from_pretrained(out)
    assert tokenizer.chat_template, "the chat template must travel with the export"
    checkpoint = sorted((trained_run / "checkpoints").iterdir())[-1]
    ours, _, source = load_any_model(str(checkpoint))
    base, _, _ = load_any_model(str(tiny_model_dir))
    ids = torch.tensor([tokenizer("def add(a, b): return a + b")["input_ids"]])
    with torch.no_grad():
        exported_logits = plain(ids).logits
        checkpoint_logits = ours(ids).logits
        base_logits = base(ids).logits
    assert source.checkpoint == checkpoint
    assert torch.equal(exported_logits, checkpoint_logits)
    assert not torch.allclose(exported_logits, base_logits), (
        "training changed nothing: the test proves nothing"
    )


@pytest.mark.slow
def test_export_refuses_bad_sources(tmp_path: Path, trained_run: Path) -> None:
    """Exporting a run with no checkpoint, or a folder that is nothing, names the problem (exit 2)."""
    (tmp_path / "empty-run").mkdir()
    (tmp_path / "empty-run" / "config.toml").write_text((trained_run / "config.toml").read_text())
    no_ckpt = _cli("export", str(tmp_path / "empty-run"), str(tmp_path / "o1"))
    assert no_ckpt.returncode == 2 and "no complete checkpoint" in no_ckpt.stderr
    nothing = _cli("export", str(tmp_path), str(tmp_path / "o2"))
    assert nothing.returncode == 2 and "is not 'smollm2-135m-instruct'" in nothing.stderr
    assert not (tmp_path / "o1").exists() and not (tmp_path / "o2").exists()


@pytest.mark.slow
@pytest.mark.parametrize("which", ["run", "checkpoint", "exported"])
def test_eval_accepts_run_checkpoint_and_export(trained_run: Path, tmp_path: Path, which: str) -> None:
    exported = tmp_path / "exported"
    assert _cli("export", str(trained_run), str(exported)).returncode == 0
    model = {
        "run": trained_run,
        "checkpoint": sorted((trained_run / "checkpoints").iterdir())[-1],
        "exported": exported,
    }[which]
    done = _cli(
        "eval", "--model", str(model), "--suite", "humaneval", "--limit", "2", "--max-new-tokens", "4"
    )
    assert done.returncode == 0, done.stderr
    assert "suite humaneval: 2 tasks" in done.stdout
