"""`execrl bench engines`: the vLLM engine (``rollout.engine=vllm``) vs execrl's ``hf`` engine vs
``transformers``' ``model.generate``, and the cost of its verified weight sync (issue 37).

Each side runs in a process of its own (this command re-runs itself with ``--side``), one after another,
on the same prompts: the training suites' prompts with the chat template (``bench rollout``'s), every
completion exactly ``max_new_tokens`` long (``ignore_eos`` / ``min_new_tokens``), so each side generates
the same number of tokens. Two shapes: ``bench`` (8 prompts x 8 samples x 128 new tokens, temperature 1)
and ``main`` (the main job's step: 4 x 8 x 96, temperature 0.7). Both engines run in float32 and in
bfloat16 (vLLM's bf16 uses oneDNN's AVX-512 BF16 kernels where the CPU has them); ``generate`` in float32,
the way the trainer holds the model. vLLM's prefix cache is reset before each timed run, so prompts are
shared only within a group, as in the other engines.

Sync (the vLLM sides): SmolLM2-135M in fp32 as the trainer holds it, every weight nudged (a stand-in for
an update), pushed and verified three times; the median ``transfer_s`` (pack, bucketed transfer, reload,
head re-pack, cache reset) and ``verify_s`` (probe on both sides, checks) are kept. The engine-vs-HF
log-prob mismatch is measured on the bench batch at temperature 1 (8,192 tokens, teacher-forced fp32).

Profile: vLLM's seconds inside ``engine.step`` and, of those, in the model (forward + sampling), the rest
of the call being IPC and result assembly; the ``hf`` engine's prefill and decode seconds (its stats);
``generate`` only its total.

Top-level keys: ``ratio_vllm_vs_generate`` (vLLM bf16 vs ``generate`` fp32, bench shape),
``ratio_vllm_vs_hf_engine`` (vLLM bf16 vs the faster of the ``hf`` engine's fp32 and bf16), ``sync_s``,
``verify_s`` (bf16 engine), ``logprob_max_abs_diff`` (bf16 engine vs HF fp32; the fp32 engine's under
``sides``), ``ray_push_s`` (side ``ray``: one push into a Ray rollout worker actor whose engine is vLLM
bf16: the state dict through the object store, the replica's ``load_weights``, then its engine's verified
sync; the median of three).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from execrl.bench._report import write_report

__all__ = ["add_arguments", "run"]

SHAPES = {"bench": (8, 8, 128, 1.0), "main": (4, 8, 96, 0.7)}  # prompts, samples, new tokens, temperature
SIDES = (
    ("vllm", "bfloat16"),
    ("vllm", "float32"),
    ("hf", "float32"),
    ("hf", "bfloat16"),
    ("generate", "float32"),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", type=Path, default=None, help="write the results as JSON here")
    parser.add_argument("--threads", type=int, default=2, help="torch / OpenMP threads of every side")
    parser.add_argument("--model-dir", type=Path, default=None, help="model directory (default: SmolLM2)")
    parser.add_argument(
        "--sides", default=",".join(f"{n}:{d}" for n, d in SIDES), help="NAME:DTYPE,... (default: all five)"
    )
    parser.add_argument("--shapes", default="bench,main", help="bench, main or both (default)")
    parser.add_argument("--side", default=None, help=argparse.SUPPRESS)  # one side, in its own process
    parser.add_argument("--dtype", default="float32", help=argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
    if args.side is not None:
        return _run_side(args)
    shapes = [s for s in args.shapes.split(",") if s]
    sides = [tuple(s.split(":")) for s in args.sides.split(",") if s]
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="execrl-bench-engines-") as tmp:
        for name, dtype in sides:
            out = Path(tmp) / f"{name}-{dtype}.json"
            command = [
                sys.executable, "-m", "execrl.cli", "bench", "engines", "--side", name, "--dtype", dtype,
                "--threads", str(args.threads), "--shapes", ",".join(shapes), "--json", str(out),
            ]  # fmt: skip
            if args.model_dir is not None:
                command += ["--model-dir", str(args.model_dir)]
            print(f"side {name} {dtype} (load {os.getloadavg()[0]:.2f})", flush=True)
            subprocess.run(command, check=True)
            results[f"{name}:{dtype}"] = json.loads(out.read_text())
    report = _report(results, args, shapes)
    _print_table(report)
    if args.json is not None:
        write_report(args.json, report)
        print(f"wrote {args.json}")
    return 0


def _report(results: dict[str, Any], args: argparse.Namespace, shapes: list[str]) -> dict[str, Any]:
    def rate(side: str, shape: str = "bench") -> float | None:
        found = results.get(side, {}).get("shapes", {}).get(shape)
        return None if found is None else float(found["tokens_per_s"])

    def ratio(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None else a / b

    hf_best = max((r for r in (rate("hf:float32"), rate("hf:bfloat16")) if r is not None), default=None)
    vllm = results.get("vllm:bfloat16", {})
    return {
        "benchmark": "engines",
        "timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
        "shapes": {
            name: dict(
                zip(("prompts", "samples", "max_new_tokens", "temperature"), SHAPES[name], strict=True)
            )
            for name in shapes
        },  # fmt: skip
        "ratio_vllm_vs_generate": ratio(rate("vllm:bfloat16"), rate("generate:float32")),
        "ratio_vllm_vs_hf_engine": ratio(rate("vllm:bfloat16"), hf_best),
        "ratio_vllm_fp32_vs_generate": ratio(rate("vllm:float32"), rate("generate:float32")),
        "ratio_vllm_fp32_vs_hf_engine_fp32": ratio(rate("vllm:float32"), rate("hf:float32")),
        "ratio_vllm_vs_hf_engine_main_shape": ratio(
            rate("vllm:bfloat16", "main"),
            max((r for r in (rate("hf:float32", "main"), rate("hf:bfloat16", "main")) if r), default=None),
        ),
        "sync_s": vllm.get("sync", {}).get("transfer_s"),
        "verify_s": vllm.get("sync", {}).get("verify_s"),
        "logprob_max_abs_diff": vllm.get("logprob_max_abs_diff"),
        "ray_push_s": next((r["push"]["push_s"] for k, r in results.items() if k.startswith("ray:")), None),
        "sides": results,
        "threads": args.threads,
        "host": {
            "cpus": os.cpu_count(),
            "machine": platform.machine(),
            "cpu_flags": _cpu_flags(),
            "load_avg_1m": os.getloadavg()[0],
        },  # fmt: skip
    }


def _cpu_flags() -> list[str]:
    try:
        flags = Path("/proc/cpuinfo").read_text().split("flags", 1)[1].split("\n", 1)[0].split()
    except (OSError, IndexError):
        return []
    return sorted(f for f in flags if f.startswith(("avx512_bf16", "amx", "avx512f", "avx2")))


# -- one side, in its own process --------------------------------------------------------------------------
def _run_side(args: argparse.Namespace) -> int:
    import torch

    if args.side == "ray":
        return _run_ray_side(args)

    from execrl.bench.rollout import _prompt_texts
    from execrl.rollout import encode_prompts, load_model_and_tokenizer
    from execrl.rollout.models import default_model_dir

    torch.set_num_threads(args.threads)
    model_dir = args.model_dir or default_model_dir()
    dtype = getattr(torch, args.dtype)
    model, tokenizer = load_model_and_tokenizer(
        model_dir, dtype=torch.float32 if args.side == "vllm" else dtype
    )
    prompts = encode_prompts(tokenizer, _prompt_texts("suites", 8))
    side = _Side(args.side, args.dtype, model, tokenizer, args.threads)
    out: dict[str, Any] = {"side": args.side, "dtype": args.dtype, "load_avg_1m": os.getloadavg()[0]}
    try:
        side.warm_up(prompts)
        out["shapes"] = {name: side.timed(prompts, *SHAPES[name]) for name in args.shapes.split(",") if name}
        if args.side == "vllm":
            out.update(side.vllm_extras(prompts))
    finally:
        side.close()
    write_report(args.json, out)
    return 0


def _run_ray_side(args: argparse.Namespace) -> int:
    """The sync into a Ray rollout worker's vLLM engine: object store, replica, engine (three pushes)."""
    from execrl.config import load_config
    from execrl.distributed.ray_executor import time_weight_pushes
    from execrl.rollout import load_model_and_tokenizer
    from execrl.rollout.models import default_model_dir

    model_dir = args.model_dir or default_model_dir()
    model, _ = load_model_and_tokenizer(model_dir)
    config = load_config(None, [f"model.path={model_dir}", "rollout.engine=vllm", f"vllm.dtype={args.dtype}"])
    pushes = time_weight_pushes(config, model, 4)[1:]  # the first one loads the initial weights
    middle = sorted(pushes, key=lambda p: p["push_s"])[1]
    write_report(args.json, {"side": "ray", "dtype": args.dtype, "push": middle, "pushes": pushes})
    return 0


