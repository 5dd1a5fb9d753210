"""Checkpoints that resume bit-exactly: weights, optimizer, LR scheduler, RNG states, data position, metrics.

Layout: ``run_dir/checkpoints/step_000010/`` holding ``model.safetensors`` (+ ``<name>.safetensors`` per extra
module, e.g. a value head), ``optimizer.pt``, ``scheduler.pt``, ``rng.pt`` (python ``random``, numpy, torch
CPU and every CUDA device), ``trainer_state.pt`` (step, the loop's opaque ``data_state``, metrics) and a
human-readable ``meta.json``. A model with LoRA adapters is saved as its adapters only, as a PEFT adapter
directory (``adapter_config.json`` + ``adapter_model.safetensors`` instead of ``model.safetensors``, so
``peft.PeftModel.from_pretrained(base, checkpoint)`` loads it too); its frozen base is the run's
``model.path``, reloaded on resume. An extra module with adapters (the async behaviour copy) likewise
saves its adapters only.

Atomic: everything is written into ``step_000010.tmp-XXXX`` in the same directory, each file is fsync'ed,
then the directory is renamed into place (``os.rename`` is atomic on POSIX) and the parent fsync'ed. A crash
or SIGKILL mid-write leaves only a ``.tmp-`` directory, which ``latest_checkpoint`` ignores and the next save
deletes; a ``step_*`` directory is always complete. Resume bugs this guards against: data position not
restored (OpenRLHF #1103), replayed data (open-instruct PR #1523), lost RNG state (non-reproducible resumes).

Limits: single writer per run directory; ``.pt`` files are read with ``torch.load(weights_only=True)``, so
``data_state`` may hold only dicts, lists, tuples, str, int, float, bool, None and tensors (checked on save).
The model file restores into an existing module; for a Hugging Face export use ``model.save_pretrained``.
"""

from __future__ import annotations

import json
import os
import pickle
import random
import re
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import safetensors.torch
import torch
from torch import nn

from execrl.trainer.errors import CheckpointError
from execrl.trainer.lora import (
    ADAPTER_WEIGHTS,
    adapter_state_dict,
    has_adapters,
    load_adapter_state_dict,
    read_adapter_weights,
    save_adapter_dir,
)

CHECKPOINTS_DIRNAME = "checkpoints"
_STEP_DIR = re.compile(r"^step_(\d+)$")
_PARTIAL_DIR = re.compile(r"^step_\d+\.(tmp|old)-")
_MODULE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class CheckpointState:
    """What ``load_checkpoint`` hands back to the loop besides the restored objects."""

    path: Path
    step: int
    data_state: dict[str, Any]
    metrics: dict[str, float]


def checkpoint_path(run_dir: str | os.PathLike[str], step: int) -> Path:
    """``run_dir/checkpoints/step_{step:06d}``."""
    return Path(run_dir) / CHECKPOINTS_DIRNAME / f"step_{step:06d}"


def list_checkpoints(run_dir: str | os.PathLike[str]) -> list[Path]:
    """Complete checkpoints of ``run_dir``, oldest step first."""
    root = Path(run_dir) / CHECKPOINTS_DIRNAME
    if not root.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in root.iterdir() if p.is_dir() and (m := _STEP_DIR.match(p.name))]
    return [p for _, p in sorted(found)]


def latest_checkpoint(run_dir: str | os.PathLike[str]) -> Path | None:
    """The complete checkpoint with the highest step, or None (half-written ``.tmp-`` dirs are ignored)."""
    found = list_checkpoints(run_dir)
    return found[-1] if found else None


def capture_rng_state() -> dict[str, Any]:
    """RNG states of python ``random``, numpy's global generator, torch CPU and all CUDA devices."""
    name, keys, pos, has_gauss, gauss = np.random.get_state()
    return {
        "python": random.getstate(),
        "numpy": (name, torch.from_numpy(np.asarray(keys, dtype=np.int64)), pos, has_gauss, gauss),
        "torch_cpu": torch.get_rng_state(),
        "torch_cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
    }


def restore_rng_state(state: Mapping[str, Any]) -> None:
    """Inverse of ``capture_rng_state``. CUDA states are restored when the device count matches."""
    random.setstate(_as_python_random_state(state["python"]))
    name, keys, pos, has_gauss, gauss = state["numpy"]
    np.random.set_state((name, keys.numpy().astype(np.uint32), int(pos), int(has_gauss), float(gauss)))
    torch.set_rng_state(state["torch_cpu"])
    cuda_states = state["torch_cuda"]
    if cuda_states and torch.cuda.is_available():
        if len(cuda_states) != torch.cuda.device_count():
            raise RuntimeError(
                f"checkpoint has RNG states for {len(cuda_states)} CUDA devices, this process sees "
                f"{torch.cuda.device_count()}; set CUDA_VISIBLE_DEVICES to match or pass restore_rng=False"
            )
        torch.cuda.set_rng_state_all(cuda_states)


