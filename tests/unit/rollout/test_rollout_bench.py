"""`execrl bench rollout` runs end to end on a tiny model and writes its JSON (no speed assertion)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from transformers import PreTrainedTokenizerBase

from execrl.bench import rollout as bench_rollout
from execrl.rollout.models import tiny_model


def test_bench_rollout_writes_json_for_both_modes(tmp_path: Path, tokenizer: PreTrainedTokenizerBase) -> None:
    model_dir = tmp_path / "tiny"
    tiny_model(seed=0).save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    parser = argparse.ArgumentParser()
    bench_rollout.add_arguments(parser)
    out = tmp_path / "bench.json"
    args = parser.parse_args(
        ["--model-dir", str(model_dir), "--prompts", "2", "--samples", "2", "--max-new-tokens", "3"]
        + ["--mode", "both", "--json", str(out)]
    )
    assert bench_rollout.run(args) == 0
    report = json.loads(out.read_text())
    fixed = report["modes"]["fixed"]
    assert fixed["execrl"]["tokens"] == fixed["hf_generate"]["tokens"] == 2 * 2 * 3
    assert report["ratio_vs_hf"] == fixed["ratio_vs_hf"] > 0
    assert set(report["modes"]) == {"fixed", "natural"}
    assert report["logprob_max_abs_diff"] < 1e-4
