"""``[vllm]``: the vLLM rollout engine's settings (``rollout.engine = "vllm"``, ``docs/engines.md``), built
by name into ``execrl.rollout.vllm_engine.VLLMSettings``. Used only with that engine; the run config refuses
them otherwise."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from execrl.config.base import Section


class VLLMSection(Section):
    """The engine process (its own venv, ``scripts/setup.sh --vllm``), its weight sync and the sync's check."""

    dtype: Literal["float32", "bfloat16"] = Field(
        "bfloat16",
        description="the engine's weights and compute: bfloat16 (1.9x float32 on an AVX-512 BF16 CPU; its "
        "log-probs differ from the fp32 trainer's by up to ~0.5, corrected by truncated importance sampling) "
        "or float32 (agrees with the trainer to ~1e-4)",
    )
    kv_cache_gib: int = Field(1, ge=1, description="CPU: GiB of KV cache (VLLM_CPU_KVCACHE_SPACE)")
    max_model_len: int = Field(0, ge=0, description="the engine's context; 0 = the model's own")
    max_num_seqs: int = Field(64, ge=1, description="sequences the engine decodes at once")
    gpu_memory_utilization: float = Field(
        0.2, gt=0, le=1, description="share of the device's memory vLLM plans for (on CPU: of host RAM)"
    )
    eager: bool = Field(
        True, description="no torch.compile (an Inductor compile costs about 2 minutes per start on 2 cores)"
    )
    threads: int = Field(2, ge=1, description="OpenMP threads of the engine process")
    bind_threads: bool = Field(
        False,
        description="pin the engine's threads to cores 0..threads-1 (vLLM's default; on a shared host a "
        "pinned thread waits for its busy core and every parallel region waits for it)",
    )
    transfer_backend: str = Field(
        "auto",
        description="weight transfer: auto (vLLM's nccl where >= 2 GPUs are visible, the engine on the last: "
        "NCCL refuses two ranks on one GPU; execrl_shm, shared memory, otherwise: CPU, or one GPU) | "
        "execrl_shm | nccl",
    )
    delta: bool = Field(
        False, description="send only the engine layers whose bytes changed since the last sync"
    )
    bucket_mib: int = Field(256, ge=1, description="size of each flat weight bucket of a sync")
    verify_max_abs: float = Field(
        0.0,
        ge=0,
        description="the largest engine-vs-trainer probe log-prob difference a sync may show; 0 = set by "
        "the two sides' precisions (2e-3 for fp32 with fp32, 1.5 with bf16 on either side)",
    )
    python: str = Field(
        "", description="the engine environment's python; empty = .venv-vllm at the repository root"
    )