class _Side:
    """One contender: ``vllm`` (execrl's adapter over vLLM's process), ``hf`` (execrl's engine) or
    ``generate`` (``model.generate``)."""

    def __init__(self, name: str, dtype: str, model: Any, tokenizer: Any, threads: int) -> None:
        self.name, self.dtype, self.model, self.tokenizer = name, dtype, model, tokenizer
        self.engine: Any = None
        if name == "vllm":
            from execrl.rollout.vllm_engine import VLLMEngine, VLLMSettings

            settings = VLLMSettings(dtype=dtype, threads=threads)  # type: ignore[arg-type]
            self.engine = VLLMEngine.for_model(model, tokenizer, settings=settings)
            self.engine.sync_weights(model, 0)
        elif name == "hf":
            from execrl.rollout import HFEngine

            self.engine = HFEngine(model, tokenizer)

    def warm_up(self, prompts: list[list[int]]) -> None:
        self.generate(prompts[:2], 2, 8, 1.0)

    def generate(self, prompts: list[list[int]], samples: int, tokens: int, temperature: float) -> Any:
        from execrl.rollout import SamplingParams

        if self.name == "generate":
            return _hf_generate(self.model, self.tokenizer, prompts, samples, tokens, temperature)
        params = SamplingParams(
            samples_per_prompt=samples, max_new_tokens=tokens, temperature=temperature, ignore_eos=True
        )
        return self.engine.generate(prompts, params)

    def timed(
        self, prompts: list[list[int]], count: int, samples: int, tokens: int, temperature: float
    ) -> dict[str, Any]:
        if self.name == "vllm":
            self.engine.call("reset_prefix_cache")
            self.engine.call("timings")
        start = time.perf_counter()
        batch = self.generate(prompts[:count], samples, tokens, temperature)
        seconds = time.perf_counter() - start
        made = count * samples * tokens if self.name == "generate" else int(batch.response_mask.sum())
        result: dict[str, Any] = {"tokens": made, "seconds": seconds, "tokens_per_s": made / seconds}
        if self.name == "vllm":
            result["profile"] = self.engine.call("timings")
        elif self.name == "hf":
            result["profile"] = {"prefill_s": batch.stats.prefill_s, "decode_s": batch.stats.decode_s}
        print(
            f"  {self.name} {self.dtype} {count}x{samples}x{tokens}: {made / seconds:.1f} tok/s", flush=True
        )
        return result

    def vllm_extras(self, prompts: list[list[int]]) -> dict[str, Any]:
        """The mismatch on the bench batch, and three nudged syncs (median)."""
        import torch

        from execrl.rollout import logprob_mismatch

        batch = self.generate(prompts, 8, 128, 1.0)
        mismatch = logprob_mismatch(self.model, batch)
        reports = []
        for version in (1, 2, 3):
            with torch.no_grad():
                for param in self.model.parameters():
                    param.mul_(1.0 + 1e-4 * (-1) ** version)
            reports.append(self.engine.sync_weights(self.model, version))
        middle = sorted(reports, key=lambda r: r.transfer_s + r.verify_s)[1]
        sync = {
            "transfer_s": middle.transfer_s, "verify_s": middle.verify_s, "bytes": middle.bytes,
            "buckets": middle.buckets, "probe_max_abs_diff": middle.probe_max_abs_diff,
            "runs_s": [[r.transfer_s, r.verify_s] for r in reports],
        }  # fmt: skip
        return {"logprob_max_abs_diff": mismatch, "sync": sync}

    def close(self) -> None:
        if self.engine is not None and hasattr(self.engine, "close"):
            self.engine.close()


