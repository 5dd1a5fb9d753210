"""`execrl bench long-context`: one GRPO step on one long shared prompt, execrl vs TRL's ``GRPOTrainer``.

For each prompt length (default 512, 2,048, 4,096 and 8,192 tokens, chat template included), both sides
train SmolLM2-135M-Instruct (float32, CPU, ``--threads`` torch threads) on one prompt cut from the
``repository-long`` suite's prompts (code and tests of the built-in repositories) to exactly that length,
``--samples`` completions of ``--max-new-tokens`` tokens at temperature 1, and one AdamW step (TRL loss type
``dapo``, execrl's ``token-mean``; no KL; clip 0.2). The reward is synthetic and the same function on both
sides (distinct characters of the completion / 100): this benchmark measures the trainer's time and memory
on long prompts, not learning, and a sandbox would only add the same time to both.

What one step is on each side:

- execrl: ``HFEngine`` group sampling (the prompt is prefilled once for the group), GRPO advantages,
  ``episodes_to_batch`` and ``policy_update`` (old log-probs from the engine; the prompt runs through the trunk
  once per micro-batch, ``execrl.trainer.prefix``; activation checkpointing with ``--execrl-checkpointing``,
  default on; log-probs and entropy chunked over the sequence).
- TRL at its best memory settings on this machine: ``GRPOTrainer`` with ``gradient_checkpointing`` (HF
  activation checkpointing) on, float32, one generation batch (``bf16`` is not an option on CPU float32
  training, Liger kernels are not installed, vLLM needs a GPU). ``--trl-checkpointing off`` turns it off.

Each side runs in its own process (``start_new_session=True``), so its peak RSS (``ru_maxrss`` of that child,
from ``wait4``) is its own, and each runs ``--steps`` + 1 steps, the first excluded from the time (TRL also
records its first batch there). Loss agreement: at ``--loss-check-lengths`` (default 512 and 4,096), TRL's
first batch and its loss are saved and a third process runs execrl's update on exactly that batch from the
initial weights (``execrl.bench._trl_side.check_loss_agreement``, tolerance 1e-4, as ``bench train``).
A side that runs past ``--timeout-s`` is killed and reported as not completed.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from execrl.bench._report import write_report
from execrl.episodes.single import first_messages
from execrl.episodes.types import Prompt, Response, Verdict
from execrl.tasks.schema import Task

__all__ = ["add_arguments", "run"]

GOAL_SPEEDUP, GOAL_MEMORY_RATIO_4096, GOAL_8192_GB = 2.0, 0.5, 20.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", type=Path, default=None, help="write the results as JSON here")
    parser.add_argument(
        "--lengths", default="512,2048,4096,8192", help="prompt lengths in tokens, comma-separated"
    )
    parser.add_argument("--samples", type=int, default=4, help="samples per prompt (default 4)")
    parser.add_argument("--max-new-tokens", type=int, default=64, help="tokens per completion (default 64)")
    parser.add_argument(
        "--steps", type=int, default=1, help="timed steps per side after 1 warm-up (default 1)"
    )
    parser.add_argument("--sides", default="execrl,trl", help="which sides to run (default both)")
    parser.add_argument(
        "--loss-check-lengths", default="512,4096", help="lengths whose first-batch loss is checked"
    )
    parser.add_argument("--execrl-checkpointing", choices=("on", "off"), default="on")
    parser.add_argument("--trl-checkpointing", choices=("on", "off"), default="on")
    parser.add_argument("--learning-rate", type=float, default=1e-6, help="both sides (default 1e-6)")
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads for both sides")
    parser.add_argument("--timeout-s", type=float, default=3600.0, help="per side and length (default 3600)")
    parser.add_argument("--model-dir", type=Path, default=None, help="model directory (default: SmolLM2)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--work-dir", type=Path, default=None,
        help="keep each side's result here (default: a temporary directory); a re-run with the same "
        "directory and settings reuses the sides already there (an interrupted run goes on)",
    )  # fmt: skip
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)  # internal: JSON of one side's job


def synthetic_reward(texts: list[str]) -> list[float]:
    """Distinct characters of each completion / 100: deterministic, cheap and rarely equal within a group."""
    return [len(set(text)) / 100.0 for text in texts]


def long_prompt(tokenizer: Any, length: int) -> str:
    """A user message whose chat-encoded prompt is exactly ``length`` tokens: text of the ``repository-long``
    prompts, cut at a token boundary (re-cut until the encoded length matches)."""
    from execrl.rollout.prompts import encode_prompts
    from execrl.tasks.suites.repository_long import build

    source = "\n\n".join(t.prompt for t in build("train", 0))
    ids = tokenizer(source, add_special_tokens=False)["input_ids"]
    overhead = len(encode_prompts(tokenizer, [""])[0])
    keep = length - overhead
    for _ in range(8):
        text = tokenizer.decode(ids[:keep])
        got = len(encode_prompts(tokenizer, [text])[0])
        if got == length:
            return str(text)
        keep += length - got
    raise RuntimeError(f"could not cut a prompt of exactly {length} tokens (last try: {got})")


def _peak_rss_mb_self() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


@dataclass(frozen=True)
class SyntheticReward:
    """The benchmark's environment: one turn, judged by ``synthetic_reward`` (no sandbox in the timing)."""

    name: str = "synthetic"

    def start(self, tasks: Sequence[Task], samples_per_task: int, backend: Any) -> _SyntheticLive:
        return _SyntheticLive(list(tasks))

    def metrics(self, episodes: Sequence[Any], *, step_s: float = 0.0) -> dict[str, float]:
        return {}


