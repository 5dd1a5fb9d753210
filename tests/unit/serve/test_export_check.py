"""``execrl export`` proves its output: the written directory, read back with plain transformers, gives the
trained model's logits on chat-templated prompts within 1e-5, or export fails saying by how much.

Guards against verl #7285 / #4553 (a "merged" LoRA export byte-identical to the base model, no warning)
and a tied embedding coming apart in the export (transformers #45127): both models here tie their input
embedding to the output head, and the LoRA one carries adapters whose B is non-zero, so a base-model
export differs visibly.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, PreTrainedModel

from execrl.cli import main
from execrl.rollout.models import default_tokenizer, tiny_model
from execrl.serve import export as export_module
from execrl.serve import export_model, load_any_model
from execrl.serve.export import export_check_summary
from execrl.serve.export_check import LOGITS_TOLERANCE, ExportMismatch, check_export_logits, check_prompt_ids
from execrl.trainer import LoraSettings, lora


@pytest.fixture(scope="module")
def base_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tied-tiny")
    model = tiny_model(seed=0)
    assert model.config.tie_word_embeddings and model.lm_head.weight is model.model.embed_tokens.weight
    model.save_pretrained(path)
    default_tokenizer().save_pretrained(path)
    return path


def _trained_adapters(base_dir: Path) -> PreTrainedModel:
    model, _, _ = load_any_model(str(base_dir))
    lora.add_adapters(model, LoraSettings(rank=4, alpha=8))
    generator = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.copy_(torch.randn(param.shape, generator=generator) * 0.1)
    return model.eval()


@pytest.fixture(scope="module")
def adapter_dir(base_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A PEFT adapter directory (as a LoRA checkpoint holds) over the tied tiny model."""
    path = tmp_path_factory.mktemp("adapters")
    lora.save_adapter_dir(_trained_adapters(base_dir), path, base_model=str(base_dir))
    return path


def _logits(model: PreTrainedModel, ids: list[int]) -> torch.Tensor:
    with torch.no_grad():
        return model(torch.tensor([ids])).logits


def test_prompts_are_chat_templated() -> None:
    tokenizer = default_tokenizer()
    ids = check_prompt_ids(tokenizer)
    assert len(ids) == 3 and all("<|im_start|>assistant" in tokenizer.decode(p) for p in ids)


def test_tied_full_model_export_matches(base_dir: Path, tmp_path: Path) -> None:
    out = export_model(str(base_dir), tmp_path / "out")
    plain = AutoModelForCausalLM.from_pretrained(out).eval()
    assert plain.lm_head.weight is plain.model.embed_tokens.weight  # still tied
    assert "max |diff| 0 from the trained model (tolerance 1e-05)" in export_check_summary(out)


def test_lora_export_folds_adapters_and_matches(base_dir: Path, adapter_dir: Path, tmp_path: Path) -> None:
    trained, tokenizer, _ = load_any_model(str(adapter_dir), merge=False)
    assert lora.has_adapters(trained)
    out = export_model(str(adapter_dir), tmp_path / "merged")
    assert not (out / lora.ADAPTER_CONFIG).exists() and (out / "model.safetensors").is_file()
    check = check_export_logits(out, model=trained, tokenizer=tokenizer, folded=lora.merged_copy(trained))
    assert check.ok and check.vs_folded == 0 and 0 < check.vs_trained <= check.trained_tolerance
    base = AutoModelForCausalLM.from_pretrained(base_dir).eval()
    ids = check_prompt_ids(tokenizer)[0]
    assert not torch.allclose(_logits(base, ids), _logits(trained, ids), atol=0.5)  # the adapters matter
    served, _, _ = load_any_model(str(out))  # serve / eval --model load the merged export
    plain = AutoModelForCausalLM.from_pretrained(out).eval()
    assert torch.equal(_logits(served, ids), _logits(plain, ids))


def test_adapter_only_export_loads_in_plain_transformers(adapter_dir: Path, tmp_path: Path) -> None:
    trained, tokenizer, _ = load_any_model(str(adapter_dir), merge=False)
    assert main(["export", "--adapter-only", str(adapter_dir), str(tmp_path / "adapter")]) == 0
    out = tmp_path / "adapter"
    assert (out / lora.ADAPTER_CONFIG).is_file() and not (out / "model.safetensors").exists()
    plain = AutoModelForCausalLM.from_pretrained(
        out
    ).eval()  # transformers' PEFT integration, base underneath
    ids = check_prompt_ids(tokenizer)[1]
    assert torch.equal(_logits(plain, ids), _logits(trained, ids))
    served, _, source = load_any_model(str(out))  # serve / eval --model load the adapter directory too
    assert source.checkpoint == out and not lora.has_adapters(served)
    scale = float(_logits(trained, ids).abs().max())
    assert torch.allclose(_logits(served, ids), _logits(trained, ids), atol=LOGITS_TOLERANCE * scale, rtol=0)


def test_adapter_only_refuses_a_full_model(
    base_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["export", "--adapter-only", str(base_dir), str(tmp_path / "x")]) == 2
    assert "has no LoRA adapters" in capsys.readouterr().err and not (tmp_path / "x").exists()


def test_base_model_written_as_merged_fails_with_the_difference(
    base_dir: Path, adapter_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """verl #7285: the "merged" directory holds the base weights. Export must exit non-zero, not succeed."""

    def base_weights(
        directory: Path, model: PreTrainedModel, source: object, *, adapter_only: bool
    ) -> PreTrainedModel:
        AutoModelForCausalLM.from_pretrained(base_dir).save_pretrained(directory)
        return lora.merged_copy(model)

    monkeypatch.setattr(export_module, "_save_weights", base_weights)
    with pytest.raises(ExportMismatch) as caught:
        export_model(str(adapter_dir), tmp_path / "bad")
    assert caught.value.check.vs_trained > 0.5 and not caught.value.check.ok
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no export, no hidden half directory
    assert main(["export", str(adapter_dir), str(tmp_path / "bad2")]) == 1
    err = capsys.readouterr().err
    assert "export check failed" in err and "from the folded model (tolerance 1e-05)" in err


def test_an_adapter_directory_without_a_base_is_refused_naming_the_file(tmp_path: Path) -> None:
    from execrl.config import ConfigError
    from execrl.serve import resolve_model_source

    (tmp_path / "adapter_config.json").write_text('{"peft_type": "LORA"}')
    with pytest.raises(ConfigError, match="adapter_config.json: no base_model_name_or_path"):
        resolve_model_source(str(tmp_path))
    (tmp_path / "adapter_config.json").write_text("{not json")
    with pytest.raises(ConfigError, match="not a readable JSON adapter config"):
        resolve_model_source(str(tmp_path))
