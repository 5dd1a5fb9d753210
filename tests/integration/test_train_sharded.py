"""``execrl train --nproc 2`` as a user runs it: two FSDP2 ranks on gloo, the toy domain on the tiny model.

* SIGKILL of the launcher (its ranks go with it) after the step-0 checkpoint, then ``--resume --nproc 2``:
  the same run as the uninterrupted one, bit for bit (every shard of the last checkpoint, every logged
  metric but timings), and ``execrl export`` gathers the shards into a Hugging Face directory whose
  self-check passes;
* a rank that stops answering (``trainer.inject_hang_rank``) stops the run within
  ``trainer.collective_timeout_s``, the error line naming the rank; a rank killed with SIGKILL too;
* ``--executor ray --nproc 2``: rank 1 as a Ray actor beside the rollout and sandbox actors;
* ``--nproc`` beyond the machine's cores is refused in one line, before anything starts or is written.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import torch
from test_train_cli import EXECRL, _env, _run_dir, _start, _wait_for_checkpoint
from test_train_resume_exact import _rows
from toy_domain import toy_overrides

from execrl.trainer.sharded_checkpoint import SHARDS_DIRNAME


def _common(tiny_model_dir: Path, toy_tasks_file: Path, out: Path) -> list[str]:
    return [
        *toy_overrides(tiny_model_dir, toy_tasks_file, out),
        "run.total_steps=2", "checkpoint.every_steps=1", "checkpoint.keep_last=2", "eval.enabled=false",
    ]  # fmt: skip


def _full_weights(checkpoint: Path) -> dict[str, torch.Tensor]:
    from torch.distributed.checkpoint import FileSystemReader

    from execrl.trainer.sharded_checkpoint import load_full_model_state

    stored = FileSystemReader(str(checkpoint / SHARDS_DIRNAME)).read_metadata().state_dict_metadata
    names = {k[len("model.policy.") :]: torch.empty(tuple(v.size)) for k, v in stored.items()  # type: ignore[union-attr]
             if k.startswith("model.policy.")}  # fmt: skip
    load_full_model_state(checkpoint, names, complete=True)
    return names


@pytest.mark.slow
def test_sigkill_then_resume_at_two_ranks_is_bit_exact_and_exports(
    tiny_model_dir: Path, toy_tasks_file: Path, tmp_path: Path
) -> None:
    straight_out, killed_out = tmp_path / "straight", tmp_path / "killed"
    straight = subprocess.run(
        [*EXECRL, "train", "--no-progress", "--nproc", "2", *_common(tiny_model_dir, toy_tasks_file, straight_out)],
        env=_env(), capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert straight.returncode == 0, straight.stdout + straight.stderr
    proc = _start(["--nproc", "2", *_common(tiny_model_dir, toy_tasks_file, killed_out)])
    killed_dir = _run_dir(killed_out)
    _wait_for_checkpoint(killed_dir, 0, proc)
    proc.send_signal(signal.SIGKILL)  # the launcher; its ranks notice and exit (launch.exit_with_launcher)
    proc.communicate()
    resumed = subprocess.run(
        [*EXECRL, "train", "--no-progress", "--nproc", "2", "--resume", str(killed_dir)],
        env=_env(), capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    straight_dir = _run_dir(straight_out)
    last = Path("checkpoints") / "step_000001"
    a, b = _full_weights(straight_dir / last), _full_weights(killed_dir / last)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    rows = _rows(straight_dir)
    assert [r["step"] for r in _rows(killed_dir)] == [0, 1]
    assert rows == _rows(killed_dir)
    exported = subprocess.run(
        [*EXECRL, "export", str(straight_dir), str(tmp_path / "hf")], env=_env(), capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert exported.returncode == 0, exported.stdout + exported.stderr
    assert "logits checked" in exported.stdout and (tmp_path / "hf" / "model.safetensors").is_file()


@pytest.mark.slow
def test_a_hung_rank_stops_the_run_naming_it(
    tiny_model_dir: Path, toy_tasks_file: Path, tmp_path: Path
) -> None:
    args = [*_common(tiny_model_dir, toy_tasks_file, tmp_path / "out"), "trainer.inject_hang_rank=1",
            "trainer.collective_timeout_s=8"]  # fmt: skip
    run = subprocess.run(
        [*EXECRL, "train", "--no-progress", "--nproc", "2", *args], env=_env(), capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert run.returncode == 1, run.stdout + run.stderr
    errors = [line for line in run.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "trainer rank 1 did not answer" in errors[0], run.stderr
    assert not list((_run_dir(tmp_path / "out") / "checkpoints").glob("step_*"))  # nothing half-written


def test_more_ranks_than_cores_is_refused_before_anything_starts(tmp_path: Path) -> None:
    run = subprocess.run(
        [*EXECRL, "train", "--nproc", "4096", f"run.output_dir={tmp_path / 'out'}"], env=_env(),
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 2
    assert run.stderr.strip().splitlines() == [
        line for line in run.stderr.strip().splitlines() if line.startswith("error: --nproc 4096 exceeds")
    ]
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_ray_trainer_ranks_train_beside_the_ray_workers(
    tiny_model_dir: Path, toy_tasks_file: Path, tmp_path: Path
) -> None:
    """``--executor ray --nproc 2``: rank 1 is a Ray actor in a placement group, the rollout and sandbox
    workers are actors too; the run completes, both ranks write their shard and RNG state, and the
    rollout workers sample step 1 with the weights gathered after step 0 (version 1)."""
    args = [*_common(tiny_model_dir, toy_tasks_file, tmp_path / "out"), "run.total_steps=2",
            "trainer.rank_num_cpus=0.1", "executor.rollout_num_cpus=0.5", "executor.sandbox_num_cpus=0.5"]  # fmt: skip
    run = subprocess.run(
        [*EXECRL, "train", "--no-progress", "--executor", "ray", "--nproc", "2", *args], env=_env(),
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    run_dir = _run_dir(tmp_path / "out")
    last = run_dir / "checkpoints" / "step_000001"
    assert (last / "rng_rank1.pt").is_file() and len(list((last / SHARDS_DIRNAME).glob("*.distcp"))) == 2
    rows = _rows(run_dir)
    assert [r["executor/weight_version_used_min"] for r in rows] == [0.0, 1.0]


def _rank_pids(rank: int) -> list[int]:
    """Processes of this user whose environment says RANK=<rank> and that run ``execrl train``."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            environ = (proc / "environ").read_bytes().split(b"\0")
            cmdline = (proc / "cmdline").read_bytes()
        except (OSError, ValueError):
            continue
        if f"RANK={rank}".encode() in environ and b"execrl" in cmdline and b"train" in cmdline:
            found.append(int(proc.name))
    return found