@dataclass
class _SyntheticLive:
    tasks: list[Task]
    max_turns: int = 1

    def prompt(self, task_index: int) -> Prompt:
        return Prompt(first_messages(self.tasks[task_index]))

    def respond(self, turns: Sequence[Any]) -> list[Response]:
        return [Response(done=True) for _ in turns]

    def judge(self, finals: Sequence[Any]) -> list[Verdict]:
        return [Verdict(r, True, False, "synthetic") for r in synthetic_reward([f.text for f in finals])]

    def close(self) -> None:
        """Nothing to release."""

    def report(self) -> dict[int, dict[str, Any]]:
        return {}


def _execrl_side(job: dict[str, Any]) -> dict[str, Any]:
    """execrl's GRPO step (see module doc), ``steps`` + 1 times; returns times and metrics."""
    import dataclasses

    from execrl.bench._trl_side import execrl_trainer_config
    from execrl.episodes import LocalBackend, episodes_to_batch, group_index, reward_tensors, run_episodes
    from execrl.rollout import SamplingParams, load_model_and_tokenizer
    from execrl.rollout.engine import create_engine
    from execrl.tasks.schema import MathSpec, TaskMetadata
    from execrl.trainer import build_optimizer, compute_advantages, policy_update

    model, tokenizer = load_model_and_tokenizer(job["model_dir"])
    task = Task(id="long/0", domain="math", prompt=long_prompt(tokenizer, job["length"]), spec=MathSpec("0"),
                metadata=TaskMetadata("long"))  # fmt: skip
    backend = LocalBackend(create_engine("hf", model=model, tokenizer=tokenizer), tokenizer)
    config = dataclasses.replace(
        execrl_trainer_config(
            "dapo", learning_rate=job["learning_rate"], max_new_tokens=job["max_new_tokens"]
        ),
        gradient_checkpointing=job["checkpointing"],
    )
    optimizer = build_optimizer(model, config)
    times, rollout_times, tokens, padding = [], [], [], []
    prompt_tokens = 0
    for step in range(job["steps"] + 1):
        started = time.perf_counter()
        params = SamplingParams(
            samples_per_prompt=job["samples"], max_new_tokens=job["max_new_tokens"], temperature=1.0,
            top_k=0, top_p=1.0, seed=job["seed"] + step,
        )  # fmt: skip
        episodes = run_episodes(SyntheticReward(), backend, [task], params=params).episodes
        rollout_times.append(time.perf_counter() - started)  # the rest of the step is the update
        rewards, valid = reward_tensors(episodes)  # [N] each
        advantages = compute_advantages(
            "grpo", rewards, group_ids=group_index(episodes), valid=valid, eps=config.advantage_std_eps
        )
        batch = episodes_to_batch(episodes, advantages, valid, pad_token_id=backend.pad_token_id,
                                  old_logprobs_from_rollout=True)  # fmt: skip
        metrics = policy_update(model, optimizer, None, batch, config)
        times.append(time.perf_counter() - started)
        tokens.append(sum(e.model_tokens for e in episodes))
        padding.append(metrics["train/padding_share"])
        prompt_tokens = episodes[0].prompt_tokens
        print(f"[bench long-context] execrl {job['length']} step {step}: {times[-1]:.1f} s", file=sys.stderr)
    return {"step_times_s": times, "rollout_times_s": rollout_times, "generated_tokens": tokens,
            "padding_share": padding, "prompt_tokens": prompt_tokens}  # fmt: skip


