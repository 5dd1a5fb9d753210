"""LoRA adapter directories that cannot be the model they claim, in ``execrl export``, ``serve`` and
``eval`` (issue 35, class 11).

Regressions: a truncated ``adapter_model.safetensors`` (``SafetensorError``), an ``adapter_config.json``
whose rank differs from its weights or whose ``target_modules`` name a module the model lacks
(``ValueError``), or whose rank is not a number (``TypeError``), ended each command in a traceback; an
adapter on the tied output head (``lm_head``: training refuses it, ``lora.add_adapters``) was folded and
served with logits up to 1.87 off the adapter model, since folding it moves the tied input embedding
too. Now each is one ``error:`` line naming the file and the problem, exit 2, nothing written; the tied
head is refused as training refuses it (folding it correctly would need an untied copy of the head).

The adapters are written over the tiny random tied Llama of ``conftest.py`` (no download).
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from execrl.cli import main
from execrl.rollout.models import tiny_model
from execrl.trainer import LoraSettings, lora


def _adapter_dir(root: Path, base: Path, *, targets: tuple[str, ...] = ("q_proj", "v_proj")) -> Path:
    """A PEFT adapter directory over ``base`` whose adapters change the outputs (B non-zero)."""
    from peft import LoraConfig

    model = tiny_model(seed=0)
    config = LoraConfig(r=4, lora_alpha=8, target_modules=list(targets))  # as another tool would write it
    with warnings.catch_warnings():  # peft warns about an adapter on a tied layer (the case under test)
        warnings.simplefilter("ignore")
        lora._inject(config, model)
        generator = torch.Generator().manual_seed(7)
        with torch.no_grad():
            for name, param in model.named_parameters():
                if "lora_B" in name:
                    param.copy_(torch.randn(param.shape, generator=generator) * 0.1)
        root.mkdir(parents=True)
        lora.save_adapter_dir(model, root, base_model=str(base))
    return root


def _edit_config(directory: Path, **fields: Any) -> None:
    path = directory / "adapter_config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **fields}))


def _truncate(directory: Path) -> None:
    weights = directory / "adapter_model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])


BROKEN: dict[str, tuple[Callable[[Path], None], str, str]] = {
    # name -> (break the directory, the file the error names, words of the problem)
    "truncated": (_truncate, "adapter_model.safetensors", "not a complete safetensors file"),
    "wrong-rank": (lambda d: _edit_config(d, r=8), "adapter_model.safetensors", "another rank"),
    "rank-not-a-number": (lambda d: _edit_config(d, r="four"), "adapter_config.json", "r must be a positive"),
    "unknown-target": (
        lambda d: _edit_config(d, target_modules=["q_proj", "qkv_proj"]),
        "adapter_config.json",
        "['qkv_proj'] match no module",
    ),
    "no-weights": (
        lambda d: (d / "adapter_model.safetensors").unlink(),
        "adapter_model.safetensors",
        "missing",
    ),
    "tied-head": (lambda d: None, "adapter_config.json", "ties its input embedding to its output head"),
}


@pytest.fixture(scope="module")
def broken_dirs(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("adapters")
    out = {}
    for name, (breaker, _, _) in BROKEN.items():
        targets = ("q_proj", "lm_head") if name == "tied-head" else ("q_proj", "v_proj")
        out[name] = _adapter_dir(root / name, tiny_model_dir, targets=targets)
        breaker(out[name])
    return out


def _serve_argv(directory: Path, _tmp: Path) -> list[str]:
    return ["serve", "--model", str(directory), "--port", "0"]


def _export_argv(directory: Path, tmp: Path) -> list[str]:
    return ["export", str(directory), str(tmp / "exported")]


def _eval_argv(directory: Path, tmp: Path) -> list[str]:
    return [
        "eval",
        "--model",
        str(directory),
        "--suite",
        "humaneval",
        "--limit",
        "1",
        "--json",
        str(tmp / "e.json"),
    ]


@pytest.mark.parametrize("broken", list(BROKEN))
@pytest.mark.parametrize("command", [_export_argv, _serve_argv, _eval_argv], ids=["export", "serve", "eval"])
def test_a_broken_adapter_directory_is_one_error_line(
    broken: str,
    command: Callable[[Path, Path], list[str]],
    broken_dirs: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import execrl.serve.cli as serve_cli

    async def never(*_args: Any) -> None:
        raise AssertionError("the server started on a broken adapter directory")

    monkeypatch.setattr(serve_cli, "_serve_until_signal", never)
    _, file_name, problem = BROKEN[broken]
    assert main(command(broken_dirs[broken], tmp_path)) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert f"{broken_dirs[broken] / file_name}:" in err and problem in err, err
    assert list(tmp_path.iterdir()) == [], "something was written"


def test_a_good_adapter_directory_still_serves_folded(tiny_model_dir: Path, tmp_path: Path) -> None:
    """The checks refuse only what is broken: the same directory, unbroken, loads folded with the adapter
    model's logits."""
    from execrl.serve.export import load_any_model

    directory = _adapter_dir(tmp_path / "good", tiny_model_dir)
    folded, _, _ = load_any_model(str(directory))
    carried, _, _ = load_any_model(str(directory), merge=False)
    assert lora.has_adapters(carried) and not lora.has_adapters(folded)
    ids = torch.tensor([[1, 40, 41, 42, 43]])
    with torch.no_grad():
        assert torch.allclose(folded(ids).logits, carried(ids).logits, atol=1e-5)


def test_training_refuses_the_tied_head_too() -> None:
    """The serving refusal mirrors training's (``add_adapters``)."""
    with pytest.raises(ValueError, match="ties its input embedding to its output head"):
        lora.add_adapters(
            tiny_model(seed=0), LoraSettings(rank=4, alpha=8, target_modules=("q_proj", "lm_head"))
        )
