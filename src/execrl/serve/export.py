"""A trained model leaves execrl: resolve a run / checkpoint / model directory, export a plain HF directory.

An execrl checkpoint (``run_dir/checkpoints/step_N/model.safetensors``, or with ``trainer.strategy=fsdp`` its
``shards/``, gathered here in one process) holds only the policy's state dict:
the architecture, tokenizer and chat template live with the *starting* model named in the run's
``config.toml`` (``model.path``). :func:`load_any_model` rebuilds the model from that starting point and
loads the checkpoint's weights into it (strictly: every key must match), so a run directory, a checkpoint
directory and an ordinary Hugging Face directory all load the same way. :func:`export_model` then writes
what ``transformers.AutoModelForCausalLM.from_pretrained`` and other tools read with no execrl code:
``config.json``, ``model.safetensors``, ``generation_config.json``, the tokenizer files and the chat
template, and ``execrl-export.json`` (the marker by which ``--force`` recognises an earlier export).

With LoRA (``lora.enabled``) a checkpoint holds the adapters only (a PEFT adapter directory): it loads
as the base model with those adapters, folded into the weights for serving and eval; export folds them
too (a plain dense directory) or, with ``adapter_only``, writes the adapter directory with the tokenizer.
A PEFT adapter directory (``adapter_config.json``, e.g. an ``--adapter-only`` export) loads the same way,
over the base model its ``base_model_name_or_path`` names. Every export is read back with plain
transformers and its logits checked against the model as trained (``export_check.py``) before it is
moved into place.

Limits: a checkpoint whose run directory moved away from its ``config.toml`` cannot be resolved (the
checkpoint does not record its architecture); value heads (PPO) are not exported, only the policy.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

__all__ = [
    "EXPORT_MARKER",
    "ExportError",
    "ModelSource",
    "check_export_target",
    "export_check_summary",
    "export_model",
    "load_any_model",
    "resolve_model_source",
    "verify_export",
]

EXPORT_MARKER = "execrl-export.json"  # written last into every export; --force replaces only these
EXPORT_FORMAT = "execrl-export/1"


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
    sharded = (path / "shards" / ".metadata").is_file()  # trainer.strategy=fsdp (sharded_checkpoint.py)
    return (weights or sharded) and (path / "trainer_state.pt").is_file()


def _adapter_source(path: Path) -> ModelSource:
    """A PEFT adapter directory: the base model its ``adapter_config.json`` names, with these adapters."""
    from execrl.components.setup import resolve_model_path
    from execrl.config import ConfigError

    config_file = path / "adapter_config.json"
    try:
        config = json.loads(config_file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(f"{config_file}: not a readable JSON adapter config ({exc})") from None
    base = config.get("base_model_name_or_path") if isinstance(config, dict) else None
    if not isinstance(base, str) or not base:
        raise ConfigError(f"{config_file}: no base_model_name_or_path, so the base model is unknown")
    return ModelSource(resolve_model_path(str(base)), path)


def _run_source(run_dir: Path, checkpoint: Path | None) -> ModelSource:
    from execrl.components.setup import resolve_model_path
    from execrl.config.load import load_run_config

    model = load_run_config(run_dir / "config.toml").model  # execrl train's run or execrl sft's
    return ModelSource(resolve_model_path(model.path), checkpoint, model.dtype)


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
    adapters are folded into the weights unless ``merge=False`` (then the model carries them, as trained).

    Everything that can be checked without the weights is checked first (:mod:`execrl.rollout.model_dir`):
    the config's size, the tokenizer, and a checkpoint's tensor names and shapes against the config (an
    adapter directory: ``lora.check_adapter_dir`` on the model built on the meta device), so a checkpoint
    of another model or a truncated file fails in a second instead of after loading."""
    import safetensors.torch
    import torch

    from execrl.rollout import model_dir
    from execrl.rollout.models import load_model_and_tokenizer
    from execrl.trainer.lora import (
        ADAPTER_CONFIG,
        ADAPTER_WEIGHTS,
        check_adapter_dir,
        load_adapter_dir,
        merge_adapters,
    )

    source = resolve_model_source(spec) if isinstance(spec, str) else spec
    dtype = torch.float32 if source.dtype == "float32" else torch.bfloat16
    plan = model_dir.plan_model(source.base_dir, dtype=dtype)
    adapters = source.checkpoint is not None and any(
        (source.checkpoint / name).is_file() for name in (ADAPTER_CONFIG, ADAPTER_WEIGHTS)
    )
    sharded = (  # trainer.strategy=fsdp: shards/, gathered below (every tensor checked there)
        source.checkpoint is not None
        and not adapters
        and not (source.checkpoint / "model.safetensors").is_file()
    )
    if source.checkpoint is not None and adapters:  # the config, targets, names and shapes
        check_adapter_dir(source.checkpoint, model_dir.meta_model(plan))
    elif source.checkpoint is not None and not sharded:
        weights = source.checkpoint / "model.safetensors"
        found = model_dir.read_headers([weights])
        model_dir.check_tensor_names(found, plan, str(weights), strict=True)
    model, tokenizer = load_model_and_tokenizer(source.base_dir, dtype=dtype, plan=plan)
    if source.checkpoint is not None and sharded:  # FSDP shards, gathered here (every tensor checked)
        from execrl.config import ConfigError
        from execrl.trainer.sharded_checkpoint import load_full_model_state

        try:
            load_full_model_state(source.checkpoint, model.state_dict(), complete=True)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        return model, tokenizer, source
    if source.checkpoint is not None and adapters:
        load_adapter_dir(model, source.checkpoint)
        model.eval()  # type: ignore[no-untyped-call]
        if merge:
            merge_adapters(model)
    elif source.checkpoint is not None:
        safetensors.torch.load_model(model, str(source.checkpoint / "model.safetensors"), strict=True)
    return model, tokenizer, source


