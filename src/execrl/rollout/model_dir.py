"""Checks on a Hugging Face model directory before anything large is allocated (issue 24, class 4).

What ``from_pretrained`` does with bad input, and what execrl does first:

- ``config.json``'s sizes are trusted: a 1 KB config asked for 13.8 GB. :func:`plan_model` builds the model
  on the meta device (no memory), counts its parameters and buffers at the load dtype and refuses past
  :func:`max_model_bytes` (half the machine's memory, cgroup-aware; ``EXECRL_MAX_MODEL_MB`` overrides),
  naming the size fields of ``config.json``.
- a weights file that lacks tensors loads with them randomly initialised (a printed "LOAD REPORT" only):
  a file with 1 of SmolLM2's 272 tensors served, evaluated and exported as if trained.
  :func:`check_weight_files` compares the safetensors headers with the meta model before loading (names,
  shapes; a truncated or non-safetensors file is an error naming it), and :func:`check_loading_info`
  refuses what loading itself reports missing or mismatched.
- a broken tokenizer file gave a traceback after the weights had loaded: :func:`load_tokenizer` runs
  first, checks that the tokenizer's JSON files parse, and renders the chat template once.
- ``trust_remote_code`` is always passed as ``False``: execrl never runs Python code shipped in a model
  directory; a directory that needs it (``auto_map`` to its own modules) is refused by transformers, and
  the error names the directory.

Every problem is a :class:`~execrl.rollout.models.ModelLoadError` of one line naming the file or field.

Limits: the estimate counts weights, not activations or the KV cache (the callers bound those per
request). Names are compared with the meta model only when the file holds no name the model lacks:
checkpoints whose names transformers converts at load time (fused MoE experts, legacy prefixes) are left
to loading's own report. ``pytorch_model.bin`` files are not inspected before loading (they are pickles;
transformers reads them with ``weights_only``), only by the report.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch
    from transformers import PretrainedConfig, PreTrainedTokenizerBase

__all__ = [
    "ModelLoadError",
    "ModelPlan",
    "check_loading_info",
    "check_tensor_names",
    "check_weight_files",
    "load_tokenizer",
    "max_model_bytes",
    "meta_model",
    "plan_model",
    "read_headers",
]

SIZE_FIELDS = (
    "vocab_size",
    "hidden_size",
    "intermediate_size",
    "moe_intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "num_local_experts",
    "num_experts",
    "max_position_embeddings",
)
MAX_LAYERS = 1024  # building layers on the meta device costs ~4 ms each; no released causal LM has 1024
TOKENIZER_JSON = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json")
MAX_JSON_BYTES = 256 << 20
_SHOWN = 4  # tensor names listed in an error before "and N more"


class ModelLoadError(RuntimeError):
    """A model directory or the embedded model package is missing or unusable (``execrl.rollout.models``
    exports it too)."""


def _error(message: str) -> Exception:
    return ModelLoadError(message)


@dataclass(frozen=True)
class ModelPlan:
    """What loading ``directory`` will allocate, known before it does."""

    directory: Path
    config: PretrainedConfig
    tensors: Mapping[str, tuple[int, ...]]  # state-dict name -> shape (the meta model's)
    parameters: tuple[frozenset[str], ...]  # each parameter by all its names (tied ones share a tensor)
    weight_bytes: int


def _memory_limit_bytes() -> int:
    """The machine's memory, or the cgroup's limit when lower."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    try:
        text = Path("/sys/fs/cgroup/memory.max").read_text().strip()
    except OSError:
        return total
    return min(total, int(text)) if text.isdigit() else total


def max_model_bytes() -> int:
    """The most weights a model may hold: ``EXECRL_MAX_MODEL_MB``, else half the machine's memory (a
    model that needs more cannot also hold its activations, a reference copy or an optimizer)."""
    override = os.environ.get("EXECRL_MAX_MODEL_MB")
    if override:
        if not override.isdigit():
            raise _error(f"EXECRL_MAX_MODEL_MB={override!r} is not a whole number of MiB")
        return int(override) << 20
    return _memory_limit_bytes() // 2


