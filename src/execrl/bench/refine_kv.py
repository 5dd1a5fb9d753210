"""`execrl bench refine-kv`: a refine run with KV reuse across turns vs the same run re-prefilling every turn.

Both sides run the refine condition (first attempt + ``--rounds - 1`` repairs with detailed feedback,
:func:`execrl.refine.evaluate.run_condition`: the one rollout loop with the refine environment) through
:class:`execrl.episodes.LocalBackend` on the same engine object, greedy, so they generate the same tokens
(``identical_completions`` checks it):

- ``reuse``: the backend's prefix cache on inside the rollout call (:mod:`execrl.rollout.prefix_cache`);
- ``no_reuse``: ``reuse_kv_max_bytes=0``, every turn re-prefills the whole conversation (the behaviour
  before the prefix cache, the peer).

Reported per side: prompt tokens prefilled and reused, prefill seconds, generation seconds (all
``generate`` calls) and wall seconds of the whole refine (sandbox included, identical work on both sides);
``prefill_tokens_saved`` and ``prefill_s_ratio``/``wall_s_ratio`` (no_reuse over reuse). ``--model tiny``
uses a tiny random Llama with SmolLM2's tokenizer (its code never passes, so every problem takes all rounds).

Measured (2026-12-01, before the port onto the rollout loop, when a turn re-encoded the conversation's text;
now a turn's context is the exact ids so far, so every lookup of the cache can hit; 2 shared CPU cores at load average ~16, so the times are noise-dominated):
``execrl bench refine-kv --model tiny --limit 3 --max-new-tokens 32`` (one run per side, before
``--repeats`` existed): 9 turns per side, identical completions; prompt tokens prefilled 2375 without reuse
vs 943 with it (1432 = 60% served from the cache). Times in that run: prefill 4.8 s vs 7.6 s, wall 85 s vs
132 s, i.e. the reuse side was *slower*; on this model decoding (a 49152-word head per token) dominates and
the machine's load swung by more than the whole prefill. An engine-level check of the same shape (3
conversations of 250-310 tokens, 3 turns, 32 new tokens, 1 thread, second repetition) gave prefill 0.39 s
-> 0.07 s and 0.26 s -> 0.08 s on turns 2 and 3. The SmolLM2-135M run did not finish within the session.

Limits: a CPU measurement on a shared machine (load average recorded; the sides alternate ``--repeats``
times and each time is the minimum over its runs); a few problems.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from execrl.bench._report import write_report

__all__ = ["add_arguments", "run"]

SIDES = ("no_reuse", "reuse")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", type=Path, default=None, help="write the results as JSON here")
    parser.add_argument(
        "--model", default="smollm2-135m-instruct", help="model, run dir, checkpoint or 'tiny'"
    )
    parser.add_argument("--suite", default="humaneval")
    parser.add_argument("--limit", type=int, default=4, help="first N problems of the suite")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads")
    parser.add_argument(
        "--repeats", type=int, default=2, help="runs per side, alternating; times are the min"
    )


@dataclass
class _Recorder:
    """Wraps the engine: sums every call's stats; the prefix cache is the wrapped engine's."""

    engine: Any
    prompt_tokens: int = 0
    reused_tokens: int = 0
    prefill_s: float = 0.0
    generate_s: float = 0.0

    @property
    def prefix_cache(self) -> Any:
        return self.engine.prefix_cache

    @prefix_cache.setter
    def prefix_cache(self, cache: Any) -> None:
        self.engine.prefix_cache = cache

    @property
    def can_reuse_prefixes(self) -> bool:
        return bool(self.engine.can_reuse_prefixes)

    def generate(self, prompts: Sequence[Sequence[int]], params: Any) -> Any:
        batch = self.engine.generate(prompts, params)
        stats = batch.stats
        self.prompt_tokens += stats.prompt_tokens
        self.reused_tokens += stats.reused_prompt_tokens
        self.prefill_s += stats.prefill_s
        self.generate_s += stats.total_s
        return batch


def _load(name: str) -> tuple[Any, Any, str]:
    if name == "tiny":
        from execrl.rollout.models import default_tokenizer, tiny_model

        return tiny_model(seed=0, init_std=0.5), default_tokenizer(), "tiny random Llama (SmolLM2 tokenizer)"
    from execrl.serve.export import load_any_model

    model, tokenizer, source = load_any_model(name)
    return model, tokenizer, source.description


def _side(side: str, engine: Any, tokenizer: Any, tasks: Any, sandbox: Any, config: Any) -> dict[str, Any]:
    from execrl.episodes import LocalBackend
    from execrl.refine.evaluate import run_condition

    engine.prefix_cache = None
    recorder = _Recorder(engine)
    reuse_bytes = 4 << 30 if side == "reuse" else 0
    backend = LocalBackend(recorder, tokenizer, reuse_kv_max_bytes=reuse_bytes)  # type: ignore[arg-type]
    start = time.perf_counter()
    runs = run_condition(tasks, backend, sandbox, config, condition="refine")  # the cache lives in the call
    wall = time.perf_counter() - start
    engine.prefix_cache = None
    return {
        "prompt_tokens": recorder.prompt_tokens,
        "reused_prompt_tokens": recorder.reused_tokens,
        "prefilled_prompt_tokens": recorder.prompt_tokens - recorder.reused_tokens,
        "prefill_s": recorder.prefill_s,
        "generate_s": recorder.generate_s,
        "wall_s": wall,
        "turns": sum(len(r.attempts) for r in runs),
        "completions": [[a.completion for a in r.attempts] for r in runs],
    }


def _fastest(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Token counts of the first run (every run generates the same tokens), min of each time, all walls."""
    out = dict(results[0])
    for key in ("prefill_s", "generate_s", "wall_s"):
        out[key] = min(r[key] for r in results)
    out["wall_s_all"] = [r["wall_s"] for r in results]
    out["same_completions_every_run"] = all(r["completions"] == results[0]["completions"] for r in results)
    return out