@pytest.mark.slow
def test_a_dead_rank_stops_the_run_naming_it(
    tiny_model_dir: Path, toy_tasks_file: Path, tmp_path: Path
) -> None:
    """SIGKILL of rank 1 mid-run: the launcher stops rank 0 (or rank 0's next collective fails) and the
    error names rank 1 and the signal; exit non-zero, no partial checkpoint."""
    args = [*_common(tiny_model_dir, toy_tasks_file, tmp_path / "out"), "run.total_steps=30"]
    proc = _start(["--nproc", "2", *args])
    run_dir = _run_dir(tmp_path / "out")
    deadline = time.monotonic() + 240
    while not (run_dir / "metrics.jsonl").is_file() or not _rows(run_dir):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[0]
        time.sleep(0.2)
    pids = [p for p in _rank_pids(1) if p != proc.pid]
    assert len(pids) == 1, pids
    os.kill(pids[0], signal.SIGKILL)
    out, _ = proc.communicate(timeout=180)
    assert proc.returncode == 1, out
    assert "error: trainer rank 1 died (SIGKILL)" in out, out
    assert not list(run_dir.glob("checkpoints/*.tmp-*"))  # nothing half-written


# float32: the ranks sum in another order (~1e-7 apart); Adam divides each gradient by its own running
# scale, so a near-zero gradient's tiny difference moves its weight by up to ~lr * 1e-3 (8e-6 at the toy
# domain's lr=1e-2): the run below uses lr=1e-3 and holds every weight and metric to 1e-5.
RUN_TOLERANCE = 1e-5


def _one_process_weights(checkpoint: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(checkpoint / "model.safetensors"))


