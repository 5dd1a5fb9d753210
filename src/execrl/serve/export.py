"""A trained model leaves execrl: resolve a run / checkpoint / model directory, export a plain HF directory.

An execrl checkpoint (``run_dir/checkpoints/step_N/model.safetensors``) holds only the policy's state dict:
the architecture, tokenizer and chat template live with the *starting* model named in the run's
``config.toml`` (``model.path``). :func:`load_any_model` rebuilds the model from that starting point and
loads the checkpoint's weights into it (strictly: every key must match), so a run directory, a checkpoint
directory and an ordinary Hugging Face directory all load the same way. :func:`export_model` then writes
what ``transformers.AutoModelForCausalLM.from_pretrained`` and other tools read with no execrl code:
``config.json``, ``model.safetensors``, ``generation_config.json``, the tokenizer files and the chat
template.

With LoRA (``lora.enabled``) a checkpoint holds the adapters only (a PEFT adapter directory): it loads
as the base model with those adapters, folded into the weights for serving and eval; export folds them
too (a plain dense directory) or, with ``adapter_only``, writes the adapter directory with the tokenizer.
A PEFT adapter directory (``adapter_config.json``, e.g. an ``--adapter-only`` export) loads the same way,
over the base model its ``base_model_name_or_path`` names. Every export is read back with plain
transformers and its logits checked against the model as trained (``export_check.py``).

Limits: a checkpoint whose run directory moved away from its ``config.toml`` cannot be resolved (the
checkpoint does not record its architecture); value heads (PPO) are not exported, only the policy.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

__all__ = ["ModelSource", "export_model", "load_any_model", "resolve_model_source"]


@dataclass(frozen=True)
class ModelSource:
    """Where a model's weights come from: a HF directory, optionally overlaid by an execrl checkpoint."""

    base_dir: Path  # a Hugging Face directory (architecture, tokenizer, chat template, starting weights)
    checkpoint: Path | None  # an execrl checkpoint (model.safetensors) or adapter directory over the base
    dtype: str = "float32"

    @property
    def description(self) -> str:
        return str(self.checkpoint) if self.checkpoint is not None else str(self.base_dir)


def _is_checkpoint(path: Path) -> bool:
    from execrl.trainer.lora import ADAPTER_WEIGHTS

    weights = (path / "model.safetensors").is_file() or (path / ADAPTER_WEIGHTS).is_file()  # full FT / LoRA
    return weights and (path / "trainer_state.pt").is_file()


def _adapter_source(path: Path) -> ModelSource:
    """A PEFT adapter directory: the base model its ``adapter_config.json`` names, with these adapters."""
    import json

    from execrl.components.setup import resolve_model_path
    from execrl.config import ConfigError

    config_file = path / "adapter_config.json"
    base = json.loads(config_file.read_text(encoding="utf-8")).get("base_model_name_or_path")
    if not base:
        raise ConfigError(f"{config_file}: no base_model_name_or_path, so the base model is unknown")
    return ModelSource(resolve_model_path(str(base)), path)


def _run_source(run_dir: Path, checkpoint: Path | None) -> ModelSource:
    from execrl.components.setup import resolve_model_path
    from execrl.config import load_config

    config = load_config(run_dir / "config.toml")
    return ModelSource(resolve_model_path(config.model.path), checkpoint, config.model.dtype)


def resolve_model_source(spec: str) -> ModelSource:
    """Accept 'smollm2-135m-instruct', a HF directory, an execrl run directory or a checkpoint directory.

    A run directory resolves to its newest complete checkpoint (the starting model if it has none yet is
    an error: exporting an untrained model by accident would be silent).
    """
    from execrl.components.setup import EMBEDDED_MODEL_NAMES, resolve_model_path
    from execrl.config import ConfigError
    from execrl.trainer.checkpoint import latest_checkpoint

    path = Path(spec).expanduser()
    if spec.lower() in EMBEDDED_MODEL_NAMES or (path / "config.json").is_file():
        return ModelSource(resolve_model_path(spec), None)
    if (path / "config.toml").is_file():
        found = latest_checkpoint(path)
        if found is None:
            raise ConfigError(f"run directory {path} has no complete checkpoint under checkpoints/ yet")
        return _run_source(path, found)
    if (path / "adapter_config.json").is_file() and not (path / "trainer_state.pt").is_file():
        return _adapter_source(path)
    if _is_checkpoint(path):
        run_dir = path.parent.parent
        if not (run_dir / "config.toml").is_file():
            raise ConfigError(
                f"checkpoint {path}: no config.toml two levels up ({run_dir}); a checkpoint holds only "
                "weights, so it must stay inside its run directory (run_dir/checkpoints/step_N)"
            )
        return _run_source(run_dir, path)
    raise ConfigError(
        f"--model {spec!r} is not 'smollm2-135m-instruct', a Hugging Face directory (config.json), an "
        "execrl run directory (config.toml), a checkpoint (model.safetensors or adapter_model.safetensors + "
        "trainer_state.pt) or a PEFT adapter directory (adapter_config.json)"
    )