def _read_json_object(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise _error(f"{path}: not a regular file")
    if path.stat().st_size > MAX_JSON_BYTES:
        raise _error(f"{path}: {path.stat().st_size} bytes; a model's JSON file is at most {MAX_JSON_BYTES}")
    try:
        value = json.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise _error(f"{path}: not UTF-8 (invalid byte at offset {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise _error(f"{path}: not valid JSON ({exc.msg}, line {exc.lineno} column {exc.colno})") from None
    except (ValueError, RecursionError) as exc:  # an integer past 4,300 digits, or nesting past the stack
        raise _error(f"{path}: not readable JSON ({str(exc).splitlines()[0][:120]})") from None
    if not isinstance(value, dict):
        raise _error(f"{path}: expected a JSON object, got {type(value).__name__}")
    return value


def _size_fields(raw: Mapping[str, Any]) -> str:
    shown = [f"{k}={raw[k]}" for k in SIZE_FIELDS if k in raw]
    return ", ".join(shown) or "no size fields"


def _load_config(directory: Path) -> tuple[PretrainedConfig, dict[str, Any]]:
    from huggingface_hub.errors import StrictDataclassError
    from transformers import AutoConfig
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    path = directory / "config.json"
    raw = _read_json_object(path)
    layers = raw.get("num_hidden_layers", raw.get("n_layer", 0))
    if isinstance(layers, int) and layers > MAX_LAYERS:
        raise _error(f"{path}: num_hidden_layers={layers} is above {MAX_LAYERS}; refusing to build it")
    if "auto_map" in raw and raw.get("model_type") not in CONFIG_MAPPING:
        raise _error(
            f"{path}: model_type {raw.get('model_type')!r} is not built into transformers and auto_map names "
            "the directory's own Python code; execrl never runs it (trust_remote_code=False)"
        )
    try:
        config = AutoConfig.from_pretrained(directory, trust_remote_code=False)
    except (ValueError, TypeError, KeyError, AttributeError, OSError, StrictDataclassError) as exc:
        raise _error(f"{path}: {_first_line(exc)}") from None
    return config, raw


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = " ".join(lines[:2]) if lines else type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."


def _meta_model(config: PretrainedConfig, path: Path) -> torch.nn.Module:
    import torch
    from transformers import AutoModelForCausalLM

    try:
        with torch.device("meta"):
            model: torch.nn.Module = AutoModelForCausalLM.from_config(  # type: ignore[no-untyped-call]
                config, trust_remote_code=False
            )
            return model
    except (ValueError, TypeError, KeyError, AttributeError, RuntimeError) as exc:
        raise _error(f"{path}: the model it describes cannot be built: {_first_line(exc)}") from None


def meta_model(plan: ModelPlan) -> torch.nn.Module:
    """The model ``plan`` describes, on the meta device (its modules and shapes; no memory)."""
    return _meta_model(plan.config, plan.directory / "config.json")


def plan_model(directory: Path, *, dtype: torch.dtype) -> ModelPlan:
    """Read ``directory/config.json`` and size the model it describes without allocating it; refuse one
    whose weights exceed :func:`max_model_bytes`."""
    config, raw = _load_config(directory)
    path = directory / "config.json"
    meta = _meta_model(config, path)
    by_tensor: dict[int, set[str]] = {}
    for name, param in meta.named_parameters(remove_duplicate=False):
        by_tensor.setdefault(id(param), set()).add(name)
    numel = sum(p.numel() for p in meta.parameters()) + sum(b.numel() for b in meta.buffers())
    weight_bytes = numel * dtype.itemsize
    bound = max_model_bytes()
    if weight_bytes > bound:
        raise _error(
            f"{path}: the model it describes has {numel / 1e9:.2f}e9 parameters ({_size_fields(raw)}), "
            f"{weight_bytes / 2**30:.1f} GiB at {str(dtype).removeprefix('torch.')}, more than the "
            f"{bound / 2**30:.1f} GiB this machine allows (half its memory; EXECRL_MAX_MODEL_MB raises it)"
        )
    return ModelPlan(
        directory=directory,
        config=config,
        tensors={name: tuple(t.shape) for name, t in meta.state_dict(keep_vars=True).items()},
        parameters=tuple(frozenset(g) for g in by_tensor.values()),
        weight_bytes=weight_bytes,
    )


def read_headers(files: Iterable[Path]) -> dict[str, tuple[tuple[int, ...], Path]]:
    """Tensor name -> (shape, file) from safetensors headers; nothing is loaded."""
    from safetensors import SafetensorError, safe_open

    found: dict[str, tuple[tuple[int, ...], Path]] = {}
    for path in files:
        if not path.is_file():
            raise _error(f"{path}: missing (named by the index) or not a regular file")
        try:
            with safe_open(str(path), framework="pt") as handle:
                names = handle.keys()
                for name in names:
                    found[name] = (tuple(handle.get_slice(name).get_shape()), path)
        except SafetensorError as exc:
            raise _error(f"{path}: not a complete safetensors file ({_first_line(exc)})") from None
    return found


def _weight_files(directory: Path) -> list[Path] | None:
    """The safetensors files transformers would read from ``directory``; None when it holds none."""
    single = directory / "model.safetensors"
    if single.exists():
        return [single]
    index = directory / "model.safetensors.index.json"
    if not index.exists():
        return None
    weight_map = _read_json_object(index).get("weight_map")
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise _error(f"{index}: no weight_map of tensor name -> shard file")
    shards = sorted(set(weight_map.values()))
    if any(Path(s).name != s for s in shards):
        raise _error(f"{index}: a shard name is a path ({next(s for s in shards if Path(s).name != s)!r})")
    return [directory / s for s in shards]


def _listed(names: list[str]) -> str:
    head = ", ".join(sorted(names)[:_SHOWN])
    return head + (f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else "")


def check_tensor_names(
    found: Mapping[str, tuple[tuple[int, ...], Path]], plan: ModelPlan, where: str, *, strict: bool
) -> None:
    """Refuse a tensor set that is not the model's: a missing tensor, a shape that differs, and with
    ``strict`` (an execrl checkpoint, saved from this very model) a name the model lacks."""
    unexpected = [n for n in found if n not in plan.tensors]
    if unexpected and strict:
        raise _error(f"{where}: holds {len(unexpected)} tensors this model lacks ({_listed(unexpected)})")
    if unexpected:
        return  # names transformers converts at load time: its loading report decides (module doc)
    missing = [sorted(g)[0] for g in plan.parameters if not g & found.keys()]
    if missing:
        raise _error(
            f"{where}: {len(missing)} of the model's {len(plan.parameters)} tensors are missing "
            f"({_listed(missing)}); refusing to fill them with random values"
        )
    wrong = [n for n, (shape, _) in found.items() if shape != plan.tensors[n]]
    if wrong:
        name = sorted(wrong)[0]
        raise _error(
            f"{where}: tensor {name} has shape {list(found[name][0])}, the config.json in "
            f"{plan.directory} gives {list(plan.tensors[name])} (a checkpoint of another model?)"
            + (f"; {len(wrong) - 1} more differ" if len(wrong) > 1 else "")
        )


def check_weight_files(plan: ModelPlan) -> None:
    """The safetensors weights of ``plan.directory`` hold every tensor of the model, in its shapes."""
    files = _weight_files(plan.directory)
    if files is None:
        return  # .bin or other formats: checked by loading's report only
    where = str(files[0]) if len(files) == 1 else f"{plan.directory}/model.safetensors.index.json"
    check_tensor_names(read_headers(files), plan, where, strict=False)


def check_loading_info(info: Mapping[str, Any], directory: Path) -> None:
    """``from_pretrained(output_loading_info=True)``'s report: missing or mismatched tensors are errors."""
    missing = list(info.get("missing_keys") or ())
    if missing:
        raise _error(
            f"{directory}: loading left {len(missing)} tensors randomly initialised ({_listed(missing)}); "
            "the weights do not belong to this config.json"
        )
    mismatched = [str(m[0]) if isinstance(m, tuple) else str(m) for m in info.get("mismatched_keys") or ()]
    if mismatched:
        raise _error(f"{directory}: tensors of the wrong shape ({_listed(mismatched)})")


def _tokenizer_error(directory: Path, exc: BaseException) -> Exception:
    return _error(f"{directory}: the tokenizer does not load: {type(exc).__name__}: {_first_line(exc)}")


def load_tokenizer(directory: Path) -> PreTrainedTokenizerBase:
    """The tokenizer of ``directory``, loaded before any weight; a broken file is an error naming it."""
    from transformers import AutoTokenizer

    for name in TOKENIZER_JSON:
        if (directory / name).exists():
            _read_json_object(directory / name)
    try:
        tokenizer = AutoTokenizer.from_pretrained(directory, trust_remote_code=False)
    except (ValueError, KeyError, AttributeError, TypeError, OSError) as exc:
        raise _tokenizer_error(directory, exc) from None
    except Exception as exc:  # the `tokenizers` library raises bare Exception for a malformed model
        if type(exc) is not Exception:
            raise
        raise _tokenizer_error(directory, exc) from None
    _check_chat_template(tokenizer, directory)
    return tokenizer


def _check_chat_template(tokenizer: PreTrainedTokenizerBase, directory: Path) -> None:
    from jinja2 import TemplateError

    if not getattr(tokenizer, "chat_template", None):
        return
    try:
        tokenizer.apply_chat_template(
            [{"role": "user", "content": "ping"}], tokenize=False, add_generation_prompt=True
        )
    except (TemplateError, ValueError, TypeError, KeyError) as exc:
        raise _error(f"{directory}: the chat template does not render: {_first_line(exc)}") from None