def _as_python_random_state(state: Any) -> tuple[Any, ...]:
    version, internal, gauss = state
    return (int(version), tuple(int(x) for x in internal), gauss)


def _check_serialisable(value: Any, where: str) -> None:
    if value is None or isinstance(value, str | int | float | bool | torch.Tensor):
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str | int):
                raise TypeError(f"{where}: dict key {key!r} must be str or int")
            _check_serialisable(item, f"{where}[{key!r}]")
        return
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            _check_serialisable(item, f"{where}[{index}]")
        return
    raise TypeError(
        f"{where} is a {type(value).__name__}; checkpoint data_state may hold only dicts, lists, tuples, "
        "str, int, float, bool, None and tensors (convert it, e.g. a generator's get_state())"
    )


def _fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _torch_save(obj: Any, path: Path) -> None:
    with path.open("wb") as handle:
        torch.save(obj, handle)
        handle.flush()
        os.fsync(handle.fileno())


def _write_contents(
    tmp: Path,
    *,
    step: int,
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None,
    scheduler: torch.optim.lr_scheduler.LRScheduler | None,
    data_state: dict[str, Any],
    metrics: dict[str, float],
    extra_modules: Mapping[str, nn.Module],
) -> None:
    if has_adapters(model):  # LoRA: the adapters only, as a PEFT adapter directory; the base is model.path
        files = save_adapter_dir(model, tmp, base_model=getattr(model, "name_or_path", None) or None)
    else:
        files = ["model.safetensors"]
        safetensors.torch.save_model(model, str(tmp / "model.safetensors"))
    for name, module in extra_modules.items():
        _save_module(module, tmp / f"{name}.safetensors")
        files.append(f"{name}.safetensors")
    if optimizer is not None:
        _torch_save(optimizer.state_dict(), tmp / "optimizer.pt")
        files.append("optimizer.pt")
    if scheduler is not None:
        _torch_save(scheduler.state_dict(), tmp / "scheduler.pt")
        files.append("scheduler.pt")
    _torch_save(capture_rng_state(), tmp / "rng.pt")
    _torch_save({"step": step, "data_state": data_state, "metrics": metrics}, tmp / "trainer_state.pt")
    meta = {
        "format_version": 1,
        "step": step,
        "metrics": metrics,
        "files": [*files, "rng.pt", "trainer_state.pt"],
    }
    (tmp / "meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    for path in tmp.iterdir():
        _fsync_path(path)
    _fsync_path(tmp)


def _save_module(module: nn.Module, path: Path) -> None:
    """A module's weights; with LoRA adapters, the adapters' only (its frozen base is the policy's)."""
    if has_adapters(module):
        tensors = {k: v.contiguous() for k, v in adapter_state_dict(module).items()}
        safetensors.torch.save_file(tensors, str(path))
    else:
        safetensors.torch.save_model(module, str(path))


def _load_module(module: nn.Module, path: Path) -> None:
    if has_adapters(module):
        load_adapter_state_dict(module, safetensors.torch.load_file(str(path)))
    else:
        safetensors.torch.load_model(module, str(path), strict=True)


def save_checkpoint(
    run_dir: str | os.PathLike[str],
    *,
    step: int,
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    scheduler: torch.optim.lr_scheduler.LRScheduler | None = None,
    data_state: dict[str, Any] | None = None,
    metrics: Mapping[str, float] | None = None,
    keep_last: int | None = 3,
    extra_modules: Mapping[str, nn.Module] | None = None,
) -> Path:
    """Write ``run_dir/checkpoints/step_{step:06d}`` atomically and keep only the newest ``keep_last``.

    Call it at the end of a step, after the update and after advancing the data position, so that
    ``data_state`` says where the NEXT step starts. The RNG states captured are those at this call. Saving a
    step that already exists replaces it (also atomically). ``keep_last=None`` keeps every checkpoint.
    """
    if keep_last is not None and keep_last < 1:
        raise ValueError(f"keep_last must be >= 1 or None (keep all), got {keep_last}")
    extra = dict(extra_modules or {})
    for name in extra:
        if not _MODULE_NAME.match(name) or name == "model":
            raise ValueError(f"extra_modules key {name!r} must be a python identifier other than 'model'")
    data = dict(data_state or {})
    _check_serialisable(data, "data_state")
    final = checkpoint_path(run_dir, step)
    final.parent.mkdir(parents=True, exist_ok=True)
    _remove_partials(final.parent)
    tmp = Path(tempfile.mkdtemp(prefix=f"{final.name}.tmp-", dir=final.parent))
    _write_contents(
        tmp,
        step=step,
        model=model,
        optimizer=optimizer,
        scheduler=scheduler,
        data_state=data,
        metrics={k: float(v) for k, v in (metrics or {}).items()},
        extra_modules=extra,
    )
    old: Path | None = None
    if final.exists():
        old = Path(tempfile.mkdtemp(prefix=f"{final.name}.old-", dir=final.parent))
        os.rename(final, old / final.name)
    os.rename(tmp, final)
    _fsync_path(final.parent)
    if old is not None:
        shutil.rmtree(old)
    if keep_last is not None:
        for stale in list_checkpoints(run_dir)[:-keep_last]:
            shutil.rmtree(stale)
    return final


def _remove_partials(root: Path) -> None:
    for path in root.iterdir():
        if path.is_dir() and _PARTIAL_DIR.match(path.name):
            shutil.rmtree(path)


def load_checkpoint(
    path: str | os.PathLike[str],
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    scheduler: torch.optim.lr_scheduler.LRScheduler | None = None,
    *,
    extra_modules: Mapping[str, nn.Module] | None = None,
    restore_rng: bool = True,
) -> CheckpointState:
    """Restore ``model`` (and optimizer, scheduler, extra modules, RNG states when given) in place.

    Returns the step, the loop's ``data_state`` and the metrics saved with it. Raises ``FileNotFoundError``
    naming the missing file when the checkpoint lacks something that was asked for.
    """
    root = Path(path)
    if not root.is_dir():
        raise FileNotFoundError(
            f"checkpoint directory {root} does not exist (see latest_checkpoint(run_dir))"
        )
    if has_adapters(model):
        _require(root, ADAPTER_WEIGHTS)
        with _naming(root / ADAPTER_WEIGHTS, "another lora.rank or lora.target_modules?"):
            load_adapter_state_dict(model, read_adapter_weights(root))
    elif (root / ADAPTER_WEIGHTS).is_file() and not (root / "model.safetensors").is_file():
        raise FileNotFoundError(
            f"checkpoint {root} holds LoRA adapters ({ADAPTER_WEIGHTS}), not a whole model; load it into the "
            "model with the same adapters (lora.enabled=true and the run's lora settings)"
        )
    else:
        with _naming(root / "model.safetensors", "another model.path?"):
            safetensors.torch.load_model(model, _require(root, "model.safetensors"), strict=True)
    for name, module in (extra_modules or {}).items():
        with _naming(root / f"{name}.safetensors", "the run's settings differ?"):
            _load_module(module, _require(root, f"{name}.safetensors"))
    if optimizer is not None:
        with _naming(root / "optimizer.pt", "another model, lora.rank or lora.target_modules?"):
            optimizer.load_state_dict(_load_pt(root, "optimizer.pt"))
    if scheduler is not None:
        with _naming(root / "scheduler.pt", "not this run's LR schedule"):
            scheduler.load_state_dict(_load_pt(root, "scheduler.pt"))
    if restore_rng:
        with _naming(root / "rng.pt", "not the RNG states a checkpoint holds"):
            restore_rng_state(_load_pt(root, "rng.pt"))
    return _trainer_state(root)


@contextmanager
def _naming(path: Path, hint: str) -> Iterator[None]:
    """A state that does not fit what it is loaded into becomes a ``CheckpointError`` naming the file."""
    try:
        yield
    except (KeyError, TypeError, ValueError, RuntimeError, IndexError) as exc:
        raise CheckpointError(f"{path}: does not fit this run ({_first_line(exc)}; {hint})") from None


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return (lines[0] if lines else type(exc).__name__)[:300]


def _load_pt(root: Path, name: str) -> Any:
    """``torch.load`` (weights only) of ``root/name``; a damaged file is a ``CheckpointError`` naming it."""
    path = _require(root, name)
    try:
        return torch.load(path, weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, ValueError, OSError, KeyError) as exc:
        raise CheckpointError(
            f"{path}: damaged, it does not load ({_first_line(exc)}); move this checkpoint away to resume "
            "from the one before it"
        ) from None


def _trainer_state(root: Path) -> CheckpointState:
    state = _load_pt(root, "trainer_state.pt")
    ok = isinstance(state, dict) and isinstance(state.get("step"), int)
    if not ok or not isinstance(state.get("data_state"), dict) or not isinstance(state.get("metrics"), dict):
        raise CheckpointError(
            f"{root / 'trainer_state.pt'}: not a trainer state (a dict of step, data_state and metrics)"
        )
    return CheckpointState(
        path=root, step=state["step"], data_state=dict(state["data_state"]), metrics=dict(state["metrics"])
    )


def _require(root: Path, name: str) -> Path:
    path = root / name
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint {root} has no {name}; was it saved with that component?")
    return path


def _header(path: Path) -> dict[str, tuple[int, ...]]:
    """Tensor name -> shape from a safetensors header (nothing loaded); ``CheckpointError`` if damaged."""
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(path), framework="pt") as handle:
            names = handle.keys()
            return {name: tuple(handle.get_slice(name).get_shape()) for name in names}
    except (SafetensorError, OSError) as exc:
        raise CheckpointError(f"{path}: not a complete safetensors file ({_first_line(exc)})") from None