def run(args: argparse.Namespace) -> int:
    import torch

    from execrl.refine.runs import GenerationParams, RefineConfig
    from execrl.rollout.engine import create_engine
    from execrl.sandbox import Sandbox, SandboxConfig
    from execrl.tasks import load_suite

    torch.set_num_threads(args.threads)
    model, tokenizer, description = _load(args.model)
    engine = create_engine("hf", model=model, tokenizer=tokenizer)
    tasks = load_suite(args.suite, split="test")[: args.limit]
    generation = GenerationParams(max_new_tokens=args.max_new_tokens, temperature=0.0)
    config = RefineConfig(rounds=args.rounds, generation=generation)
    runs: dict[str, list[dict[str, Any]]] = {side: [] for side in SIDES}
    with Sandbox(SandboxConfig(workers=2)) as sandbox:
        _side("reuse", engine, tokenizer, tasks[:1], sandbox, config)  # warm-up, not reported
        for _ in range(args.repeats):
            for side in SIDES:
                runs[side].append(_side(side, engine, tokenizer, tasks, sandbox, config))
    sides = {side: _fastest(results) for side, results in runs.items()}
    report = _report(args, description, sides)
    for side in SIDES:
        row = sides[side]
        print(
            f"{side:<9} prefilled {row['prefilled_prompt_tokens']:>7} reused {row['reused_prompt_tokens']:>7} "
            f"prefill {row['prefill_s']:7.2f} s  generate {row['generate_s']:7.2f} s  wall {row['wall_s']:7.2f} s"
        )
    print(
        f"saved {report['prefill_tokens_saved']} prefill tokens; prefill {report['prefill_s_ratio']:.2f}x, "
        f"wall {report['wall_s_ratio']:.2f}x; identical completions: {report['identical_completions']}"
    )
    if args.json is not None:
        write_report(args.json, report)
        print(f"wrote {args.json}")
    return 0


def _report(args: argparse.Namespace, model: str, sides: dict[str, dict[str, Any]]) -> dict[str, Any]:
    import torch
    import transformers

    reuse, plain = sides["reuse"], sides["no_reuse"]
    identical = reuse.pop("completions") == plain.pop("completions")
    return {
        "benchmark": "refine-kv",
        "timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
        "model": model,
        "suite": args.suite,
        "problems": args.limit,
        "rounds": args.rounds,
        "max_new_tokens": args.max_new_tokens,
        "threads": args.threads,
        "repeats": args.repeats,
        "sides": sides,
        "identical_completions": identical,
        "prefill_tokens_saved": plain["prefilled_prompt_tokens"] - reuse["prefilled_prompt_tokens"],
        "prefill_s_ratio": plain["prefill_s"] / max(reuse["prefill_s"], 1e-9),
        "generate_s_ratio": plain["generate_s"] / max(reuse["generate_s"], 1e-9),
        "wall_s_ratio": plain["wall_s"] / max(reuse["wall_s"], 1e-9),
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
        "host": {"cpus": os.cpu_count(), "load_avg_1m": os.getloadavg()[0]},
    }