class ExportError(ValueError):
    """The export target cannot be written as asked; the message names it (the CLI exits 2)."""


def _previous_export(path: Path) -> bool:
    marker = path / EXPORT_MARKER
    if marker.is_symlink() or not marker.is_file():
        return False
    try:
        return bool(json.loads(marker.read_text(encoding="utf-8")).get("format") == EXPORT_FORMAT)
    except (OSError, UnicodeDecodeError, ValueError, AttributeError):
        return False


def check_export_target(out_dir: Path, *, force: bool) -> bool:
    """Refuse a target that is not a new path (or, with ``force``, a previous export); True when an
    earlier export will be replaced. A symlink or a regular file is never written through or replaced."""
    if out_dir.is_symlink():
        raise ExportError(
            f"export target {out_dir} is a symbolic link; give the real path of a new directory"
        )
    if not out_dir.exists():
        if out_dir.parent.exists() and not out_dir.parent.is_dir():
            raise ExportError(f"export target {out_dir}: its parent {out_dir.parent} is not a directory")
        return False
    if not out_dir.is_dir():
        raise ExportError(f"export target {out_dir} exists and is not a directory; choose a new path")
    if not force:
        raise ExportError(
            f"export target {out_dir} exists; choose a new directory, or pass --force to replace an "
            "earlier export there"
        )
    if not _previous_export(out_dir):
        raise ExportError(
            f"export target {out_dir} exists and is not an earlier export (no {EXPORT_MARKER}); --force "
            "replaces only what execrl export wrote, so remove it yourself if it should go"
        )
    return True


def export_model(spec: str, out_dir: Path, *, force: bool = False, adapter_only: bool = False) -> Path:
    """Write ``spec``'s model as a plain Hugging Face directory at ``out_dir`` (a new path; with ``force``
    an earlier export there is replaced, nothing else ever is), LoRA adapters folded in; ``adapter_only``
    writes the PEFT adapter directory instead (LoRA runs only).

    Steps, each of which may refuse: the target (:func:`check_export_target`), the source and its checks
    (:func:`load_any_model`), writing into a fresh hidden directory beside the target, checking what was
    written (:func:`verify_export`), and one rename into place. Any failure removes the hidden directory,
    so a failed export never leaves a half directory that later loads as a model, or 500 MB in the way.
    """
    from execrl.serve.export_check import ExportMismatch

    replacing = check_export_target(out_dir, force=force)
    model, tokenizer, source = load_any_model(spec, merge=False)  # as trained: adapters unmerged
    try:
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.tmp-export-", dir=out_dir.parent))
    except OSError as exc:
        raise ExportError(f"export target {out_dir}: cannot create it ({exc.strerror or exc})") from None
    try:
        folded = _write_export(model, tokenizer, source, tmp, adapter_only=adapter_only)
        try:
            verify_export(tmp, model, tokenizer=tokenizer, folded=folded)
        except ExportMismatch as exc:  # name the target, not the hidden directory about to go
            raise ExportMismatch(out_dir, exc.check) from None
        _install(tmp, out_dir, replacing=replacing)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out_dir


