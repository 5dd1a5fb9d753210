"""With ``algorithm.async_steps=0`` (and scoring not streamed) a run is identical, step by step, to the
serial loop as it was before the overlap machinery (``recipes/pipeline.py``) was added.

Guards against the async/streaming code leaking into the default serial path (a changed seed, an extra
forward pass, another order of scheduler updates). The reference ``tests/fixtures/recipes/
serial_toy_metrics.jsonl`` was written by commit 68e2bcc (adaptive scheduler and hashed seeds, no async
mode) with exactly these overrides on this test's tiny model and toy tasks; wall-clock metrics are left
out. Floats are compared to a relative 1e-5: they are results of the CPU's kernels, and machines of this
kind differ (AMX-BF16 or AVX2 only), which moves the last digits of ``entropy/mean`` and
``train/grad_norm`` at step 1 (1e-6 relative, seen on an AMX machine); a changed seed, an extra forward
pass or a reordered scheduler update moves them by far more. ``*_diff`` metrics (rollout vs trainer
log-prob gaps, ~1e-6 of float noise themselves) are compared to an absolute 1e-5. Everything else
(counts, the step) must be equal.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from test_train_cli import EXECRL, _env, _run_dir
from toy_domain import toy_overrides

REFERENCE = Path(__file__).parents[1] / "fixtures" / "recipes" / "serial_toy_metrics.jsonl"
WALL_CLOCK = ("perf/", "time_s", "sandbox/")
# Metrics of features merged after the reference was written (the reward audit, issue 15; the padding
# share and the prompt-length cap, issue 26): they only add keys; every key the reference has must still be
# there with the same value.
ADDED_SINCE = (
    "audit/", "hack/", "train/padding_share", "rollout/max_prompt_tokens", "rollout/prompt_tokens_max",
    "rollout/tasks_over_prompt_cap",
)  # fmt: skip


@pytest.mark.slow
def test_async_steps_0_matches_the_serial_reference(
    tiny_model_dir: Path, toy_tasks_file: Path, tmp_path: Path
) -> None:
    overrides = [*toy_overrides(tiny_model_dir, toy_tasks_file, tmp_path), "run.total_steps=4", "eval.enabled=false",
                 "algorithm.async_steps=0"]  # fmt: skip
    done = subprocess.run([*EXECRL, "train", "--no-progress", *overrides], env=_env(), capture_output=True,
                          text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [
        json.loads(x) for x in (_run_dir(tmp_path) / "metrics.jsonl").read_text().splitlines() if x.strip()
    ]
    skip = WALL_CLOCK + ADDED_SINCE
    got = [{k: v for k, v in r.items() if not k.startswith(skip)} for r in rows if "reward/mean" in r]
    expected = [json.loads(x) for x in REFERENCE.read_text().splitlines()]
    assert len(got) == len(expected) == 4
    for step, (a, b) in enumerate(zip(got, expected, strict=True)):
        assert a.keys() == b.keys(), f"step {step}: keys differ"
        for key, want in b.items():
            if isinstance(want, float):
                noise = 1e-5 if key.endswith("_diff") else 1e-7
                assert a[key] == pytest.approx(want, rel=1e-5, abs=noise), f"step {step} {key}"
            else:
                assert a[key] == want, f"step {step} {key}"