def _check_adapters(path: Path, model: nn.Module) -> None:
    """The checkpoint's adapters are this model's: same modules (``lora.target_modules``), same rank."""
    found = {k.removeprefix("base_model.model."): v for k, v in _header(path).items()}
    expected = {k: tuple(v.shape) for k, v in adapter_state_dict(model).items()}
    if set(found) != set(expected):
        extra, missing = sorted(set(found) - set(expected)), sorted(set(expected) - set(found))
        raise CheckpointError(
            f"{path}: the run's adapters sit on other modules than this config's (lora.target_modules): "
            f"the checkpoint has {extra[:2]} that the config lacks, the config {missing[:2]} that it lacks; "
            "resume with the run's lora.target_modules"
        )
    for name in sorted(expected):
        if found[name] != expected[name]:
            rank = found[name][0] if ".lora_A." in name else found[name][-1]  # A is [r, in], B [out, r]
            raise CheckpointError(
                f"{path}: adapter {name} is {list(found[name])}, this config's {list(expected[name])}: the run "
                f"was trained with lora.rank={rank}; resume with lora.rank={rank}"
            )


def _check_weights(root: Path, model: nn.Module) -> None:
    """The checkpoint holds what ``model`` is: adapters for a LoRA model (``lora.enabled``), a whole model
    otherwise, with this model's tensor names and shapes."""
    adapters, whole = root / ADAPTER_WEIGHTS, root / "model.safetensors"
    if has_adapters(model) and not adapters.is_file():
        trained = "lora.enabled=false (a whole model)" if whole.is_file() else "no weights file"
        raise CheckpointError(
            f"{root}: no {ADAPTER_WEIGHTS}, so no LoRA adapters to resume: {trained}; resume with the run's "
            "lora settings"
        )
    if has_adapters(model):
        _check_adapters(adapters, model)
        return
    if not whole.is_file():
        trained = "lora.enabled=true (adapters only)" if adapters.is_file() else "no weights file"
        raise CheckpointError(
            f"{root}: no model.safetensors, so no whole model to resume: {trained}; resume with the run's "
            "lora settings (lora.enabled=true and its rank and target_modules)"
        )
    state = {name: tuple(t.shape) for name, t in model.state_dict().items()}
    found = _header(whole)
    unexpected = sorted(set(found) - set(state))
    wrong = sorted(n for n in set(found) & set(state) if found[n] != state[n])
    if unexpected or wrong:
        raise CheckpointError(
            f"{whole}: not this model's weights (tensors it lacks: {unexpected[:2]}; of another shape: "
            f"{wrong[:2]}); resume with the run's model.path"
        )