def _trl_side(job: dict[str, Any]) -> dict[str, Any]:
    """TRL's ``GRPOTrainer`` on the same prompt and reward; saves its first batch for the loss check."""
    import torch

    from execrl.bench._trl_side import TRLSettings, run_trl
    from execrl.rollout import load_model_and_tokenizer

    model, tokenizer = load_model_and_tokenizer(job["model_dir"])
    prompt = long_prompt(tokenizer, job["length"])
    settings = TRLSettings(
        loss_type="dapo", learning_rate=job["learning_rate"], prompts=1, samples_per_prompt=job["samples"],
        max_new_tokens=job["max_new_tokens"], total_steps=job["steps"] + 1, seed=job["seed"],
        activation_checkpointing=job["checkpointing"],
    )  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="execrl-bench-long-trl-") as out_dir:
        result = run_trl(
            model,
            tokenizer,
            [prompt],
            lambda _i, texts: synthetic_reward(list(texts)),
            settings,
            Path(out_dir),
        )
    if job.get("captured_path"):
        torch.save(result.captured, job["captured_path"])
    return {"step_times_s": list(result.step_times_s), "generated_tokens": list(result.generated_tokens)}


def _check_side(job: dict[str, Any]) -> dict[str, Any]:
    """execrl's update on TRL's saved first batch from the initial weights (``check_loss_agreement``)."""
    import dataclasses

    import torch

    from execrl.bench._trl_side import check_loss_agreement
    from execrl.rollout import load_model_and_tokenizer

    initial, _ = load_model_and_tokenizer(job["model_dir"])
    captured = torch.load(job["captured_path"], weights_only=False)  # written by this benchmark's TRL child
    captured = dataclasses.replace(captured, losses_by_type={"dapo": captured.losses_by_type["dapo"]})
    checks = check_loss_agreement(initial, captured, learning_rate=job["learning_rate"])
    return {"checks": [dataclasses.asdict(c) for c in checks]}


def _child_main(job: dict[str, Any]) -> int:
    import torch

    torch.set_num_threads(job["threads"])
    side = {"execrl": _execrl_side, "trl": _trl_side, "check": _check_side}[job["side"]]
    out = side(job)
    out["self_peak_rss_mb"] = _peak_rss_mb_self()
    Path(job["out_path"]).write_text(json.dumps(out))
    return 0


