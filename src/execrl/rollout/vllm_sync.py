"""Weight sync into the vLLM engine process, verified after every push (issue 37).

One sync (``WeightSync.__call__``, after each update):

1. **Pack** every parameter, cast to the engine's dtype, into a few flat buckets of a shared-memory file
   (``vllm.bucket_mib`` each, 64-byte aligned; 3 buckets for SmolLM2-135M in fp32, 2 in bf16), with a
   checksum per bucket (``vllm_server.checksum``) and a fingerprint per tensor.
2. **Transfer** through vLLM's RL weight-transfer API: ``start_weight_update``, one ``update_weights`` per
   bucket (not one call per tensor: per-parameter RPCs took >120 s in open-instruct#1535), then
   ``finish_weight_update`` (layerwise reload), the tied-head re-pack and the prefix-cache reset (in the
   engine, ``vllm_server.op_finish_update``). With ``vllm.delta`` only the engine layers whose bytes changed
   since the last sync are sent (a layer is loaded whole: a fused ``qkv_proj`` that got only ``q_proj`` would
   be left half-empty by the layerwise reload). With AdamW every tensor moves every step, so full
   fine-tuning sends everything either way; delta pays where parameters are frozen.
3. **Verify**: (c) every bucket arrived with the checksum it was sent with; the engine scores a fixed probe
   of ``PROBE_TOKENS`` tokens twice (every token recomputed, then the next token through the prefix cache,
   as training requests read it) and (a) both match the trainer's log-probs on the new weights within a
   tolerance set by the two sides' precisions (``tolerance``), and (b) the engine's probe moved since the
   previous version whenever any byte sent changed. Any failure raises ``SyncError``: one line naming the
   version, the bucket or check, and the numbers. These catch the failures the peers hit (issue 37): a
   sync that moves nothing (vLLM's NCCL engine off CUDA, vllm#57022: (b), and (a) in fp32), a partial sync
   ((a) or (c)), a stale prefix cache ((a) through the cache) and a stale tied head on CPU ((a)).

LoRA (a policy with adapters): the adapters are written as a PEFT directory and hot-swapped under a fresh
adapter id per version (vLLM serves a re-used id from its cache: the old adapter); the probe then runs with
the new adapter. GPU: the same steps with vLLM's ``nccl`` backend where the engine has a GPU of its own (the
trainer side is vLLM's own ``NCCLTrainerWeightTransferEngine``, imported from the engine environment);
written, not run here (no GPU); on a single GPU ``execrl_shm`` (the engine copies the buckets to the device).

Limits: the checksum is a word sum (it catches missing, short, zeroed or stale buckets, not an adversary);
in bf16 the tolerance (a) is wide (bf16 log-probs differ from fp32 by up to ~0.5 on this model), so there
(b) is what catches a sync that moved nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from execrl.rollout.vllm_server import CHUNK_ALIGN, checksum

if TYPE_CHECKING:
    from execrl.rollout.vllm_engine import VLLMEngine

__all__ = ["PROBE_TEXT", "SyncError", "SyncReport", "Tolerance", "WeightSync", "layer_key", "tolerance"]

PROBE_TOKENS = 256
PROBE_TOP = 20  # next-token log-probs compared through the prefix cache
PROBE_TEXT = (
    "<|im_start|>user\nWrite a Python function `merge_intervals(intervals)` that merges overlapping closed "
    "intervals and returns them sorted.<|im_end|>\n<|im_start|>assistant\n```python\n"
    "def merge_intervals(intervals):\n    result = []\n    for start, end in sorted(intervals):\n"
    "        if result and start <= result[-1][1]:\n            result[-1][1] = max(result[-1][1], end)\n"
    "        else:\n            result.append([start, end])\n    return result\n```\n"
    "It sorts by start, then extends the last interval while the next one overlaps, in O(n log n) time."
)


class SyncError(RuntimeError):
    """A weight sync that did not verify; the message is one line naming what failed."""


@dataclass(frozen=True)
class Tolerance:
    max_abs: float  # any probe log-prob
    mean_abs: float  # over the probe


def tolerance(engine_dtype: str, trainer_dtype: torch.dtype) -> Tolerance:
    """How far the engine's probe log-probs may sit from the trainer's. fp32 on both sides: kernels differ
    (oneDNN vs ATen) by about 1e-4 at most (vllm_cpu.md section 4); with bf16 on either side, up to ~0.5."""
    if engine_dtype == "float32" and trainer_dtype == torch.float32:
        return Tolerance(max_abs=2e-3, mean_abs=2e-4)
    return Tolerance(max_abs=1.5, mean_abs=0.1)


@dataclass(frozen=True)
class SyncReport:
    """One verified sync: what moved, what it cost, what the probe saw."""

    version: int
    bytes: int  # bytes loaded by the engine (the adapter files with LoRA)
    tensors: int
    buckets: int
    skipped_tensors: int  # delta: unchanged layers not sent
    transfer_s: float  # pack, transfer, reload, head re-pack, cache reset
    verify_s: float  # probe on both sides and the checks
    probe_max_abs_diff: float  # engine vs trainer on the new weights
    probe_mean_abs_diff: float
    probe_moved: float  # max |engine probe now - engine probe at the previous version|; nan at the first

    def metrics(self) -> dict[str, float]:
        return {
            "sync/s": self.transfer_s,
            "sync/verify_s": self.verify_s,
            "sync/bytes": float(self.bytes),
            "sync/buckets": float(self.buckets),
            "sync/skipped_tensors": float(self.skipped_tensors),
            "sync/probe_max_abs_diff": self.probe_max_abs_diff,
            "sync/probe_mean_abs_diff": self.probe_mean_abs_diff,
        }


def layer_key(name: str, packed: dict[str, str]) -> str:
    """The engine layer a checkpoint tensor loads into (``packed``: sub-module -> fused module, e.g.
    ``q_proj -> qkv_proj``): ``model.layers.0.self_attn.q_proj.weight -> model.layers.0.self_attn.qkv_proj``."""
    parts = name.split(".")
    if len(parts) < 2:
        return name
    return ".".join([*parts[:-2], packed.get(parts[-2], parts[-2])])


@dataclass(frozen=True)
class _Slot:
    name: str
    offset: int  # in the bucket
    nbytes: int
    shape: tuple[int, ...]


@dataclass(frozen=True)
class _Bucket:
    index: int
    offset: int  # in the file
    nbytes: int
    slots: tuple[_Slot, ...]


def plan_buckets(
    shapes: list[tuple[str, tuple[int, ...]]], element_size: int, bucket_bytes: int
) -> list[_Bucket]:
    """Tensors in order into buckets of about ``bucket_bytes`` (a tensor never splits), each tensor at a
    ``CHUNK_ALIGN`` boundary; a bucket's length is a multiple of the alignment."""
    buckets: list[_Bucket] = []
    slots: list[_Slot] = []
    start = used = 0
    for name, shape in shapes:
        nbytes = element_size * int(torch.Size(shape).numel())
        if slots and used + nbytes > bucket_bytes:
            buckets.append(_Bucket(len(buckets), start, used, tuple(slots)))
            start, used, slots = start + used, 0, []
        slots.append(_Slot(name, used, nbytes, shape))
        used += -(-nbytes // CHUNK_ALIGN) * CHUNK_ALIGN
    if slots:
        buckets.append(_Bucket(len(buckets), start, used, tuple(slots)))
    return buckets


class WeightSync:
    """Pushes and verifies the weights of one engine (``VLLMEngine.sync_weights`` builds it)."""

    def __init__(self, engine: VLLMEngine) -> None:
        self.engine = engine
        self.wire = getattr(torch, engine.settings.dtype)
        inverse = {
            sub: fused for fused, subs in engine.info["packed_modules_mapping"].items() for sub in subs
        }
        self.packed = inverse
        self.buckets: list[_Bucket] = []
        self.buffer: torch.Tensor | None = None
        self.path = engine.workdir / "weights.bin"
        self.fingerprints: dict[str, int] = {}
        self.previous_probe: list[float] | None = None
        self.probe_ids: list[int] = engine.tokenizer.encode(PROBE_TEXT, add_special_tokens=False)[
            :PROBE_TOKENS
        ]
        self.drop_tensors: set[str] = set()  # test hook: names left out of the next sync (a partial sync)
        self.corrupt_bucket: int | None = None  # test hook: bucket whose bytes change after the checksum
        self.nccl: Any = None  # vLLM's trainer-side NCCL engine (transfer_backend nccl, CUDA)
        if engine.info["transfer_backend"] != "nccl":
            engine.call("init_transfer", init_info={})

    def __call__(self, model: torch.nn.Module, version: int) -> SyncReport:
        """Push, then verify. The engine's reload and its probe are queued at once and run in the engine
        while this process computes the trainer's side of the probe (the two overlap)."""
        started = time.perf_counter()
        settle: Callable[[], None] = lambda: None  # noqa: E731
        if _has_adapters(model):
            moved, sizes = self._push_adapters(model, version)
            counts = (sizes, 0, 0, 0)
        else:
            moved, counts, settle = self._push_full(model, version)
        probe = self.engine.send("probe", tokens=self.probe_ids, top=PROBE_TOP, lora=self.engine.lora)
        trainer = self._trainer_probe(model)  # while the engine reloads
        settle()  # the engine's receipts: every bucket, its checksum, its tensor count
        transfer_s = time.perf_counter() - started
        diffs = self._verify(model, version, moved, probe.result(), trainer)
        return SyncReport(
            version=version, bytes=counts[0], tensors=counts[1], buckets=counts[2], skipped_tensors=counts[3],
            transfer_s=transfer_s, verify_s=time.perf_counter() - started - transfer_s,
            probe_max_abs_diff=diffs[0], probe_mean_abs_diff=diffs[1], probe_moved=diffs[2],
        )  # fmt: skip

    # -- full weights ----------------------------------------------------------------------------------
    def _stage(self, params: Sequence[tuple[str, torch.Tensor]]) -> tuple[torch.Tensor, dict[str, int]]:
        """Cast and copy every tensor into its slot; each slot's checksum is taken right after its copy
        (while it is in cache). The bytes between slots stay zero, so a bucket's checksum is its slots' sum."""
        shapes = [(name, tuple(p.shape)) for name, p in params]
        if not self.buckets or [s.name for b in self.buckets for s in b.slots] != [n for n, _ in shapes]:
            size = self.engine.settings.bucket_mib << 20
            self.buckets = plan_buckets(shapes, self.wire.itemsize, size)
            total = self.buckets[-1].offset + self.buckets[-1].nbytes
            self.path.write_bytes(b"")
            self.buffer = torch.from_file(str(self.path), shared=True, size=total, dtype=torch.uint8)
        assert self.buffer is not None
        tensors, prints = dict(params), {}
        with torch.no_grad():
            for bucket in self.buckets:
                for slot in bucket.slots:
                    start = bucket.offset + slot.offset
                    view = self.buffer[start : start + slot.nbytes].view(self.wire)
                    view.copy_(tensors[slot.name].detach().reshape(-1))
                    prints[slot.name] = checksum(self.buffer[start : start + _padded(slot.nbytes)])
        return self.buffer, prints

    def _push_full(
        self, model: torch.nn.Module, version: int
    ) -> tuple[bool, tuple[int, int, int, int], Callable[[], None]]:
        """Stage and send every bucket (queued in the engine, not awaited); the callable waits for the
        engine's receipts and checks them."""
        if self.engine.info["transfer_backend"] == "nccl":
            moved, counts = self._push_nccl(model)
            return moved, counts, lambda: None
        params = [(name, p) for name, p in model.named_parameters() if name not in self.drop_tensors]
        buffer, prints = self._stage(params)
        changed_layers = {
            layer_key(n, self.packed) for n, v in prints.items() if self.fingerprints.get(n) != v
        }
        moved = any(self.fingerprints.get(n) != v for n, v in prints.items()) or not self.fingerprints
        send_all = not self.engine.settings.delta or not self.fingerprints
        infos, sent = [], {}
        for bucket in self.buckets:
            slots = [s for s in bucket.slots if send_all or layer_key(s.name, self.packed) in changed_layers]
            if not slots:
                continue
            sent[bucket.index] = (sum(prints[s.name] for s in bucket.slots), len(slots), slots)
            infos.append(self._update_info(bucket, slots, sent[bucket.index][0]))
        if self.corrupt_bucket is not None and self.corrupt_bucket in sent:  # test hook: changed in transit
            bucket = self.buckets[self.corrupt_bucket]
            buffer[bucket.offset : bucket.offset + 64].bitwise_not_()
        futures = [self.engine.send("start_update")]
        futures += [self.engine.send("update", update_info=info) for info in infos]
        finish = self.engine.send("finish_update")

        def settle() -> None:
            try:
                for future in futures:
                    future.result()
                receipts = finish.result()
            except RuntimeError as exc:  # the engine refused an update: the run must not go on
                raise SyncError(f"sync v{version}: {exc}") from None
            self._check_buckets(version, sent, receipts)
            self.fingerprints = prints

        loaded = [s for _, _, slots in sent.values() for s in slots]
        counts = (sum(s.nbytes for s in loaded), len(loaded), len(sent), len(prints) - len(loaded))
        return moved, counts, settle

    def _update_info(self, bucket: _Bucket, slots: list[_Slot], digest: int) -> dict[str, Any]:
        dtype = str(self.wire).removeprefix("torch.")
        return {
            "path": str(self.path), "bucket": bucket.index, "offset": bucket.offset, "nbytes": bucket.nbytes,
            "checksum": digest, "tensors": [(s.name, dtype, list(s.shape), s.offset) for s in slots],
        }  # fmt: skip

    def _check_buckets(self, version: int, sent: dict[int, Any], received: list[dict[str, Any]]) -> None:
        """(c): every bucket sent arrived once, with its checksum and its tensor count."""
        got = {r["bucket"]: r for r in received}
        for index, (digest, count, slots) in sent.items():
            where = f"sync v{version}: bucket {index} ({slots[0].name} .. {slots[-1].name})"
            if index not in got:
                raise SyncError(f"{where} never reached the engine")
            if got[index]["checksum"] != digest:
                raise SyncError(
                    f"{where}: checksum of the bytes received {got[index]['checksum']} != sent {digest}"
                )
            if got[index]["tensors"] != count:
                raise SyncError(
                    f"{where}: the engine loaded {got[index]['tensors']} tensors, {count} were sent"
                )

    def _push_nccl(self, model: torch.nn.Module) -> tuple[bool, tuple[int, int, int, int]]:
        """GPU: vLLM's own NCCL backend (packed broadcast into the engine's buffers, then the same layerwise
        reload, head step and cache reset); checks (a) and (b) run as on CPU, (c) does not (vLLM receives).
        Written against vLLM 0.32's API and not run here: no GPU (``scripts/gpu_check.sh`` runs it)."""
        if self.nccl is None:
            self.nccl = nccl_sender(self.engine, model, self.wire)
        self.nccl.send_weights()
        params = list(model.parameters())
        return True, (sum(p.numel() * self.wire.itemsize for p in params), len(params), 1, 0)

    # -- LoRA ------------------------------------------------------------------------------------------
    def _push_adapters(self, model: torch.nn.Module, version: int) -> tuple[bool, int]:
        """The adapters as a PEFT directory under a fresh id (``version + 1``); the old one is dropped."""
        writer = self.engine.adapter_writer
        if writer is None:
            raise SyncError(
                "a model with LoRA adapters needs VLLMEngine.adapter_writer (components.setup sets it)"
            )
        path = self.engine.workdir / f"lora-v{version}"
        writer(model, path)
        size = sum(f.stat().st_size for f in Path(path).iterdir())
        old = self.engine.lora
        lora = (f"execrl-v{version}", version + 1, str(path))
        self.engine.call(
            "load_lora", name=lora[0], lora_id=lora[1], path=lora[2], drop=[old[1]] if old else []
        )
        self.engine.lora = lora
        return True, size

    # -- verification ----------------------------------------------------------------------------------
    def _trainer_probe(self, model: torch.nn.Module) -> tuple[torch.Tensor, torch.Tensor]:
        ids = torch.tensor([self.probe_ids], dtype=torch.long)  # [1, L]
        with torch.no_grad():
            logits = model(input_ids=ids).logits[0].float()  # [L, V]
        logp = torch.log_softmax(logits, dim=-1)  # [L, V]
        return logp[:-1].gather(1, ids[0, 1:, None])[:, 0], logp[-1]  # [L-1], [V]

    def _verify(
        self,
        model: torch.nn.Module,
        version: int,
        moved: bool,
        result: dict[str, Any],
        trainer: tuple[torch.Tensor, torch.Tensor],
    ) -> tuple[float, float, float]:
        engine = self.engine
        tokens, last = trainer
        fresh = (torch.tensor(result["tokens"]) - tokens).abs()  # [L-1]
        ids = torch.tensor(list(result["next"]), dtype=torch.long)
        cached = (torch.tensor(list(result["next"].values())) - last[ids]).abs()  # [TOP]
        tol = self.tolerance(model)
        where = f"sync v{version} ({engine.settings.dtype} engine)"
        now, moved_by = list(result["tokens"]), float("nan")
        if self.previous_probe is not None and len(self.previous_probe) == len(now):  # (b)
            moved_by = max(abs(a - b) for a, b in zip(now, self.previous_probe, strict=True))
            if moved and moved_by == 0.0:
                raise SyncError(
                    f"{where}: the engine's probe log-probs did not move although the weights sent changed: "
                    "the sync moved nothing"
                )
        if float(fresh.max()) > tol.max_abs or float(fresh.mean()) > tol.mean_abs:
            raise SyncError(
                f"{where}: the engine's probe log-probs differ from the trainer's by {float(fresh.max()):.3g} "
                f"(mean {float(fresh.mean()):.3g}, at probe token {int(fresh.argmax()) + 1}), beyond "
                f"{tol.max_abs:g} / {tol.mean_abs:g}: stale or partial weights"
            )
        if float(cached.max()) > tol.max_abs or float(cached.mean()) > max(
            tol.mean_abs, 10 * float(fresh.mean())
        ):
            raise SyncError(
                f"{where}: through the prefix cache the next-token log-probs differ from the trainer's by "
                f"{float(cached.max()):.3g} (recomputed: {float(fresh.max()):.3g}): a stale prefix cache"
            )
        self.previous_probe = now
        return max(float(fresh.max()), float(cached.max())), float(fresh.mean()), moved_by

    def tolerance(self, model: torch.nn.Module) -> Tolerance:
        settings = self.engine.settings
        trainer_dtype = next(model.parameters()).dtype
        if settings.verify_max_abs > 0:
            return Tolerance(max_abs=settings.verify_max_abs, mean_abs=settings.verify_max_abs)
        return tolerance(settings.dtype, trainer_dtype)


def nccl_sender(engine: VLLMEngine, model: torch.nn.Module, wire: torch.dtype) -> Any:
    """vLLM's ``NCCLTrainerWeightTransferEngine`` over ``model``, its control plane our connection. vLLM is
    not importable in execrl's venv, so its package is appended to ``sys.path`` from the engine's venv
    (after execrl's own packages, which keep precedence) for the trainer-side NCCL code only."""
    import socket
    import subprocess
    import sys

    purelib = subprocess.run(
        [str(engine.python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    if purelib not in sys.path:
        sys.path.append(purelib)
    from vllm.distributed.weight_transfer.base import ParamMeta, WeightSource
    from vllm.distributed.weight_transfer.nccl_engine import (
        NCCLTrainerInitInfo,
        NCCLTrainerWeightTransferEngine,
    )

    class Source(WeightSource):  # type: ignore[misc]
        def metadata(self) -> list[Any]:
            return [ParamMeta(n, wire, tuple(p.shape)) for n, p in model.named_parameters()]

        def __iter__(self) -> Any:
            for name, param in model.named_parameters():
                yield name, param.detach().to("cuda", wire).contiguous()

    class Client:
        def init_weight_transfer_engine(self, init_info: dict[str, Any]) -> None:
            engine.call("init_transfer", init_info=init_info)

        def start_weight_update(self) -> None:
            engine.call("start_update")

        def update_weights(self, update_info: Any) -> None:
            engine.call("update", update_info=update_info)

        def finish_weight_update(self, weight_version: str | None = None) -> None:
            engine.call("finish_update")

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    info = NCCLTrainerInitInfo(master_address="127.0.0.1", master_port=port, world_size=2, rank=0)
    return NCCLTrainerWeightTransferEngine.trainer_init(info, client=Client(), source=Source())


def _padded(nbytes: int) -> int:
    return -(-nbytes // 4) * 4


def _has_adapters(model: torch.nn.Module) -> bool:
    """LoRA layers injected by peft (``execrl.trainer.lora``; checked here by name, rollout sits below it)."""
    return any(name.endswith("lora_A") for name, _ in model.named_modules())
