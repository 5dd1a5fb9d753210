"""The vLLM engine process: run by the engine's own Python (``.venv-vllm/bin/python vllm_server.py``), never
imported with vLLM by execrl (the engine's venv has transformers 5.19 and execrl's code needs 5.24), so it
imports only the standard library and torch at module level and vLLM inside ``main``. The pure helpers at
the top (``checksum``, ``CHUNK_ALIGN``) are shared with execrl's side (``vllm_sync.py``), which imports
them from here, so both sides compute the same checksum by construction.

Protocol (``multiprocessing.connection`` over a Unix socket made by the adapter, pickled builtins only,
so the two venvs' torch/numpy versions never meet): the adapter sends ``(kind, id, payload)``; the server
answers ``("ok", id, result)`` or ``("error", id, one line)``.

- ``generate``: one call's prompts (one vLLM request each, ``n`` samples per prompt). With ``seed`` set
  the call waits until the engine is idle, reseeds torch's generator and only then adds its requests (a
  call run alone is reproducible from its seed; see ``vllm_engine.py``). Without it the requests join the
  running batch at once (continuous batching of concurrent ``submit`` calls).
- every other kind is a control operation: it waits until no request is in flight (vLLM's
  ``pause(mode="wait")``), runs, and only then are later messages taken (a barrier, in order).

Weight sync runs vLLM's RL weight-transfer API in-process (``init_weight_transfer_engine`` /
``start_weight_update`` / ``update_weights`` / ``finish_weight_update`` through ``collective_rpc``). vLLM
ships only CUDA transports and its NCCL one silently does nothing off CUDA (vllm#57022), so this file
registers ``execrl_shm`` with ``WeightTransferEngineFactory``: the trainer writes a few flat buckets into a
shared-memory file, each update names one bucket, and the engine checksums the bytes it read before loading
them through the layerwise reload. Two CPU workarounds follow ``finish_weight_update``: the tied ``lm_head``
is re-packed (vLLM's CPU backend keeps the old packed copy after a reload: 0.12 off in log-probs), and the
prefix cache is reset (cached keys/values of the old weights: up to 2.0 off). Measured in
``shared/research/vllm_cpu.md``.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections import deque
from typing import Any

import torch

CHUNK_ALIGN = 64  # bytes: every tensor starts, and every bucket ends, on this boundary
FAULTS: set[str] = set()  # test hooks (the ``fault`` operation)
RECEIVED: list[dict[str, Any]] = []  # execrl_shm: per bucket of the current update, what the receiver read


def checksum(data: torch.Tensor) -> int:
    """Sum of the bytes' 32-bit words (as int64: no overflow below 2**32 words, 16 GiB): a transport
    check (a missing, short, zeroed or stale bucket), not a cryptographic hash. ``data`` is uint8, its
    length a multiple of 4."""
    return int(data.view(torch.int32).sum(dtype=torch.int64))


def one_line(exc: BaseException) -> str:
    """``Type: message`` on one line (a pydantic error's lines joined), at most 600 characters."""
    text = " | ".join(line.strip() for line in str(exc).splitlines() if line.strip())
    return f"{type(exc).__name__}: {text}"[:600]


def _engine_args(spec: dict[str, Any]) -> Any:
    from vllm.config.weight_transfer import WeightTransferConfig
    from vllm.engine.arg_utils import EngineArgs

    lora = spec.get("max_lora_rank", 0)
    return EngineArgs(
        model=spec["model"], tokenizer=spec["model"], dtype=spec["dtype"], seed=spec["seed"],
        max_model_len=spec["max_model_len"] or None, enable_prefix_caching=True, enforce_eager=spec["eager"],
        gpu_memory_utilization=spec["gpu_memory_utilization"], max_num_seqs=spec["max_num_seqs"],
        logprobs_mode="processed_logprobs",  # what each token was sampled from (the module docstring)
        weight_transfer_config=WeightTransferConfig(backend=spec["transfer_backend"]),
        enable_lora=lora > 0, max_lora_rank=max(lora, 8), max_loras=2,
    )  # fmt: skip


def _register_shm_backend() -> None:
    """``execrl_shm``: vLLM's ``WeightTransferEngine`` lifecycle over buckets in a shared-memory file."""
    from vllm.distributed.weight_transfer.base import WeightTransferEngine
    from vllm.distributed.weight_transfer.factory import WeightTransferEngineFactory
    from vllm.model_executor.model_loader.reload import (
        finalize_layerwise_reload,
        initialize_layerwise_reload,
    )

    class ShmWeightTransferEngine(WeightTransferEngine):  # type: ignore[misc]
        init_info_cls = dict
        update_info_cls = dict

        def parse_init_info(self, init_dict: dict[str, Any]) -> Any:
            return dict(init_dict)

        def parse_update_info(self, update_dict: dict[str, Any]) -> Any:
            return dict(update_dict)

        def init_transfer_engine(self, init_info: Any) -> None:
            return None  # the shared-memory file is named by each update

        def start_weight_update(self) -> None:
            RECEIVED.clear()
            initialize_layerwise_reload(self.model)

        def update_weights(self, update_info: dict[str, Any]) -> None:  # no accelerator sync on CPU
            self.receive_weights(update_info)

        def receive_weights(self, info: Any) -> None:
            size = os.path.getsize(info["path"])
            buffer = torch.from_file(info["path"], shared=True, size=size, dtype=torch.uint8)
            start, nbytes = info["offset"], info["nbytes"]
            data = buffer[start : start + nbytes]
            got = checksum(data)
            weights = []
            for name, dtype, shape, offset in info["tensors"]:
                width = torch.empty((), dtype=getattr(torch, dtype)).element_size()
                count = 1
                for dim in shape:
                    count *= dim
                flat = data[offset : offset + count * width].view(getattr(torch, dtype))
                weights.append((name, flat.view(shape)))
            if "no_load" not in FAULTS:  # the fault: vLLM's NCCL engine off CUDA (vllm#57022)
                self.model.load_weights(weights)
            RECEIVED.append({"bucket": info["bucket"], "checksum": got, "tensors": len(weights)})

        def finish_weight_update(self) -> None:
            finalize_layerwise_reload(self.model, self.model_config)

        def shutdown(self) -> None:
            return None

    WeightTransferEngineFactory.register_engine("execrl_shm", ShmWeightTransferEngine)


def refresh_tied_head(model: Any) -> None:
    """Re-pack a tied ``lm_head`` for the CPU GEMM: the reload writes the shared embedding but never
    re-runs the head's packing, which keeps the old weights (vLLM 0.32 CPU; a no-op elsewhere)."""
    from vllm.platforms import current_platform

    head = getattr(model, "lm_head", None)
    tied = getattr(getattr(model, "config", None), "tie_word_embeddings", False)
    if head is None or not tied or not current_platform.is_cpu() or not hasattr(head, "cpu_linear"):
        return
    from vllm.model_executor.layers.utils import dispatch_cpu_unquantized_gemm

    dispatch_cpu_unquantized_gemm(head, remove_weight=False)


class Server:
    """The engine loop: requests join the running batch; control operations run when it is empty."""

    def __init__(self, conn: Any, spec: dict[str, Any]) -> None:
        from vllm.engine.arg_utils import EngineArgs  # noqa: F401  (fail early, before the socket work)
        from vllm.v1.engine.llm_engine import LLMEngine

        if spec["transfer_backend"] == "execrl_shm":
            _register_shm_backend()
        self.conn = conn
        self.engine = LLMEngine.from_engine_args(_engine_args(spec))
        self.model_runner = self.engine.model_executor.driver_worker.worker.model_runner
        self.inbox: deque[tuple[str, int, Any]] = deque()
        self.arrived = threading.Condition()
        self.calls: dict[str, tuple[int, int, int, float]] = {}  # vLLM request id -> (call, prompt, of, t0)
        self.results: dict[int, list[Any]] = {}
        self.loras: dict[int, Any] = {}
        self.timings = {"step_s": 0.0, "model_s": 0.0, "steps": 0.0}
        self._time_model_calls()
        threading.Thread(target=self._read, daemon=True).start()

    def _time_model_calls(self) -> None:
        """Count the seconds spent in the model (forward and sampling) apart from the engine's own work
        (scheduling, detokenizing, outputs): ``op_timings``, the profile of ``execrl bench engines``."""
        runner, timings = self.model_runner, self.timings
        for name in ("execute_model", "sample_tokens"):
            original = getattr(runner, name, None)
            if original is None:
                continue

            def timed(*args: Any, _original: Any = original, **kwargs: Any) -> Any:
                start = time.perf_counter()
                try:
                    return _original(*args, **kwargs)
                finally:
                    timings["model_s"] += time.perf_counter() - start

            setattr(runner, name, timed)

    def _read(self) -> None:
        while True:
            try:
                message = self.conn.recv()
            except (EOFError, OSError):
                message = ("shutdown", -1, None)
            with self.arrived:
                self.inbox.append(message)
                self.arrived.notify()
            if message[0] == "shutdown":
                return

    def serve(self) -> None:
        while True:
            busy = self.engine.has_unfinished_requests()
            with self.arrived:
                if not busy and not self.inbox:
                    self.arrived.wait()
                while self.inbox and (not busy or self._joins_batch(self.inbox[0])):
                    kind, ident, payload = self.inbox.popleft()
                    if kind == "shutdown":
                        return
                    self._dispatch(kind, ident, payload)
                    busy = self.engine.has_unfinished_requests()
            if self.engine.has_unfinished_requests():
                self._step()

    @staticmethod
    def _joins_batch(message: tuple[str, int, Any]) -> bool:
        return message[0] == "generate" and message[2].get("seed") is None

    def _dispatch(self, kind: str, ident: int, payload: Any) -> None:
        try:
            if kind == "generate":
                self._add_call(ident, payload)
                return
            result = getattr(self, f"op_{kind}")(**payload)
        except Exception as exc:  # noqa: BLE001  (any failure is sent back as one line, the loop goes on)
            self.conn.send(("error", ident, one_line(exc)))
            return
        self.conn.send(("ok", ident, result))

    def _add_call(self, ident: int, payload: dict[str, Any]) -> None:
        from vllm import SamplingParams
        from vllm.lora.request import LoRARequest
        from vllm.sampling_params import RequestOutputKind

        if payload.get("seed") is not None:
            torch.manual_seed(payload["seed"])
        lora = payload.get("lora")
        request = LoRARequest(lora[0], lora[1], lora[2]) if lora else None
        prompts = payload["prompts"]
        self.results[ident] = [None] * len(prompts)
        for index, prompt in enumerate(prompts):
            params = SamplingParams(**payload["params"], output_kind=RequestOutputKind.FINAL_ONLY)
            rid = f"{ident}-{index}"
            self.calls[rid] = (ident, index, len(prompts), time.perf_counter())
            self.engine.add_request(rid, {"prompt_token_ids": prompt}, params, lora_request=request)

    def _step(self) -> None:
        start = time.perf_counter()
        outputs = self.engine.step()
        self.timings["step_s"] += time.perf_counter() - start
        self.timings["steps"] += 1
        for output in outputs:
            if not output.finished:
                continue
            ident, index, _, t0 = self.calls.pop(output.request_id)
            samples = [
                (
                    list(c.token_ids),
                    [entry[t].logprob for t, entry in zip(c.token_ids, c.logprobs or [], strict=False)],
                    c.finish_reason,
                    c.text,
                )
                for c in sorted(output.outputs, key=lambda c: c.index)
            ]
            self.results[ident][index] = (samples, output.num_cached_tokens or 0, time.perf_counter() - t0)
            if all(r is not None for r in self.results[ident]):
                self.conn.send(("ok", ident, self.results.pop(ident)))

    # Control operations: each runs with no request in flight.
    def op_info(self) -> dict[str, Any]:
        model = self.model_runner.get_model()
        mapping = getattr(model, "packed_modules_mapping", {}) or {}
        return {
            "packed_modules_mapping": {k: list(v) for k, v in mapping.items()},
            "pid": os.getpid(),
            "max_model_len": int(self.engine.model_config.max_model_len),
        }

    def op_timings(self) -> dict[str, float]:
        """Seconds in ``engine.step`` and, of those, in the model since the last call (then reset)."""
        out = dict(self.timings)
        self.timings.update(step_s=0.0, model_s=0.0, steps=0.0)
        return out

    def op_fault(self, names: list[str]) -> None:
        """Test hooks that reproduce the stale-state bugs: ``no_load`` (a sync that moves nothing),
        ``no_head_refresh`` (the stale tied head), ``no_cache_reset`` (the stale prefix cache)."""
        FAULTS.clear()
        FAULTS.update(names)

    def op_init_transfer(self, init_info: dict[str, Any]) -> None:
        self.engine.collective_rpc("init_weight_transfer_engine", kwargs={"init_info": init_info})

    def op_start_update(self) -> None:
        self.engine.collective_rpc("start_weight_update")

    def op_update(self, update_info: dict[str, Any]) -> None:
        self.engine.collective_rpc("update_weights", kwargs={"update_info": update_info})

    def op_finish_update(self) -> list[dict[str, Any]]:
        """Finish the update, re-pack the tied head, drop the old weights' cached keys/values; returns
        what each bucket's receiver read (``execrl_shm``; empty for other backends)."""
        self.engine.collective_rpc("finish_weight_update")
        if "no_head_refresh" not in FAULTS:
            refresh_tied_head(self.model_runner.get_model())
        if "no_cache_reset" not in FAULTS:
            self.engine.reset_prefix_cache()
        return list(RECEIVED)

    def op_load_lora(self, name: str, lora_id: int, path: str, drop: list[int]) -> None:
        """A new adapter version under a fresh id (a re-used id serves the cached old adapter)."""
        from vllm.lora.request import LoRARequest

        for old in drop:
            self.engine.remove_lora(old)
        self.engine.add_lora(LoRARequest(name, lora_id, path))
        if "no_cache_reset" not in FAULTS:
            self.engine.reset_prefix_cache()

    def op_reset_prefix_cache(self) -> bool:
        return bool(self.engine.reset_prefix_cache())

    def op_probe(self, tokens: list[int], top: int, lora: Any = None) -> dict[str, Any]:
        """Score ``tokens``: the next-token top-``top`` log-probs through the prefix cache (a plain request,
        as training's are), then every token's log-prob recomputed (``prompt_logprobs`` skips the cache)."""
        from vllm import SamplingParams
        from vllm.lora.request import LoRARequest
        from vllm.sampling_params import RequestOutputKind

        request = LoRARequest(*lora) if lora else None
        final = RequestOutputKind.FINAL_ONLY
        cached = SamplingParams(max_tokens=1, temperature=1.0, logprobs=top, output_kind=final)
        fresh = SamplingParams(max_tokens=1, temperature=1.0, prompt_logprobs=0, output_kind=final)
        out = {}
        for rid, params in (("probe-cached", cached), ("probe-fresh", fresh)):
            self.engine.add_request(rid, {"prompt_token_ids": tokens}, params, lora_request=request)
            while self.engine.has_unfinished_requests():
                for output in self.engine.step():
                    if output.finished:
                        out[output.request_id] = output
        next_top = out["probe-cached"].outputs[0].logprobs[0]
        prompt = out["probe-fresh"].prompt_logprobs
        return {
            "next": {int(t): float(lp.logprob) for t, lp in next_top.items()},
            "tokens": [float(entry[t].logprob) for t, entry in zip(tokens[1:], prompt[1:], strict=True)],
            "cached_tokens": int(out["probe-cached"].num_cached_tokens or 0),
        }


def main() -> int:
    """``vllm_server.py ADDRESS``: the engine spec comes as the first message (authkey in the environment)."""
    from multiprocessing.connection import Client

    conn = Client(sys.argv[1], family="AF_UNIX", authkey=bytes.fromhex(os.environ.pop("EXECRL_VLLM_AUTHKEY")))
    spec = conn.recv()
    try:
        server = Server(conn, spec)
    except Exception as exc:  # noqa: BLE001  (start-up failures go back as one line; the trace to the log)
        import traceback

        traceback.print_exc()
        conn.send(("error", 0, one_line(exc)))
        return 1
    conn.send(("ok", 0, server.op_info()))
    server.serve()
    conn.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