def _train_both(common: list[str], tmp_path: Path) -> tuple[Path, Path]:
    """The run of ``common`` in one process and at 2 ranks; their run directories."""
    dirs = []
    for name, nproc in (("one", []), ("two", ["--nproc", "2"])):
        out = tmp_path / name
        args = [o for o in common if not o.startswith("run.output_dir=")] + [f"run.output_dir={out}"]
        run = subprocess.run(
            [*EXECRL, "train", "--no-progress", *nproc, *args], env=_env(), capture_output=True, text=True,
            timeout=600,
        )  # fmt: skip
        assert run.returncode == 0, run.stdout + run.stderr
        dirs.append(_run_dir(out))
    return dirs[0], dirs[1]


def _same_rows(one: Path, two: Path) -> list[dict[str, float]]:
    """Every logged metric of the two runs (timings aside) within ``RUN_TOLERANCE``, relative above 1."""
    rows_one, rows_two = _rows(one), _rows(two)
    assert [r["step"] for r in rows_one] == [r["step"] for r in rows_two] == [0, 1]
    for a, b in zip(rows_one, rows_two, strict=True):
        assert a.keys() == b.keys()
        bad = {k: (a[k], b[k]) for k in a if abs(a[k] - b[k]) > RUN_TOLERANCE * max(1.0, abs(a[k]))}
        assert not bad, bad
    assert rows_one[1]["loss/entropy"] != rows_one[0]["loss/entropy"]  # not two copies of one row
    return rows_one


@pytest.mark.slow
def test_two_ranks_train_the_run_one_process_trains(
    tiny_model_dir: Path, toy_tasks_file: Path, tmp_path: Path
) -> None:
    """The same run (``build_run``, rank 0 driving the rollout, ``episodes_to_batch``, the sharded update)
    at 2 gloo ranks and in one process: every logged metric (losses, KL, gradient norm, rewards: the
    rollout of step 1 samples the gathered weights) and the final weights agree within 1e-5."""
    common = [*_common(tiny_model_dir, toy_tasks_file, tmp_path), "optim.learning_rate=1e-3"]
    one, two = _train_both(common, tmp_path)
    _same_rows(one, two)
    last = Path("checkpoints") / "step_000001"
    single, sharded = _one_process_weights(one / last), _full_weights(two / last)
    assert single.keys() <= sharded.keys()  # one process writes a tied embedding once (lm_head.weight)
    diff = max(float((single[k] - sharded[k]).abs().max()) for k in single)
    print(f"max abs weight difference, 2 ranks vs one process after 2 steps: {diff:.3g}")
    assert diff < RUN_TOLERANCE, diff
    initial = _one_process_weights(one / "checkpoints" / "step_000000")
    assert max(float((initial[k] - single[k]).abs().max()) for k in single) > 100 * RUN_TOLERANCE


@pytest.mark.slow
def test_two_ranks_run_multi_turn_refine_episodes_with_ppo(
    tiny_model_dir: Path, toy_tasks_file: Path, tmp_path: Path
) -> None:
    """Refine episodes (two turns, feedback between them: prompt | turn | feedback | turn rows) with PPO's
    value head sharded beside the policy: the 2-rank run logs what the one-process run logs, within 1e-5
    (the value loss and the refine counters among them)."""
    common = [
        *_common(tiny_model_dir, toy_tasks_file, tmp_path), "optim.learning_rate=1e-3", "refine.max_turns=2",
        "algorithm.advantage_estimator=gae",
    ]  # fmt: skip
    rows = _same_rows(*_train_both(common, tmp_path))
    assert all("loss/value" in r and "refine/turns_mean" in r for r in rows)
    assert max(r["refine/turns_mean"] for r in rows) > 1.0  # some episodes took a second turn


def test_one_process_resume_of_a_sharded_run_is_refused_in_build_run(
    tiny_model_dir: Path, toy_tasks_file: Path, tmp_path: Path
) -> None:
    """``build_run(config, resume_dir)`` in one process over a run whose checkpoint holds shards: one
    ``CheckpointError`` naming ``--nproc`` (it was "optimizer.pt: missing" before the strategy check)."""
    from execrl.components.run import build_run
    from execrl.config import load_config
    from execrl.trainer.errors import CheckpointError

    run_dir = tmp_path / "run"
    shards = run_dir / "checkpoints" / "step_000000" / SHARDS_DIRNAME
    shards.mkdir(parents=True)
    (shards / ".metadata").write_bytes(b"")
    config = load_config(None, _common(tiny_model_dir, toy_tasks_file, tmp_path / "out"))
    with pytest.raises(CheckpointError, match="trainer.strategy=fsdp.*--nproc N"):
        build_run(config, run_dir)