def _spawn(job: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    """Run one side in its own process and session; its result plus ``peak_rss_mb`` (``wait4``'s
    ``ru_maxrss`` of the child) and ``wall_s``, or ``completed: False`` with the reason. A side whose
    result is already in the work directory (``--work-dir``) is not run again: the result is reused,
    marked ``reused``; with no record of ``wait4`` there (a run killed before it wrote one), its peak
    RSS is the child's own ``ru_maxrss`` (``RUSAGE_SELF``, the same process) and ``wall_s`` is None."""
    record = Path(job["out_path"]).with_suffix(".result.json")
    if record.exists():
        return {**json.loads(record.read_text()), "reused": True}
    if Path(job["out_path"]).exists():
        out = json.loads(Path(job["out_path"]).read_text())
        return {
            "completed": True,
            **out,
            "peak_rss_mb": out["self_peak_rss_mb"],
            "wall_s": None,
            "reused": True,
        }
    result = _run_child(job, timeout_s)
    record.write_text(json.dumps(result))
    return result


def _run_child(job: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "execrl.cli", "bench", "long-context", "--child", json.dumps(job)]
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, start_new_session=True)  # noqa: S603 (our own interpreter and module)
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() - started > timeout_s:
            os.killpg(proc.pid, signal.SIGKILL)
            pid, status, usage = os.wait4(proc.pid, 0)
            return {"completed": False, "reason": f"timed out after {timeout_s:.0f} s",
                    "peak_rss_mb": usage.ru_maxrss / 1024.0}  # fmt: skip
        time.sleep(0.5)
    proc.returncode = os.waitstatus_to_exitcode(status)
    base = {"peak_rss_mb": usage.ru_maxrss / 1024.0, "wall_s": time.perf_counter() - started}
    if proc.returncode != 0:
        return {"completed": False, "reason": f"exit status {proc.returncode}", **base}
    return {"completed": True, **json.loads(Path(job["out_path"]).read_text()), **base}


def _step_s(side: dict[str, Any]) -> float | None:
    times = side.get("step_times_s") or []
    timed = times[1:] or times
    return sum(timed) / len(timed) if side.get("completed") and timed else None


def _length_row(length: int, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    common = {
        "model_dir": str(args.model_dir or _default_model_dir()), "length": length, "samples": args.samples,
        "max_new_tokens": args.max_new_tokens, "steps": args.steps, "learning_rate": args.learning_rate,
        "threads": args.threads, "seed": args.seed,
    }  # fmt: skip
    sides = args.sides.split(",")
    checked = length in {int(x) for x in args.loss_check_lengths.split(",") if x}
    row: dict[str, Any] = {"prompt_tokens": length}
    captured = str(tmp / f"captured_{length}.pt") if checked and "trl" in sides else ""
    for side in sides:
        flag = (args.execrl_checkpointing if side == "execrl" else args.trl_checkpointing) == "on"
        job = {**common, "side": side, "checkpointing": flag, "out_path": str(tmp / f"{side}_{length}.json"),
               "captured_path": captured if side == "trl" else ""}  # fmt: skip
        row[side] = _spawn(job, args.timeout_s)
        row[side]["step_s"] = _step_s(row[side])
    ours, theirs = row.get("execrl", {}), row.get("trl", {})
    if ours.get("step_s") and theirs.get("step_s"):
        row["speedup_vs_trl"] = theirs["step_s"] / ours["step_s"]
        row["peak_rss_ratio_vs_trl"] = ours["peak_rss_mb"] / theirs["peak_rss_mb"]
    if captured and theirs.get("completed"):
        job = {
            **common,
            "side": "check",
            "captured_path": captured,
            "out_path": str(tmp / f"check_{length}.json"),
        }
        row["loss_check"] = _spawn(job, args.timeout_s)
    return row


def _default_model_dir() -> Path:
    from execrl.rollout.models import default_model_dir

    return default_model_dir()


def _goals(rows: list[dict[str, Any]]) -> dict[str, Any]:
    by_length = {r["prompt_tokens"]: r for r in rows}
    speedups = [r["speedup_vs_trl"] for r in rows if "speedup_vs_trl" in r]
    at_4096 = by_length.get(4096, {}).get("peak_rss_ratio_vs_trl")
    at_8192 = by_length.get(8192, {}).get("execrl", {})
    checks = [c for r in rows for c in r.get("loss_check", {}).get("checks", [])]
    return {
        f"step_speedup_ge_{GOAL_SPEEDUP:g}x_where_trl_completes": None if not speedups  # TRL not run or done
        else min(speedups) >= GOAL_SPEEDUP,
        f"peak_rss_le_{GOAL_MEMORY_RATIO_4096:g}x_trl_at_4096": None if at_4096 is None else at_4096 <= GOAL_MEMORY_RATIO_4096,
        f"execrl_8192_within_{GOAL_8192_GB:g}_gb": None if not at_8192.get("completed")
        else at_8192["peak_rss_mb"] <= GOAL_8192_GB * 1024,
        "loss_within_1e-4": None if not checks else all(c["ok"] for c in checks),
    }  # fmt: skip


def run(args: argparse.Namespace) -> int:
    if args.child is not None:
        return _child_main(json.loads(args.child))
    lengths = [int(x) for x in args.lengths.split(",") if x]
    started = time.perf_counter()
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="execrl-bench-long-") as tmp:
        work = _work_dir(args, Path(tmp))
        rows = []
        for length in lengths:  # the report is rewritten after each length: an interrupted run keeps its rows
            rows.append(_length_row(length, args, work))
            report = _report(args, rows, started, load_before)
            if args.json is not None:
                write_report(args.json, json.loads(json.dumps(report, default=str)))
    _print_table(rows)
    if args.json is not None:
        print(f"wrote {args.json}")
    checks = [c for r in rows for c in r.get("loss_check", {}).get("checks", [])]
    return 0 if all(c["ok"] for c in checks) else 1