def _hf_generate(
    model: Any, tokenizer: Any, prompts: list[list[int]], samples: int, tokens: int, temperature: float
) -> Any:
    import torch

    from execrl.rollout.hf_engine import left_pad, resolve_eos_token_ids

    input_ids, attention_mask, _ = left_pad(prompts, tokenizer.pad_token_id)
    with torch.inference_mode():
        return model.generate(
            input_ids=input_ids, attention_mask=attention_mask, do_sample=True, num_return_sequences=samples,
            max_new_tokens=tokens, min_new_tokens=tokens, temperature=temperature, top_k=0, top_p=1.0,
            eos_token_id=resolve_eos_token_ids(model, tokenizer), pad_token_id=tokenizer.pad_token_id,
        )  # fmt: skip


def _print_table(report: dict[str, Any]) -> None:
    print(f"{'side':<18} {'shape':<6} {'tokens':>7} {'seconds':>8} {'tokens/s':>9}")
    for side, result in report["sides"].items():
        for shape, r in result.get("shapes", {}).items():
            print(f"{side:<18} {shape:<6} {r['tokens']:>7} {r['seconds']:>8.2f} {r['tokens_per_s']:>9.1f}")
    for key in (
        "ratio_vllm_vs_generate",
        "ratio_vllm_vs_hf_engine",
        "sync_s",
        "verify_s",
        "logprob_max_abs_diff",
    ):
        value = report[key]
        print(f"{key}: {'n/a' if value is None else f'{value:.4g}'}")
