"""LoRA adapters on a policy, through ``peft``, and what the rest of execrl needs from them.

LoRA (Hu et al. 2021, arXiv 2106.09685) trains ``W + (alpha / r) * B @ A`` with ``W`` frozen. The layers
come from ``peft.inject_adapter_in_model``, which replaces the targeted ``nn.Linear`` modules of the model
*in place* and returns the same model object: everything that walks the model keeps working unchanged and
applies the adapters, because it calls the modules (the trainer's trunk and shared-prompt forwards, the
engine's cascade-attention decoder in ``rollout/shared_decode.py``, which calls ``q_proj`` etc. itself,
the generic decode path, the multi-turn prefix cache). ``tests/unit/trainer/test_lora.py`` checks every
one of those paths against the merged model. Runs sample from a folded plain copy by default instead
(``lora_fold.py``, ``lora.fold_for_sampling``): peft's extra kernels per layer made decoding slower than
the full model's.

What this module adds around peft:

* ``add_adapters``: inject, with every target name checked against the model, and tied embeddings refused
  as targets (merging an adapter on a tied ``lm_head`` also moves the input embedding, which the trained
  model never did: transformers #45127);
* ``adapters_disabled``: the reference policy of the KL term is the model with its adapters off (peft's
  own switch, per layer), so no second copy of the weights exists;
* ``adapter_dropout``: the adapters' dropout in the update's gradient passes only (the model otherwise
  stays in eval mode, so sampling and old/reference log-probs never see dropout);
* the adapter state (checkpoints, Ray weight versions) and the PEFT adapter directory
  (``adapter_config.json`` + ``adapter_model.safetensors``, keys as ``PeftModel.save_pretrained`` writes
  them), which ``peft.PeftModel.from_pretrained`` and transformers' own PEFT integration load;
* ``merge_adapters``: fold each adapter into its weight and put the plain ``nn.Linear`` back (export, eval,
  serving), and ``frozen_sharing_copy`` for the async recipe's behaviour copy (the frozen base weights are
  shared, so the copy costs the adapters only).

peft is imported inside the functions: importing ``execrl.trainer`` stays cheap, and a model without
adapters never loads it.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import torch
from torch import Tensor, nn

from execrl.trainer.config import LoraSettings

__all__ = [
    "ADAPTER_CONFIG",
    "ADAPTER_WEIGHTS",
    "add_adapters",
    "adapter_dropout",
    "check_adapter_dir",
    "adapter_state_dict",
    "adapters_disabled",
    "frozen_sharing_copy",
    "has_adapters",
    "load_adapter_dir",
    "load_adapter_state_dict",
    "merge_adapters",
    "merged_copy",
    "read_adapter_weights",
    "save_adapter_dir",
    "trainable_parameter_count",
]

ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"
_PEFT_PREFIX = "base_model.model."  # PeftModel's key prefix in adapter_model.safetensors
_TIED_NAMES = ("lm_head", "embed_tokens")
M = TypeVar("M", bound=nn.Module)


def has_adapters(model: nn.Module) -> bool:
    """Whether ``model`` carries peft adapters (``inject_adapter_in_model`` records its config on it)."""
    return getattr(model, "peft_config", None) is not None


def add_adapters(model: M, settings: LoraSettings) -> M:
    """Inject LoRA layers into ``model`` in place; afterwards only the adapters have ``requires_grad``.

    Every name of ``settings.target_modules`` must match a module (the last part of its dotted name), or
    the call raises naming the linear layers the model has. Returns ``model`` itself.
    """
    from peft import LoraConfig

    if has_adapters(model):
        raise ValueError("the model already carries adapters; add_adapters injects them once")
    names = list(settings.target_modules)
    if names != ["all-linear"]:
        _check_targets(model, names)
    targets: str | list[str] = "all-linear" if names == ["all-linear"] else names
    config = LoraConfig(
        r=settings.rank,
        lora_alpha=settings.alpha,
        lora_dropout=settings.dropout,
        target_modules=targets,
        bias="none",
        task_type="CAUSAL_LM",
    )
    _inject(config, model)
    return model


def _inject(config: Any, model: nn.Module) -> None:
    """peft's injection, then the new layers in the model's train/eval mode (they are created in training
    mode, which would turn their dropout on in an eval-mode model)."""
    from peft import inject_adapter_in_model

    inject_adapter_in_model(config, model)
    for layer in _tuner_layers(model):
        layer.train(model.training)


def _check_targets(model: nn.Module, targets: list[str]) -> None:
    leaves = {name.rsplit(".", 1)[-1] for name, _ in model.named_modules() if name}
    missing = [t for t in targets if t not in leaves]
    if missing:
        linear = sorted({n.rsplit(".", 1)[-1] for n, m in model.named_modules() if isinstance(m, nn.Linear)})
        raise ValueError(
            f"lora.target_modules {missing} match no module of {type(model).__name__}; its linear layers "
            f"are named {linear}"
        )
    config: Any = getattr(model, "config", None)
    tied = [t for t in targets if t in _TIED_NAMES]
    if tied and getattr(config, "tie_word_embeddings", False):
        raise ValueError(
            f"lora.target_modules {tied}: this model ties its input embedding to its output head, so a merged "
            "adapter would change both (the trained model changed one); leave them out"
        )


def _tuner_layers(model: nn.Module) -> list[Any]:
    from peft.tuners.tuners_utils import BaseTunerLayer

    return [m for m in model.modules() if isinstance(m, BaseTunerLayer)]


@contextmanager
def adapters_disabled(model: nn.Module) -> Iterator[None]:
    """Run ``model`` as its base model (adapters off) inside the block; nothing to do without adapters.

    peft's switch also clears the adapters' ``requires_grad``; each parameter's flag is put back as it was.
    """
    if not has_adapters(model):
        yield
        return
    flags = [(p, p.requires_grad) for p in model.parameters()]
    layers = _tuner_layers(model)
    for layer in layers:
        layer.enable_adapters(False)
    try:
        yield
    finally:
        for layer in layers:
            layer.enable_adapters(True)
        for param, flag in flags:
            param.requires_grad_(flag)


@contextmanager
def adapter_dropout(model: nn.Module) -> Iterator[None]:
    """The adapters' dropout modules in training mode inside the block (the update's gradient passes); the
    rest of the model keeps its mode. Nothing to do without adapters or with dropout 0 (peft then puts an
    ``nn.Identity`` there)."""
    dropouts = [
        m for name, m in model.named_modules() if ".lora_dropout." in name and isinstance(m, nn.Dropout)
    ]
    modes = [m.training for m in dropouts]
    for module in dropouts:
        module.train(True)
    try:
        yield
    finally:
        for module, mode in zip(dropouts, modes, strict=True):
            module.train(mode)


def adapter_state_dict(model: nn.Module) -> dict[str, Tensor]:
    """The adapters' tensors, named as in a PEFT adapter file without its ``base_model.model.`` prefix
    (``model.layers.0.self_attn.q_proj.lora_A.weight``), detached (not copied)."""
    from peft import get_peft_model_state_dict

    if not has_adapters(model):
        raise ValueError("the model has no adapters (add_adapters first)")
    state: dict[str, Tensor] = get_peft_model_state_dict(model)
    return {name: value.detach() for name, value in state.items()}


def load_adapter_state_dict(model: nn.Module, state: dict[str, Tensor]) -> None:
    """Copy ``state`` (``adapter_state_dict``'s names and shapes, exactly) into the model's adapters."""
    from peft import set_peft_model_state_dict

    expected = adapter_state_dict(model)
    missing, unexpected = sorted(set(expected) - set(state)), sorted(set(state) - set(expected))
    if missing or unexpected:
        raise ValueError(
            f"adapter weights do not fit this model's adapters: missing {missing[:4]}"
            f"{'...' if len(missing) > 4 else ''}, unexpected {unexpected[:4]}"
            f"{'...' if len(unexpected) > 4 else ''} (was it trained with other lora settings?)"
        )
    wrong = [k for k, v in state.items() if tuple(v.shape) != tuple(expected[k].shape)]
    if wrong:
        raise ValueError(
            f"adapter weight {wrong[0]} has shape {tuple(state[wrong[0]].shape)}, the model's adapter "
            f"{tuple(expected[wrong[0]].shape)} (another lora.rank?)"
        )
    with torch.no_grad():
        result: Any = set_peft_model_state_dict(model, state)
    if result.unexpected_keys:  # the names were checked above; peft's own mapping must agree
        raise ValueError(f"peft did not place adapter weights {result.unexpected_keys[:4]}")


def save_adapter_dir(model: nn.Module, directory: Path, *, base_model: str | None) -> list[str]:
    """Write ``adapter_config.json`` and ``adapter_model.safetensors`` into ``directory`` (it exists), as
    ``PeftModel.save_pretrained`` lays them out; ``base_model`` is recorded as
    ``base_model_name_or_path`` (what transformers loads under the adapter). Returns the file names."""
    import safetensors.torch

    config = copy.copy(_peft_config(model))
    config.base_model_name_or_path = base_model
    config.inference_mode = True
    config.save_pretrained(str(directory))  # adapter_config.json only
    tensors = {_PEFT_PREFIX + k: v.contiguous() for k, v in adapter_state_dict(model).items()}
    safetensors.torch.save_file(tensors, str(directory / ADAPTER_WEIGHTS), metadata={"format": "pt"})
    return [ADAPTER_CONFIG, ADAPTER_WEIGHTS]


def _peft_config(model: nn.Module) -> Any:
    configs: Any = getattr(model, "peft_config", None)
    if not configs or len(configs) != 1:
        raise ValueError(f"expected one adapter on the model, found {list(configs or [])}")
    return next(iter(configs.values()))


def read_adapter_weights(directory: Path) -> dict[str, Tensor]:
    """``adapter_model.safetensors`` of ``directory`` with PeftModel's key prefix removed; a missing,
    truncated or non-safetensors file is a ``ModelLoadError`` naming it."""
    import safetensors.torch
    from safetensors import SafetensorError

    path = directory / ADAPTER_WEIGHTS
    if not path.is_file():
        raise _adapter_error(path, "missing (an adapter directory holds adapter_config.json and this file)")
    try:
        tensors = safetensors.torch.load_file(str(path))
    except (SafetensorError, OSError) as exc:
        raise _adapter_error(path, f"not a complete safetensors file ({str(exc).splitlines()[0]})") from None
    return {k.removeprefix(_PEFT_PREFIX): v for k, v in tensors.items()}


def _adapter_error(path: Path, problem: str) -> Exception:
    from execrl.rollout.models import ModelLoadError

    return ModelLoadError(f"{path}: {problem}")


def _read_adapter_config(directory: Path) -> Any:
    """``adapter_config.json`` as peft's ``LoraConfig``, its rank and alpha checked."""
    from peft import LoraConfig

    path = directory / ADAPTER_CONFIG
    try:
        config = LoraConfig.from_pretrained(str(directory))
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise _adapter_error(
            path, f"not a readable LoRA adapter config ({str(exc).splitlines()[0]})"
        ) from None
    if str(getattr(config, "peft_type", "")).upper() not in ("LORA", "PEFTTYPE.LORA"):
        raise _adapter_error(path, f"peft_type {config.peft_type}, not LORA")
    rank, alpha = config.r, config.lora_alpha
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise _adapter_error(path, f"r must be a positive integer (the adapters' rank), got {rank!r}")
    if isinstance(alpha, bool) or not isinstance(alpha, int | float) or not alpha > 0:
        raise _adapter_error(path, f"lora_alpha must be a positive number, got {alpha!r}")
    return config


def _targeted(model: nn.Module, config: Any, path: Path) -> list[str] | None:
    """The names of the modules the config's ``target_modules`` adapt (None: ``all-linear``, peft's own
    rule); every listed name must match, and no tied embedding may be among them (training refuses those,
    ``add_adapters``: folded for serving, the adapter would move both the head and the input embedding)."""
    from peft.tuners.tuners_utils import check_target_module_exists

    targets = config.target_modules
    if targets == "all-linear" or (not isinstance(targets, str) and list(targets or ()) == ["all-linear"]):
        return None  # every linear layer but the output head
    if not targets:
        raise _adapter_error(path, "target_modules is empty: the adapters change nothing")
    matched = [name for name, _ in model.named_modules() if name and check_target_module_exists(config, name)]
    wanted = [targets] if isinstance(targets, str) else sorted(targets)
    missing = [t for t in wanted if not any(n == t or n.endswith(f".{t}") for n in matched)]
    if not matched or (not isinstance(targets, str) and missing):
        linear = sorted({n.rsplit(".", 1)[-1] for n, m in model.named_modules() if isinstance(m, nn.Linear)})
        raise _adapter_error(
            path,
            f"target_modules {missing or wanted} match no module of {type(model).__name__}; its linear "
            f"layers are named {linear}",
        )
    tied = getattr(getattr(model, "config", None), "tie_word_embeddings", False)
    embeddings: Any = (
        getattr(model, "get_output_embeddings", None),
        getattr(model, "get_input_embeddings", None),
    )
    ids = {id(get()) for get in embeddings if get is not None}
    adapted = [n for n in matched if id(model.get_submodule(n)) in ids]
    if tied and adapted:
        raise _adapter_error(
            path,
            f"target_modules adapt {adapted}: this model ties its input embedding to its output head, so "
            "the folded adapter would change both (training refuses these targets, lora.target_modules)",
        )
    return matched


def _adapter_shapes(directory: Path) -> dict[str, tuple[int, ...]]:
    """Tensor name (PeftModel's prefix removed) -> shape, from the weights file's header only."""
    from safetensors import SafetensorError, safe_open

    path = directory / ADAPTER_WEIGHTS
    if not path.is_file():
        raise _adapter_error(path, "missing (an adapter directory holds adapter_config.json and this file)")
    try:
        with safe_open(str(path), framework="pt") as handle:
            names = handle.keys()
            return {k.removeprefix(_PEFT_PREFIX): tuple(handle.get_slice(k).get_shape()) for k in names}
    except (SafetensorError, OSError) as exc:
        raise _adapter_error(path, f"not a complete safetensors file ({str(exc).splitlines()[0]})") from None


def _check_shapes(model: nn.Module, config: Any, matched: list[str], found: dict[str, tuple[int, ...]],
                  path: Path) -> None:  # fmt: skip
    """The weights file holds ``lora_A`` [r, in] and ``lora_B`` [out, r] for every adapted linear layer,
    nothing else (a plain rank only: per-module ranks and other layer kinds are left to loading's check)."""
    if config.rank_pattern or any(not isinstance(model.get_submodule(n), nn.Linear) for n in matched):
        return
    expected: dict[str, tuple[int, ...]] = {}
    for name in matched:
        layer: Any = model.get_submodule(name)
        expected[f"{name}.lora_A.weight"] = (config.r, int(layer.in_features))
        expected[f"{name}.lora_B.weight"] = (int(layer.out_features), config.r)
    missing, unexpected = sorted(set(expected) - set(found)), sorted(set(found) - set(expected))
    if missing or unexpected:
        raise _adapter_error(
            path,
            f"holds {len(found)} tensors, not the {len(expected)} its {ADAPTER_CONFIG} describes (target_modules "
            f"{config.target_modules}): missing {missing[:2]}, unexpected {unexpected[:2]}",
        )
    wrong = [k for k in sorted(expected) if found[k] != expected[k]]
    if wrong:
        raise _adapter_error(
            path,
            f"tensor {wrong[0]} has shape {list(found[wrong[0]])}, {ADAPTER_CONFIG} (r={config.r}) and the "
            f"model give {list(expected[wrong[0]])} (another rank or another base model?)",
        )


def check_adapter_dir(directory: Path, model: nn.Module) -> Any:
    """Check an adapter directory against ``model`` before anything is loaded (the model's modules are
    all it reads: a meta-device model will do); returns peft's ``LoraConfig``. Each problem is a
    ``ModelLoadError`` naming the file (issue 35, class 11: these were tracebacks in export, serve and
    eval): the config (JSON, LoRA, rank, alpha), its targets (they exist; no tied embedding, as training
    refuses), the weights file (present, complete, its tensor names and shapes as the config says)."""
    config = _read_adapter_config(directory)
    matched = _targeted(model, config, directory / ADAPTER_CONFIG)
    found = _adapter_shapes(directory)
    if matched is not None:
        _check_shapes(model, config, matched, found, directory / ADAPTER_WEIGHTS)
    return config


def load_adapter_dir(model: M, directory: Path) -> M:
    """Inject the adapters described by ``directory``'s ``adapter_config.json`` (any LoRA config peft
    reads) into ``model`` and load their weights strictly, after :func:`check_adapter_dir`. Returns
    ``model``; a problem is a ``ModelLoadError`` naming the file."""
    config = check_adapter_dir(directory, model)
    weights = read_adapter_weights(directory)
    config.inference_mode = False
    try:
        _inject(config, model)
        load_adapter_state_dict(model, weights)
    except ValueError as exc:  # what the checks leave to loading (per-module ranks, other layer kinds)
        raise _adapter_error(
            directory / ADAPTER_WEIGHTS,
            f"{exc}; {ADAPTER_CONFIG} says r={config.r}, target_modules={config.target_modules}",
        ) from None
    return model


def merge_adapters(model: M) -> M:
    """Fold every adapter into its weight (``W += (alpha / r) * B @ A``) and put the plain base layer back
    in its place, in place; the result is a plain model with no peft module. Returns ``model``."""
    if not has_adapters(model):
        return model
    layers = {id(layer) for layer in _tuner_layers(model)}
    for name, module in list(model.named_modules()):
        if id(module) in layers:
            module.merge(safe_merge=True)  # raises on a non-finite merged weight
            parent, _, child = name.rpartition(".")
            setattr(model.get_submodule(parent), child, module.get_base_layer())
    del model.peft_config
    return model


def merged_copy(model: M) -> M:
    """A merged (plain) copy of ``model``; the model itself keeps its adapters."""
    return merge_adapters(copy.deepcopy(model))


def frozen_sharing_copy(model: M) -> M:
    """A deep copy of ``model`` that shares its frozen parameters (``requires_grad=False``) instead of
    copying them: with LoRA the copy costs the adapters only. The shared weights must stay frozen."""
    memo: dict[int, Any] = {id(p): p for p in model.parameters() if not p.requires_grad}
    return copy.deepcopy(model, memo)


def trainable_parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
