"""``execrl train`` with its dataset, run directory and checkpoints on fsspec URLs (``memory://``), resumed
from the URL alone: the resumed run continues at the next step, logs no step twice, and ends with the
same weights as an uninterrupted local run (bit for bit).

In-process (``execrl.cli.main``) because ``memory://`` lives in this process."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import fsspec
import pytest
import safetensors.torch
import torch
from toy_domain import toy_overrides, toy_tasks

from execrl.cli import main
from execrl.tasks import save_tasks


def _weights(fs: fsspec.AbstractFileSystem, path: str) -> dict[str, torch.Tensor]:
    return safetensors.torch.load(fs.cat(path))


@pytest.mark.slow
def test_resume_from_a_url_equals_an_uninterrupted_run(tiny_model_dir: Path, tmp_path: Path) -> None:
    root = f"/execrl-{uuid.uuid4().hex}"
    fs = fsspec.filesystem("memory")
    tasks_url = f"memory://{root}/data/toy.jsonl"
    save_tasks(toy_tasks(16, "train") + toy_tasks(8, "test"), tasks_url)
    base = [
        *toy_overrides(tiny_model_dir, Path(tasks_url), tmp_path / "local"),
        f'tasks.suites={{"{tasks_url}"=1.0}}',
        f'tasks.eval_suites=["{tasks_url}"]',
        "eval.enabled=false",
        "checkpoint.every_steps=1",
    ]
    assert main(["train", "--no-progress", *base, "run.total_steps=2"]) == 0  # uninterrupted, local
    (local_run,) = (tmp_path / "local").iterdir()

    assert (
        main(["train", "--no-progress", *base, f"run.output_dir=memory://{root}/runs", "run.total_steps=1"])
        == 0
    )
    (remote_run,) = fs.ls(f"{root}/runs", detail=False)
    assert fs.exists(f"{remote_run}/checkpoints/step_000000/meta.json")
    assert main(["train", "--no-progress", "--resume", f"memory://{remote_run}", "run.total_steps=2"]) == 0

    rows = [json.loads(line) for line in fs.cat(f"{remote_run}/metrics.jsonl").decode().splitlines() if line]
    assert [r["step"] for r in rows if "reward/mean" in r] == [0, 1]
    resumed = _weights(fs, f"{remote_run}/checkpoints/step_000001/model.safetensors")
    uninterrupted = safetensors.torch.load_file(
        str(local_run / "checkpoints" / "step_000001" / "model.safetensors")
    )
    assert resumed.keys() == uninterrupted.keys()
    assert all(torch.equal(resumed[k], uninterrupted[k]) for k in resumed)