_SETTINGS_SKIPPED = ("json", "child", "handler", "func", "work_dir", "timeout_s", "lengths")


def _work_dir(args: argparse.Namespace, tmp: Path) -> Path:
    """``--work-dir`` (created; its ``settings.json`` must match this run's) or the temporary directory."""
    if args.work_dir is None:
        return tmp
    args.work_dir.mkdir(parents=True, exist_ok=True)
    settings = {k: str(v) for k, v in vars(args).items() if k not in _SETTINGS_SKIPPED}
    path = args.work_dir / "settings.json"
    if path.exists() and json.loads(path.read_text()) != settings:
        raise SystemExit(f"--work-dir {args.work_dir} holds results of other settings ({path}); use another")
    path.write_text(json.dumps(settings, indent=1))
    return Path(args.work_dir)


def _report(
    args: argparse.Namespace, rows: list[dict[str, Any]], started: float, load_before: float
) -> dict[str, Any]:
    return {
        "benchmark": "long-context",
        "settings": {k: v for k, v in vars(args).items() if k not in ("json", "child", "handler", "func")},
        "trl_memory_settings": "gradient_checkpointing=True, float32, one generation batch"
        if args.trl_checkpointing == "on" else "gradient_checkpointing=False",
        "rows": rows,
        "goals": _goals(rows),
        "wall_s": time.perf_counter() - started,
        "host": {"load_avg_1m_before": load_before, "load_avg_1m_now": os.getloadavg()[0], "cpus": os.cpu_count()},
    }  # fmt: skip


def _print_table(rows: list[dict[str, Any]]) -> None:
    print(
        f"{'tokens':>7} {'execrl s':>9} {'TRL s':>9} {'speedup':>8} {'execrl MB':>10} {'TRL MB':>9} {'mem x':>6}"
    )
    for r in rows:
        ours, theirs = r.get("execrl", {}), r.get("trl", {})

        def cell(value: float | None, fmt: str) -> str:
            return format(value, fmt) if value is not None else "-"

        print(
            f"{r['prompt_tokens']:>7} {cell(ours.get('step_s'), '9.2f')} {cell(theirs.get('step_s'), '9.2f')} "
            f"{cell(r.get('speedup_vs_trl'), '7.2f')}x {cell(ours.get('peak_rss_mb'), '10.0f')} "
            f"{cell(theirs.get('peak_rss_mb'), '9.0f')} {cell(r.get('peak_rss_ratio_vs_trl'), '6.2f')}"
        )