def _write_export(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    source: ModelSource,
    tmp: Path,
    *,
    adapter_only: bool = False,
) -> PreTrainedModel | None:
    """Everything but the check; returns the dense copy the adapters were folded into, if any."""
    folded = _save_weights(tmp, model, source, adapter_only=adapter_only)
    tokenizer.save_pretrained(tmp)
    if model.generation_config is not None:
        model.generation_config.save_pretrained(tmp)
    if getattr(tokenizer, "chat_template", None) and not _has_chat_template(tmp):
        (tmp / "chat_template.jinja").write_text(str(tokenizer.chat_template), encoding="utf-8")
    tmp.chmod(0o755)  # mkdtemp's 0700 would make the export private to this user
    marker = {"format": EXPORT_FORMAT, "source": source.description}
    (tmp / EXPORT_MARKER).write_text(json.dumps(marker) + "\n", encoding="utf-8")
    return folded


def _save_weights(
    directory: Path, model: PreTrainedModel, source: ModelSource, *, adapter_only: bool
) -> PreTrainedModel | None:
    """The dense model, adapters folded into a copy (the model keeps them for the check), or with
    ``adapter_only`` the adapter directory over ``source.base_dir``. Returns the folded copy, if any."""
    from execrl.trainer.lora import has_adapters, merged_copy, save_adapter_dir

    if adapter_only and not has_adapters(model):
        raise ExportError(f"--adapter-only: {source.description} has no LoRA adapters (a full fine-tune)")
    if adapter_only:
        save_adapter_dir(model, directory, base_model=str(source.base_dir.resolve()))
        return None
    folded = merged_copy(model) if has_adapters(model) else None
    (folded or model).save_pretrained(directory, safe_serialization=True)
    return folded


def verify_export(
    tmp: Path,
    model: PreTrainedModel,
    *,
    tokenizer: PreTrainedTokenizerBase,
    folded: PreTrainedModel | None = None,
) -> None:
    """What was written reads back as this model: the safetensors file holds every parameter in its
    shape (a dense export), and plain transformers loading the directory gives the trained model's
    logits (``export_check.check_export_logits``; ``ExportMismatch`` otherwise). The check's summary is
    added to the marker."""
    import torch

    from execrl.rollout import model_dir
    from execrl.serve.export_check import ExportMismatch, check_export_logits

    if (tmp / "config.json").is_file():  # an adapter directory has no config.json of its own
        plan = model_dir.plan_model(tmp, dtype=next(model.parameters(), torch.empty(0)).dtype)
        model_dir.check_weight_files(plan)
    check = check_export_logits(tmp, model=model, tokenizer=tokenizer, folded=folded)
    if not check.ok:
        raise ExportMismatch(tmp, check)
    marker = json.loads((tmp / EXPORT_MARKER).read_text(encoding="utf-8"))
    (tmp / EXPORT_MARKER).write_text(
        json.dumps({**marker, "logits_check": check.summary()}) + "\n", encoding="utf-8"
    )


def export_check_summary(out_dir: Path) -> str:
    """The logits check's line from an export's marker (what ``execrl export`` prints)."""
    return str(json.loads((out_dir / EXPORT_MARKER).read_text(encoding="utf-8")).get("logits_check", ""))


def _install(tmp: Path, out_dir: Path, *, replacing: bool) -> None:
    """Rename ``tmp`` to ``out_dir``; an earlier export there is moved aside first and removed after."""
    old = None
    if replacing:
        if not _previous_export(out_dir):  # changed since it was checked
            raise ExportError(f"export target {out_dir} changed during the export; nothing was replaced")
        old = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.old-export-", dir=out_dir.parent))
        os.rename(out_dir, old / "export")
    elif out_dir.exists() or out_dir.is_symlink():
        raise ExportError(f"export target {out_dir} appeared during the export; nothing was replaced")
    try:
        os.rename(tmp, out_dir)
    except OSError:
        if old is not None:
            os.rename(old / "export", out_dir)
            old.rmdir()
        raise
    if old is not None:
        shutil.rmtree(old)


def _has_chat_template(directory: Path) -> bool:
    if (directory / "chat_template.jinja").is_file() or (directory / "chat_template.json").is_file():
        return True
    config = directory / "tokenizer_config.json"
    return config.is_file() and '"chat_template"' in config.read_text(encoding="utf-8")
