"""The sharded-trainer parity of ``test_sharded.py`` on GPUs: FSDP2 over NCCL (one rank per GPU, at most
two) against ``policy_update`` in one process on the first GPU, GRPO, PPO and LoRA, three updates each.
Run by ``scripts/gpu_check_fsdp.sh`` (section fsdp); skipped where no CUDA device is visible. The tolerance is
the CPU test's 1e-6 (float32; PyTorch keeps TF32 off for float32 matrix products by default)."""

from __future__ import annotations

import math

import pytest
import torch
from sharded_cases import CASES, Trace, run_sharded, run_single, spawn_ranks

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not torch.cuda.is_available(), reason="needs a CUDA device (scripts/gpu_check_fsdp.sh)"
    ),
]
TOLERANCE = 1e-6


@pytest.fixture(scope="module")
def nccl_ranks(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, dict[str, object]]:
    world = min(2, torch.cuda.device_count())
    result = spawn_ranks(run_sharded, world, tmp_path_factory.mktemp("nccl"), list(CASES), None, gpus=True)[0]
    assert isinstance(result, dict)
    return world, result


@pytest.mark.parametrize("case", list(CASES))
def test_nccl_ranks_equal_one_gpu_process(nccl_ranks: tuple[int, dict[str, object]], case: str) -> None:
    world, results = nccl_ranks
    single, sharded = run_single(case, "cuda:0"), results[case]
    assert isinstance(sharded, Trace)
    for ours, theirs in zip(sharded.metrics, single.metrics, strict=True):
        keys = {k for k in theirs if not k.startswith("perf/")}
        bad = {k: (ours[k], theirs[k]) for k in keys
               if not math.isclose(ours[k], theirs[k], rel_tol=TOLERANCE, abs_tol=TOLERANCE)}  # fmt: skip
        assert not bad, (world, bad)
    for ours_g, theirs_g in zip(sharded.grads, single.grads, strict=True):
        assert (
            max(float((ours_g[k].double() - theirs_g[k].double()).abs().max()) for k in theirs_g) < TOLERANCE
        )
    assert (
        max(float((sharded.params[k].double() - v.double()).abs().max()) for k, v in single.params.items())
        < TOLERANCE
    )
    print(f"fsdp parity on {world} GPU rank(s) over NCCL, {case}: ok")