def load_any_model(
    spec: str | ModelSource, *, merge: bool = True
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase, ModelSource]:
    """The model and tokenizer of ``spec`` (see :func:`resolve_model_source`), in eval mode on CPU. LoRA
    adapters are folded into the weights unless ``merge=False`` (then the model carries them, as trained)."""
    import safetensors.torch
    import torch

    from execrl.rollout.models import load_model_and_tokenizer
    from execrl.trainer.lora import ADAPTER_WEIGHTS, load_adapter_dir, merge_adapters

    source = resolve_model_source(spec) if isinstance(spec, str) else spec
    dtype = torch.float32 if source.dtype == "float32" else torch.bfloat16
    model, tokenizer = load_model_and_tokenizer(source.base_dir, dtype=dtype)
    if source.checkpoint is not None and (source.checkpoint / ADAPTER_WEIGHTS).is_file():
        load_adapter_dir(model, source.checkpoint)
        model.eval()  # type: ignore[no-untyped-call]
        if merge:
            merge_adapters(model)
    elif source.checkpoint is not None:
        safetensors.torch.load_model(model, str(source.checkpoint / "model.safetensors"), strict=True)
    return model, tokenizer, source


def export_model(spec: str, out_dir: Path, *, adapter_only: bool = False) -> Path:
    """Write ``spec``'s model as a plain Hugging Face directory at ``out_dir`` (must not exist or be empty),
    LoRA adapters folded in; ``adapter_only`` writes the PEFT adapter directory instead (LoRA runs only).

    Written to ``out_dir.tmp`` first, read back and its logits checked (``ExportMismatch`` past 1e-5), then
    renamed, so a failed or wrong export never leaves a directory that later loads as a model.
    """
    from execrl.serve.export_check import ExportMismatch, check_export_logits

    if out_dir.exists() and any(out_dir.iterdir()):
        raise FileExistsError(f"export target {out_dir} exists and is not empty; choose a new directory")
    model, tokenizer, source = load_any_model(spec, merge=False)
    tmp = out_dir.with_name(out_dir.name + ".tmp-export")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    folded = _save_weights(tmp, model, source, adapter_only=adapter_only)
    tokenizer.save_pretrained(tmp)
    if model.generation_config is not None:
        model.generation_config.save_pretrained(tmp)
    if getattr(tokenizer, "chat_template", None) and not _has_chat_template(tmp):
        (tmp / "chat_template.jinja").write_text(str(tokenizer.chat_template), encoding="utf-8")
    check = check_export_logits(tmp, model=model, tokenizer=tokenizer, folded=folded)  # plain transformers
    if not check.ok:
        shutil.rmtree(tmp)
        raise ExportMismatch(out_dir, check)
    (tmp / "EXPORTED_FROM.txt").write_text(
        f"execrl export of {source.description}\n{check.summary()}\n", encoding="utf-8"
    )
    if out_dir.exists():
        out_dir.rmdir()
    tmp.rename(out_dir)
    return out_dir


def _save_weights(
    directory: Path, model: PreTrainedModel, source: ModelSource, *, adapter_only: bool
) -> PreTrainedModel | None:
    """The dense model, adapters folded into a copy (the model keeps them for the check), or with
    ``adapter_only`` the adapter directory over ``source.base_dir``. Returns the folded copy, if any."""
    from execrl.config import ConfigError
    from execrl.trainer.lora import has_adapters, merged_copy, save_adapter_dir

    if adapter_only and not has_adapters(model):
        raise ConfigError(f"--adapter-only: {source.description} has no LoRA adapters (a full fine-tune)")
    if adapter_only:
        save_adapter_dir(model, directory, base_model=str(source.base_dir.resolve()))
        return None
    folded = merged_copy(model) if has_adapters(model) else None
    (folded or model).save_pretrained(directory, safe_serialization=True)
    return folded


def _has_chat_template(directory: Path) -> bool:
    if (directory / "chat_template.jinja").is_file() or (directory / "chat_template.json").is_file():
        return True
    config = directory / "tokenizer_config.json"
    return config.is_file() and '"chat_template"' in config.read_text(encoding="utf-8")