def check_resumable(
    path: str | os.PathLike[str],
    model: nn.Module,
    *,
    extra_modules: Mapping[str, nn.Module] | None = None,
    data_keys: Sequence[str] = (),
) -> None:
    """Raise ``CheckpointError`` if ``load_checkpoint(path, model, optimizer, scheduler,
    extra_modules=...)`` cannot restore this run, before anything is restored: every file a resume reads
    is there; the weights are the model's (LoRA on or off as the checkpoint was written, the same rank and
    modules, the same tensors); ``trainer_state.pt`` loads and its ``data_state`` holds ``data_keys``. What
    only loading can show (a damaged ``optimizer.pt``, ``rng.pt`` or ``scheduler.pt``) is a
    ``CheckpointError`` from ``load_checkpoint`` itself (issue 35, class 12: each was a traceback)."""
    root = Path(path)
    if not root.is_dir():
        raise CheckpointError(f"{root}: not a checkpoint directory")
    names = [f"{name}.safetensors" for name in extra_modules or {}]
    for name in [*names, "optimizer.pt", "scheduler.pt", "rng.pt", "trainer_state.pt"]:
        if not (root / name).is_file():
            raise CheckpointError(
                f"{root / name}: missing; a checkpoint of this run holds it (the run's settings differ, or the "
                "checkpoint is damaged: move it away to resume from the one before it)"
            )
    _check_weights(root, model)
    state = _trainer_state(root)
    missing = [key for key in data_keys if key not in state.data_state]
    if missing:
        raise CheckpointError(f"{root / 'trainer_state.pt'}: its data_state lacks {missing}")
